// Package optim holds the optimizers and learning-rate schedules of training, as torch.optim and
// torch.optim.lr_scheduler: SGD, Adam, AdamW and RMSprop, each its settings and its update of one
// tensor through a backend's op set; State, an optimizer over a set of parameters (Params of a
// module of package nn) with each one's state tensors (momentum, moments) and learning-rate
// factor, which package train keeps for the model and checkpoints; the schedules Constant,
// StepDecay and Cosine; and LayerDecay, timm's layer-wise rate factors.
package optim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
)

// ErrUnknown is the error of an optimizer name New does not know.
var ErrUnknown = errors.New("unknown optimizer")

// Param is a trained tensor as an optimizer sees it: its name, its weights W, updated in place,
// its gradient G (same length) and whether weight decay applies to it (weights of linear and
// convolution layers; not biases, norms' scales and shifts or embeddings).
type Param struct {
	Name  string // in errors: the tensor's state_dict name
	W, G  kernels.F32
	Decay bool
}

// Optimizer updates parameters from their gradients. SGD, Adam, AdamW and RMSprop implement it;
// so can a user's (examples/external has HeavyBall). An Optimizer is its settings: its
// per-parameter state (torch.optim.Optimizer.state) is the trainer's, which allocates it,
// checkpoints it and hands each parameter's to Update (train.Trainer.OptimizerState reads it).
type Optimizer interface {
	// String names the optimizer and its settings; checkpoints record it, and a resumed run
	// must have an optimizer whose String starts with the same word and holds amsgrad=true
	// exactly when the checkpoint's does (the slot AMSGrad adds).
	String() string
	// BaseLR is the learning rate the schedule scales; it must be positive.
	BaseLR() float64
	// Slots is the number of state tensors per parameter (momentum, moments): the trainer
	// allocates them, each of the parameter's length, filled with zeros, checkpoints them and
	// hands them to Update as state.
	Slots() int
	// Update enqueues on s, through ops, one step of p: p.W from the gradient p.G (the mean over
	// the batch, already unscaled under fp16 loss scaling) and state, p's Slots tensors, which it
	// updates in place. lr is this step's rate, the schedule's and the parameter group's factors
	// applied (train.Config.BackboneLRScale, LayerDecay); step counts the updates made, from 1.
	// Apply weight decay only where p.Decay. Frozen parameters are never passed.
	Update(ops kernels.Ops, s gpu.Stream, p Param, state []kernels.F32, lr float64, step int) error
}

// Names are the optimizers New knows.
var Names = []string{"sgd", "adam", "adamw", "rmsprop"}

// New returns the optimizer of that name with stoke's settings, the one place they are
// stated: "sgd" with momentum (Nesterov when it is positive), "adam" and "adamw" with PyTorch's
// betas and eps, without AMSGrad (momentum is their Beta1's business and not used), "rmsprop"
// with momentum and torchvision's MobileNetV3 recipe's alpha 0.9 and eps 0.0316. weightDecay
// applies to weights only (see Param.Decay). An unknown name is an error wrapping ErrUnknown.
func New(name string, lr, momentum, weightDecay float64) (Optimizer, error) {
	switch name {
	case "sgd":
		return SGD{LR: lr, Momentum: momentum, Nesterov: momentum > 0, WeightDecay: weightDecay}, nil
	case "adam":
		a := AdamW{}.withDefaults()
		return Adam{LR: lr, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: weightDecay}, nil
	case "adamw":
		return AdamW{LR: lr, WeightDecay: weightDecay}.withDefaults(), nil
	case "rmsprop":
		return RMSprop{LR: lr, Alpha: 0.9, Eps: 0.0316, Momentum: momentum, WeightDecay: weightDecay}, nil
	}
	return nil, fmt.Errorf("optim: %w %q; want %s", ErrUnknown, name, strings.Join(Names, ", "))
}

// ForRecipe is the optimizer of a model's recipe (models.RecipeFor) for a global batch of batch
// samples: New of its Optimizer at its ScaledLR(batch), momentum 0.9 and its
// weight decay. Its schedule is Cosine(r.WarmupEpochs).
func ForRecipe(r models.Recipe, batch int) (Optimizer, error) {
	return New(r.Optimizer, r.ScaledLR(batch), 0.9, r.WeightDecay)
}

// SGD is stochastic gradient descent with momentum, as PyTorch's torch.optim.SGD without
// dampening: g += WeightDecay*w; v = Momentum*v + g; w -= LR*(Nesterov ? g + Momentum*v : v).
// Weight decay applies to weights only, not to biases or BatchNorm parameters (see
// Param.Decay), as in torchvision's training recipes.
type SGD struct {
	LR, Momentum, WeightDecay float64
	Nesterov                  bool
}

var _ Optimizer = SGD{}

func (o SGD) String() string {
	return fmt.Sprintf("sgd lr=%g momentum=%g weight_decay=%g nesterov=%v", o.LR, o.Momentum, o.WeightDecay, o.Nesterov)
}

// BaseLR returns LR.
func (o SGD) BaseLR() float64 { return o.LR }

func (o SGD) Slots() int {
	if o.Momentum == 0 {
		return 0
	}
	return 1
}

func (o SGD) Update(ops kernels.Ops, s gpu.Stream, p Param, state []kernels.F32, lr float64, _ int) error {
	var v kernels.F32
	if len(state) > 0 {
		v = state[0]
	}
	return ops.SGDStep(s, p.W, p.G, v, kernels.SGD{LR: float32(lr), Momentum: float32(o.Momentum), WeightDecay: decay(p, o.WeightDecay), Nesterov: o.Nesterov})
}

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW. Zero
// Beta1, Beta2 and Eps mean PyTorch's defaults 0.9, 0.999 and 1e-8. Like SGD's, the weight decay
// applies to weights only. Its state is torch's exp_avg and exp_avg_sq, and with AMSGrad (torch's
// amsgrad, Reddi et al.: the denominator from the largest exp_avg_sq so far) max_exp_avg_sq.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	AMSGrad                            bool
}

var _ Optimizer = AdamW{}

func (o AdamW) withDefaults() AdamW {
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	return o
}

func (o AdamW) String() string {
	o = o.withDefaults()
	return fmt.Sprintf("adamw lr=%g betas=(%g,%g) eps=%g weight_decay=%g amsgrad=%v", o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.AMSGrad)
}

// BaseLR returns LR.
func (o AdamW) BaseLR() float64 { return o.LR }

func (o AdamW) Slots() int {
	if o.AMSGrad {
		return 3
	}
	return 2
}

func (o AdamW) Update(ops kernels.Ops, s gpu.Stream, p Param, state []kernels.F32, lr float64, step int) error {
	o = o.withDefaults()
	var vmax kernels.F32
	if o.AMSGrad {
		vmax = state[2]
	}
	return ops.AdamWStep(s, p.W, p.G, state[0], state[1], vmax, kernels.AdamW{LR: float32(lr), Beta1: o.Beta1, Beta2: o.Beta2,
		Eps: float32(o.Eps), WeightDecay: decay(p, o.WeightDecay), Step: step, AMSGrad: o.AMSGrad})
}

// Adam is torch.optim.Adam: Adam (Kingma & Ba) with the weight decay added to the gradient, g +=
// WeightDecay*w (L2, coupled, as torch's Adam; AdamW decouples it, and is what transformers are
// trained with). Zero Beta1, Beta2 and Eps mean PyTorch's defaults 0.9, 0.999 and 1e-8. Like
// SGD's, the weight decay applies to weights only. Its state is torch's exp_avg and exp_avg_sq,
// and with AMSGrad (torch's amsgrad) max_exp_avg_sq.
type Adam struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	AMSGrad                            bool
}

var _ Optimizer = Adam{}

// adamW is o's step without its decay: AdamW's with none.
func (o Adam) adamW() AdamW {
	return AdamW{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, AMSGrad: o.AMSGrad}.withDefaults()
}

func (o Adam) String() string {
	a := o.adamW()
	return fmt.Sprintf("adam lr=%g betas=(%g,%g) eps=%g weight_decay=%g amsgrad=%v", a.LR, a.Beta1, a.Beta2, a.Eps, o.WeightDecay, o.AMSGrad)
}

// BaseLR returns LR.
func (o Adam) BaseLR() float64 { return o.LR }

func (o Adam) Slots() int { return o.adamW().Slots() }

// Update adds the decay to the gradient in place (the trainer's gradient is the step's scratch,
// read by nothing after the update), then takes AdamW's step without decay.
func (o Adam) Update(ops kernels.Ops, s gpu.Stream, p Param, state []kernels.F32, lr float64, step int) error {
	if wd := decay(p, o.WeightDecay); wd != 0 {
		if err := ops.Axpy(s, p.G, wd, p.W); err != nil {
			return err
		}
	}
	return o.adamW().Update(ops, s, p, state, lr, step)
}

// RMSprop is torch.optim.RMSprop: g += WeightDecay*w (coupled, as torch's); sq = Alpha*sq +
// (1-Alpha)*g²; d = √sq + Eps (Centered: ga = Alpha*ga + (1-Alpha)*g, d = √(sq - ga²) + Eps, eps
// outside the root as torch's); without momentum w -= LR*g/d, with it b = Momentum*b + g/d and
// w -= LR*b. Zero Alpha and Eps mean PyTorch's defaults 0.99 and 1e-8; torchvision's MobileNetV3
// recipe (New's "rmsprop") takes 0.9 and 0.0316. Like SGD's, the weight decay
// applies to weights only. Its state is the mean square, then the momentum buffer (with
// Momentum), then the mean gradient (Centered): torch's square_avg, momentum_buffer, grad_avg.
type RMSprop struct {
	LR, Alpha, Eps, WeightDecay, Momentum float64
	Centered                              bool
}

var _ Optimizer = RMSprop{}

func (o RMSprop) withDefaults() RMSprop {
	if o.Alpha == 0 {
		o.Alpha = 0.99
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	return o
}

func (o RMSprop) String() string {
	o = o.withDefaults()
	return fmt.Sprintf("rmsprop lr=%g alpha=%g eps=%g weight_decay=%g momentum=%g centered=%v", o.LR, o.Alpha, o.Eps, o.WeightDecay,
		o.Momentum, o.Centered)
}

// BaseLR returns LR.
func (o RMSprop) BaseLR() float64 { return o.LR }

func (o RMSprop) Slots() int {
	n := 1
	if o.Momentum != 0 {
		n++
	}
	if o.Centered {
		n++
	}
	return n
}

func (o RMSprop) Update(ops kernels.Ops, s gpu.Stream, p Param, state []kernels.F32, lr float64, _ int) error {
	o = o.withDefaults()
	sq, rest := state[0], state[1:]
	var b, ga kernels.F32
	if o.Momentum != 0 {
		b, rest = rest[0], rest[1:]
	}
	if o.Centered {
		ga = rest[0]
	}
	return ops.RMSpropStep(s, p.W, p.G, sq, b, ga, kernels.RMSprop{LR: float32(lr), Alpha: o.Alpha, Eps: float32(o.Eps),
		WeightDecay: decay(p, o.WeightDecay), Momentum: float32(o.Momentum), Centered: o.Centered})
}

// decay is the weight decay for p: wd for weights, 0 for biases and BatchNorm parameters.
func decay(p Param, wd float64) float32 {
	if !p.Decay {
		return 0
	}
	return float32(wd)
}
