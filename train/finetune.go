package train

import (
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Fine-tuning: Config.Init, Config.FreezeBackbone, Config.FreezeUpTo, Config.BackboneLRScale.
//
// A frozen layer is one of a prefix of the model's layers: from the first up to the last one
// frozen. Its parameters are neither updated nor given a gradient buffer or optimizer state, the
// backward pass stops at the first layer that trains (nothing before it needs a gradient), and
// its BatchNorms run in evaluation mode, on their running statistics, which they do not update
// (torchvision's FrozenBatchNorm2d). Frozen parameters are checkpointed and exported like the
// others; Model.Params lists only the trained ones.

// freeze applies the configuration's freezing and learning-rate groups to the unbound model (the
// choice between FreezeBackbone and FreezeUpTo and the scale are Config.Validate's to check).
func (m *Model) freeze(cfg Config) error {
	head := m.headLayer()
	last := -1 // the last frozen layer
	switch {
	case cfg.FreezeBackbone:
		last = head - 1
	case cfg.FreezeUpTo != "":
		for i, ps := range m.layerParams {
			for _, p := range ps {
				if p.Name == cfg.FreezeUpTo || strings.HasPrefix(p.Name, cfg.FreezeUpTo+".") {
					last = i
				}
			}
		}
		if last < 0 {
			var names []string
			for _, ps := range m.layerParams {
				if len(ps) > 0 {
					prefix, _ := splitLast(ps[0].Name)
					names = append(names, prefix)
				}
			}
			return fmt.Errorf("train: %w: FreezeUpTo %q names no layer of %s (its layers: %s)", ErrConfig, cfg.FreezeUpTo, m.name, strings.Join(names, ", "))
		}
	}
	if last >= head {
		return fmt.Errorf("train: %w: FreezeUpTo %q freezes the whole of %s, its head too: nothing would train", ErrConfig, cfg.FreezeUpTo, m.name)
	}
	for i := 0; i <= last; i++ {
		setFrozen(m.layers[i], true)
		for _, p := range m.layerParams[i] {
			p.frozen = !p.buffer()
		}
	}
	m.params, m.frozen = m.params[:0], nil
	for _, ps := range m.layerParams {
		for _, p := range ps {
			switch {
			case p.frozen:
				m.frozen = append(m.frozen, p)
			case !p.buffer():
				m.params = append(m.params, p)
			}
		}
	}
	m.firstParamLayer = -1
	for i, ps := range m.layerParams {
		if i > last && len(ps) > 0 {
			m.firstParamLayer = i
			break
		}
	}
	if cfg.BackboneLRScale != 0 {
		for i := 0; i < head; i++ {
			for _, p := range m.layerParams[i] {
				p.lrScale = cfg.BackboneLRScale
			}
		}
	}
	return nil
}

// unfreeze undoes freeze, when the model is freed.
func (m *Model) unfreeze() {
	for _, l := range m.layers {
		setFrozen(l, false)
	}
	m.params, m.frozen = m.params[:0], nil
	m.firstParamLayer = -1
	for i, ps := range m.layerParams {
		for _, p := range ps {
			p.frozen, p.lrScale = false, 0
			if !p.buffer() {
				m.params = append(m.params, p)
			}
		}
		if len(ps) > 0 && m.firstParamLayer < 0 {
			m.firstParamLayer = i
		}
	}
}

// headLayer is the index of the model's last layer with parameters: the classifier head.
func (m *Model) headLayer() int {
	for i := len(m.layerParams) - 1; i >= 0; i-- {
		if len(m.layerParams[i]) > 0 {
			return i
		}
	}
	return -1
}

// setFrozen puts the layers of nn in l (inside blocks too) in evaluation mode always, or back.
func setFrozen(l Layer, v bool) {
	for _, n := range nnModules(l) {
		n.frozen = v
	}
}

// nnModules lists the layers of nn in l (the package's own among them), inside blocks too.
func nnModules(l Layer) []*nnModule {
	switch l := l.(type) {
	case *custom:
		if n, ok := l.m.(*nnModule); ok {
			return []*nnModule{n}
		}
	case *residual:
		var out []*nnModule
		for _, x := range append(append([]Layer(nil), l.main...), l.shortcut...) {
			out = append(out, nnModules(x)...)
		}
		return out
	}
	return nil
}

// groupLR scales the learning rate of the backbone's parameters (Param.lrScale): a second
// parameter group, as torch.optim takes them. It reports the wrapped optimizer's String, so a
// checkpoint names the same optimizer.
type groupLR struct{ Optimizer }

func (o groupLR) Update(ops kernels.Ops, s gpu.Stream, p *Param, lr float64, step int) error {
	if p.lrScale != 0 {
		lr *= p.lrScale
	}
	return o.Optimizer.Update(ops, s, p, lr, step)
}

// InitReport is what loading Config.Init did (nil without Init, or when Resume was set).
func (t *Trainer) InitReport() *WeightsReport { return t.initReport }
