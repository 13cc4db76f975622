package train

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/weights"
)

// Fine-tuning: Config.Init, Config.FreezeBackbone, Config.FreezeUpTo, Config.BackboneLRScale.
//
// The head is the classifier: the tensors of the model's last linear layer, the last
// two-dimensional weight and the tensors beside it (a ViT's heads.head, a ConvNeXt's
// classifier.2, a ResNet's fc, an EfficientNet's classifier.1).
//
// What freezes is a prefix of the model's tensors in state_dict order: every one but the head's
// (FreezeBackbone), or those up to the last one named FreezeUpTo. A frozen tensor is neither
// updated nor given a gradient buffer or optimizer state, the backward pass does no work that
// only frozen tensors need, and a BatchNorm whose tensors are frozen runs in evaluation mode, on
// its running statistics, which it does not update (torchvision's FrozenBatchNorm2d). Frozen
// tensors are checkpointed and exported like the others; Model.Params lists only the trained
// ones.

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

// freeze applies the configuration's freezing to the unbound model and returns the
// learning-rate groups: the factors of the tensors that have one, the others' being 1 (the choice
// between FreezeBackbone and FreezeUpTo and the scale are Config.Validate's to check).
func (m *Model) freeze(cfg Config) (lrScale map[*Param]float64, err error) {
	head := m.head()
	upTo := -1 // the last frozen tensor's index in m.all
	switch {
	case cfg.FreezeBackbone:
		for i, p := range m.all {
			if !head[p] {
				upTo = i
			}
		}
	case cfg.FreezeUpTo != "":
		for i, p := range m.all {
			if p.Name == cfg.FreezeUpTo || strings.HasPrefix(p.Name, cfg.FreezeUpTo+".") {
				upTo = i
			}
		}
		if upTo < 0 {
			return nil, fmt.Errorf("train: %w: FreezeUpTo %q names no layer of %s (its layers, two names deep: %s; "+
				"any prefix of a tensor's name that ends before a dot is a layer)", ErrConfig, cfg.FreezeUpTo, m.name, layerNames(m.all, 2, 40))
		}
		// A tensor named whole freezes the rest of its module with it (a batch norm's bias with
		// its weight: half of one would run in evaluation mode and leave the other untrained).
		module, _ := splitLast(m.all[upTo].Name)
		for upTo+1 < len(m.all) {
			if next, _ := splitLast(m.all[upTo+1].Name); next != module {
				break
			}
			upTo++
		}
	}
	for i := 0; i <= upTo; i++ {
		p := m.all[i]
		if head[p] && !p.buffer() && cfg.FreezeUpTo != "" {
			return nil, fmt.Errorf("train: %w: FreezeUpTo %q freezes the whole of %s, its head too: nothing would train", ErrConfig, cfg.FreezeUpTo, m.name)
		}
		p.frozen = !p.buffer() && !head[p]
	}
	m.params, m.frozen = m.params[:0], nil
	for _, p := range m.all {
		switch {
		case p.frozen:
			m.frozen = append(m.frozen, p)
		case !p.buffer():
			m.params = append(m.params, p)
		}
	}
	lrScale = map[*Param]float64{}
	if cfg.BackboneLRScale != 0 {
		for _, p := range m.all {
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

// decayLayers multiplies the learning-rate factor in lrScale of every tensor of the model by its
// optim.LayerDecay factor (Config.LayerDecay).
func (m *Model) decayLayers(decay float64, lrScale map[*Param]float64) error {
	names := make([]string, len(m.all))
	for i, p := range m.all {
		names[i] = p.Name
	}
	scale, err := optim.LayerDecay(m.module, names, decay)
	if err != nil {
		return fmt.Errorf("train: %w: %s: %w", ErrConfig, m.name, err)
	}
	for i, p := range m.all {
		lrScale[p] = cmp.Or(lrScale[p], 1) * scale[i]
	}
	return nil
}

// unfreeze undoes freeze, when the model is freed.
func (m *Model) unfreeze() {
	m.params, m.frozen = m.params[:0], nil
	for _, p := range m.all {
		p.frozen = false
		if !p.buffer() {
			m.params = append(m.params, p)
		}
	}
}

// head is the set of the classifier head's tensors (see freeze).
func (m *Model) head() map[*Param]bool {
	head := map[*Param]bool{}
	for j := len(m.all) - 1; j >= 0; j-- {
		if p := m.all[j]; p.kind == kindWeight && len(p.Shape) == 2 {
			prefix, _ := splitLast(p.Name)
			for _, q := range m.all {
				if pq, _ := splitLast(q.Name); pq == prefix {
					head[q] = true
				}
			}
			return head
		}
	}
	return head
}

// InitReport is what loading Config.Init did (nil without Init, or when Resume was set).
func (t *Trainer) InitReport() *weights.Report { return t.initReport }

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
	frozen := ""
	for _, p := range m.all {
		prefix, last := splitLast(p.Name)
		switch {
		case last == "weight" && p.frozen:
			frozen = prefix
		case last == "running_var" && prefix != frozen:
			counts[prefix]++
		}
	}
}
