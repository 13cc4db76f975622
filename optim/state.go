package optim

import (
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// State is an optimizer over a set of parameters with what it keeps for each, as a
// torch.optim.Optimizer: the parameter's Slots state tensors, zero at the start, and its
// learning-rate factor (its parameter group's: a backbone's smaller rate, layer decay). Step
// updates them all. Package train keeps one for the model's trained tensors and checkpoints its
// slots; a loop of one's own over modules of package nn can keep one too.
type State struct {
	opt     Optimizer
	params  []Param
	slots   [][]kernels.F32
	lrScale []float64
}

// NewState makes opt's state over params: opt.Slots() tensors of each parameter's length from
// alloc, filled with zeros on s through ops, and the learning-rate factor scale[i] of params[i]
// (nil: 1 for every parameter).
func NewState(opt Optimizer, ops kernels.Ops, s gpu.Stream, params []Param, scale []float64, alloc func(n int) (kernels.F32, error)) (*State, error) {
	if scale != nil && len(scale) != len(params) {
		return nil, fmt.Errorf("optim: %d learning-rate factors for %d parameters", len(scale), len(params))
	}
	st := &State{opt: opt, params: params, slots: make([][]kernels.F32, len(params)), lrScale: scale}
	for i, p := range params {
		for range opt.Slots() {
			v, err := alloc(p.W.Len)
			if err != nil {
				return nil, err
			}
			if err := ops.Fill(s, v, 0); err != nil {
				return nil, err
			}
			st.slots[i] = append(st.slots[i], v)
		}
	}
	return st, nil
}

// Slots returns the state tensors of the i-th parameter (torch's optimizer.state[p]: SGD's
// momentum, Adam's moments, ...), in the order the optimizer's Update takes them.
func (st *State) Slots(i int) []kernels.F32 { return st.slots[i] }

// Factor returns the learning-rate factor of the i-th parameter.
func (st *State) Factor(i int) float64 {
	if st.lrScale == nil {
		return 1
	}
	return st.lrScale[i]
}

// Step enqueues on s the update of every parameter from its gradient at rate lr times the
// parameter's factor; step counts the updates made, from 1 (Adam's bias correction).
func (st *State) Step(ops kernels.Ops, s gpu.Stream, lr float64, step int) error {
	for i, p := range st.params {
		rate := lr
		if st.lrScale != nil {
			rate *= st.lrScale[i]
		}
		if err := st.opt.Update(ops, s, p, st.slots[i], rate, step); err != nil {
			return fmt.Errorf("optim: update of %s: %w", p.Name, err)
		}
	}
	return nil
}

// Params are the trained tensors of module, bound (nn.Bind), in nn.StateDict's order, as an
// optimizer sees them (torch's model.parameters()): their values, their gradient memory, and
// weight decay for the weights of linear and convolution layers (nn.Weight), not for biases,
// norms' scales and shifts or embeddings. Frozen tensors and buffers are left out.
func Params(module nn.Module) ([]Param, error) {
	named, err := nn.StateDict(module)
	if err != nil {
		return nil, err
	}
	var ps []Param
	for _, n := range named {
		if t := n.Tensor; t.Trained() && t.GradData().Len > 0 {
			ps = append(ps, Param{Name: n.Name, W: t.Data(), G: t.GradData(), Decay: t.InitKind() == nn.Weight})
		}
	}
	return ps, nil
}
