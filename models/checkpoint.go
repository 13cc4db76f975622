package models

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
)

// SetGradCheckpointing makes every block of m (the unit a zoo model repeats: a residual block,
// a transformer block, an inverted residual) run under nn.Checkpoint in training, or no longer
// when on is false, as timm's set_grad_checkpointing: the backward pass computes each block's
// activations again, so that training holds one block's at a time instead of all of them. It
// returns how many blocks it set; a model with none (the mlp, a user's model) is an error.
func SetGradCheckpointing(m nn.Module, on bool) (int, error) {
	n := 0
	err := nn.Apply(m, func(b nn.Module) {
		if c, ok := b.(interface{ setGradCheckpointing(bool) }); ok {
			c.setGradCheckpointing(on)
			n++
		}
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("gradient checkpointing: the model has no blocks the zoo knows (residual, transformer or inverted-residual blocks)")
	}
	return n, err
}

// gradCheckpoint is embedded by the zoo's blocks: whether SetGradCheckpointing turned
// checkpointing on for the block.
type gradCheckpoint struct{ on bool }

func (c *gradCheckpoint) setGradCheckpointing(on bool) { c.on = on }

// blockPass is a zoo block's own pass, which its Forward runs through checkpointed.
type blockPass interface{ forward(x *nn.Tensor) *nn.Tensor }

// checkpointed runs b's pass on x, under nn.Checkpoint when checkpointing is on. (b is taken, not
// its method value b.forward, so that a pass without checkpointing allocates no closure.)
func (c *gradCheckpoint) checkpointed(b blockPass, x *nn.Tensor) *nn.Tensor {
	if c.on {
		return nn.Checkpoint(nn.Fn(b.forward), x)
	}
	return b.forward(x)
}
