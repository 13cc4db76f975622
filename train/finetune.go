package train

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// Fine-tuning: Config.Init, Config.FreezeBackbone, Config.FreezeUpTo, Config.BackboneLRScale.
//
// The head is the classifier: the tensors of the model's last layer with parameters; in a model
// of package nn (Net: a zoo model is one such layer), those of its last linear layer, the last
// two-dimensional weight and the tensors beside it (a ViT's heads.head, a ConvNeXt's
// classifier.2, a ResNet's fc, an EfficientNet's classifier.1).
//
// What freezes is a prefix of the model's tensors: every one but the head's (FreezeBackbone), or
// those up to the last one named FreezeUpTo (whole layers of a Sequential model; tensors in
// state_dict order within a module of package nn). A frozen tensor is neither updated nor given a
// gradient buffer or optimizer state, the backward pass stops before the first layer that trains
// (nothing before it needs a gradient), and a BatchNorm whose tensors are frozen runs in
// evaluation mode, on its running statistics, which it does not update (torchvision's
// FrozenBatchNorm2d). Frozen tensors are checkpointed and exported like the others; Model.Params
// lists only the trained ones.

// layerNames lists the layers that hold tensors, in order, by the first depth parts of their
// names ("stages.1" for stages.1.blocks.0.conv_dw.weight), at most max of them and how many more.
func layerNames(tensors []*Param, depth, max int) string {
	var names []string
	for _, p := range tensors {
		layer, _ := splitLast(p.Name)
		if parts := strings.SplitN(layer, ".", depth+1); len(parts) > depth {
			layer = strings.Join(parts[:depth], ".")
		}
		if layer != "" && !slices.Contains(names, layer) {
			names = append(names, layer)
		}
	}
	if len(names) > max {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
	}
	return strings.Join(names, ", ")
}

// freeze applies the configuration's freezing to the unbound model and returns the learning-rate
// groups: the factors of the tensors that have one, the others' being 1 (the choice between FreezeBackbone and
// FreezeUpTo and the scale are Config.Validate's to check).
func (m *Model) freeze(cfg Config) (lrScale map[*Param]float64, err error) {
	head := m.head()
	var flat []*Param // every tensor, in layer order
	for _, ps := range m.layerParams {
		flat = append(flat, ps...)
	}
	upTo := -1 // the last frozen tensor's index in flat
	switch {
	case cfg.FreezeBackbone:
		for i, p := range flat {
			if !head[p] {
				upTo = i
			}
		}
	case cfg.FreezeUpTo != "":
		off := 0
		for _, ps := range m.layerParams {
			for j, p := range ps {
				if p.Name == cfg.FreezeUpTo || strings.HasPrefix(p.Name, cfg.FreezeUpTo+".") {
					upTo = off + j
					if len(ps) > 0 && !isNN(m, ps[0]) {
						upTo = off + len(ps) - 1 // the whole layer
					}
				}
			}
			off += len(ps)
		}
		if upTo < 0 {
			return nil, fmt.Errorf("train: %w: FreezeUpTo %q names no layer of %s (its layers, two names deep: %s; "+
				"any prefix of a tensor's name that ends before a dot is a layer)", ErrConfig, cfg.FreezeUpTo, m.name, layerNames(flat, 2, 40))
		}
	}
	for i := 0; i <= upTo; i++ {
		if head[flat[i]] && !flat[i].buffer() && cfg.FreezeUpTo != "" {
			return nil, fmt.Errorf("train: %w: FreezeUpTo %q freezes the whole of %s, its head too: nothing would train", ErrConfig, cfg.FreezeUpTo, m.name)
		}
		flat[i].frozen = !flat[i].buffer() && !head[flat[i]]
	}
	last := -1 // the last layer of the prefix of layers that train nothing
	for i, ps := range m.layerParams {
		if slices.ContainsFunc(ps, func(p *Param) bool { return !p.buffer() && !p.frozen }) {
			break
		}
		last = i
	}
	for i := 0; i <= last; i++ {
		setFrozen(m.layers[i], true)
	}
	m.params, m.frozen = m.params[:0], nil
	for _, p := range flat {
		switch {
		case p.frozen:
			m.frozen = append(m.frozen, p)
		case !p.buffer():
			m.params = append(m.params, p)
		}
	}
	m.firstParamLayer = -1
	for i, ps := range m.layerParams {
		if i > last && len(ps) > 0 {
			m.firstParamLayer = i
			break
		}
	}
	lrScale = map[*Param]float64{}
	if cfg.BackboneLRScale != 0 {
		for _, p := range flat {
			if !head[p] {
				lrScale[p] = cfg.BackboneLRScale
			}
		}
	}
	if cfg.LayerDecay != 0 {
		if err := m.decayLayers(cfg.LayerDecay, lrScale); err != nil {
			return nil, err
		}
	}
	return lrScale, nil
}

// Layered is a module of package nn whose tensors lie in a stack of blocks, which
// Config.LayerDecay needs: LayerID is the depth of the tensor named name (its nn.StateDict name)
// and last the depth of the head, timm's layer ids: 0 for the embeddings before the first block,
// i+1 for block i's tensors (counted through every stage of a hierarchical model), last =
// blocks+1 for the head (timm's get_layer_id_for_vit for a ViT, its group_matcher for the others).
type Layered interface {
	LayerID(name string) (id, last int)
}

// decayLayers multiplies the learning-rate factor in lrScale of every tensor of the model's
// Layered modules by decay^(last-id) (Config.LayerDecay).
func (m *Model) decayLayers(decay float64, lrScale map[*Param]float64) error {
	found := false
	for _, l := range m.layers {
		c, ok := l.(*custom)
		if !ok {
			continue
		}
		nm, ok := c.m.(*nnModule)
		if !ok {
			continue
		}
		lm, ok := nm.m.(Layered)
		if !ok {
			continue
		}
		found = true
		for i, t := range nm.tensors {
			id, last := lm.LayerID(t.Name)
			p := nm.params[i]
			lrScale[p] = cmp.Or(lrScale[p], 1) * powRounded(decay, last-id)
		}
	}
	if !found {
		return fmt.Errorf("train: %w: LayerDecay %g: %s has no stack of blocks to decay the rate over (a ViT, Swin or ConvNeXt has)", ErrConfig, decay, m.name)
	}
	return nil
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

// unfreeze undoes freeze, when the model is freed.
func (m *Model) unfreeze() {
	for _, l := range m.layers {
		setFrozen(l, false)
	}
	m.params, m.frozen = m.params[:0], nil
	m.firstParamLayer = -1
	for i, ps := range m.layerParams {
		for _, p := range ps {
			p.frozen = false
			if !p.buffer() {
				m.params = append(m.params, p)
			}
		}
		if len(ps) > 0 && m.firstParamLayer < 0 {
			m.firstParamLayer = i
		}
	}
}

// head is the set of the classifier head's tensors (see freeze).
func (m *Model) head() map[*Param]bool {
	head := map[*Param]bool{}
	for i := len(m.layerParams) - 1; i >= 0; i-- {
		ps := m.layerParams[i]
		if len(ps) == 0 {
			continue
		}
		if isNN(m, ps[0]) {
			for j := len(ps) - 1; j >= 0; j-- {
				if ps[j].kind == kindWeight && len(ps[j].Shape) == 2 {
					prefix, _ := splitLast(ps[j].Name)
					for _, p := range ps {
						if q, _ := splitLast(p.Name); q == prefix {
							head[p] = true
						}
					}
					return head
				}
			}
		}
		for _, p := range ps {
			head[p] = true
		}
		return head
	}
	return head
}

// isNN reports whether p is a tensor of a module of package nn (NN) in m.
func isNN(m *Model, p *Param) bool {
	for i, ps := range m.layerParams {
		if slices.Contains(ps, p) {
			c, ok := m.layers[i].(*custom)
			if !ok {
				return false
			}
			_, ok = c.m.(*nnModule)
			return ok
		}
	}
	return false
}

// setFrozen puts a layer of nn (the package's own among them) in evaluation mode always, or
// back.
func setFrozen(l Layer, v bool) {
	if n := nnLayer(l); n != nil {
		n.frozen = v
	}
}

// InitReport is what loading Config.Init did (nil without Init, or when Resume was set).
func (t *Trainer) InitReport() *WeightsReport { return t.initReport }

// batchNormCounts returns a count of n for each of the model's BatchNorms (named by the prefix of
// their PREFIX.running_var), for loopState.Tracked.
func (m *Model) batchNormCounts(n int64) map[string]int64 {
	counts := map[string]int64{}
	for _, p := range m.tensors() {
		if prefix, last := splitLast(p.Name); last == "running_var" {
			counts[prefix] = n
		}
	}
	return counts
}

// countBatchNorms adds a batch to the counts of the BatchNorms that ran in training mode: those
// whose scale (PREFIX.weight) is not frozen. A frozen one normalizes with its running statistics,
// as torchvision's FrozenBatchNorm2d, and keeps its count.
func (m *Model) countBatchNorms(counts map[string]int64) {
	for _, ps := range m.layerParams {
		frozen := ""
		for _, p := range ps {
			prefix, last := splitLast(p.Name)
			switch {
			case last == "weight" && p.frozen:
				frozen = prefix
			case last == "running_var" && prefix != frozen:
				counts[prefix]++
			}
		}
	}
}
