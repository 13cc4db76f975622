package optim

import (
	"fmt"
	"math/big"

	"github.com/stoke-ml/stoke/nn"
)

// Layered is a module of package nn whose tensors lie in a stack of blocks, which LayerDecay
// needs: LayerID is the depth of the tensor named name (its nn.StateDict name) and last the
// depth of the head, timm's layer ids: 0 for the embeddings before the first block, i+1 for block
// i's tensors (counted through every stage of a hierarchical model), last = blocks+1 for the head
// (timm's get_layer_id_for_vit for a ViT, its group_matcher for the others).
type Layered interface {
	LayerID(name string) (id, last int)
}

// LayerDecay returns the learning-rate factor of each of the tensors named (nn.StateDict names of
// module, which must be Layered) under layer-wise decay: decay^(last-id), rounded once as timm's
// param_groups_layer_decay computes layer_decay ** n, so the head trains at the full rate and
// each block below it at decay times the rate of the block above (BEiT's fine-tuning).
func LayerDecay(module nn.Module, names []string, decay float64) ([]float64, error) {
	lm, ok := module.(Layered)
	if !ok {
		return nil, fmt.Errorf("optim: layer decay %g: the model has no stack of blocks to decay the rate over (a ViT, Swin or ConvNeXt has)", decay)
	}
	scale := make([]float64, len(names))
	for i, name := range names {
		id, last := lm.LayerID(name)
		scale[i] = powRounded(decay, last-id)
	}
	return scale, nil
}

// powRounded is x^n rounded once to the nearest float64, as timm's layer_decay ** n is
// (Python's float power, the C library's pow, correctly rounded but for exact halfway cases,
// which this rounds to even): math.Pow multiplies rounded squares and misses it by a few ulp.
func powRounded(x float64, n int) float64 {
	k := max(n, -n)
	r := new(big.Float).SetPrec(uint(53 * (k + 1))).SetFloat64(1) // wide enough to be exact
	b := new(big.Float).SetFloat64(x)
	for range k {
		r.Mul(r, b)
	}
	if n < 0 {
		r = new(big.Float).SetPrec(53).Quo(big.NewFloat(1), r) // rounded once, to 53 bits
	}
	f, _ := r.Float64()
	return f
}
