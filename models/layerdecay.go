package models

import (
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/nn"
)

// Layer ids of the hierarchical models (optim.Layered), timm 0.9.16's rule: the layer_map that
// param_groups_layer_decay builds from the model's group_matcher(coarse=False). ConvNeXt's and
// Swin's matchers number the stem 0, then block j of stage i one after another from 1 (stage i's
// downsampling, at its start, shares the id of its first block), and whatever they do not match
// (the head) takes the last id, the number of blocks + 1. Swin's final norm (^norm) is matched
// with MATCH_PREV_GROUP: it shares the last block's id; ConvNeXt's head.norm is the head's.
//
// torchvision's layout is mapped onto timm's: features.0 is the stem (timm's stem,
// patch_embed); features.2i+1.j is stage i's block j (stages.i.blocks.j, layers.i.blocks.j);
// features.2i+2 is the downsampling into stage i+1 (stages.i+1.downsample,
// layers.i+1.downsample: torchvision's PatchMerging ends a stage, timm's starts the next); a
// ConvNeXt's classifier is timm's head (head.norm, head.fc), a Swin's norm and head timm's
// norm and head.fc.

// blockID is the layer id of block j of stage i of a model whose stages have depths blocks.
func blockID(depths []int, i, j int) int {
	id := 1 + j
	for _, d := range depths[:i] {
		id += d
	}
	return id
}

// lastID is the head's layer id: the number of blocks + 1.
func lastID(depths []int) int { return blockID(depths, len(depths), 0) }

// featureDepths are the stages' depths of a torchvision features layout: every odd layer
// after the stem is a stage of blocks.
func featureDepths(feats nn.Sequential) []int {
	var depths []int
	for k := 1; k < len(feats); k += 2 {
		if s, ok := feats[k].(nn.Sequential); ok {
			depths = append(depths, len(s))
		}
	}
	return depths
}

// featuresID is the layer id of features.K.rest in a torchvision layout of stages of the given
// depths (see above); ok is false for a name outside features.
func featuresID(depths []int, name string) (id int, ok bool) {
	rest, ok := strings.CutPrefix(name, "features.")
	if !ok {
		return 0, false
	}
	ks, rest, _ := strings.Cut(rest, ".")
	k, err := strconv.Atoi(ks)
	switch {
	case err != nil:
		return 0, false
	case k == 0:
		return 0, true
	case k%2 == 0 && k/2 < len(depths): // the downsampling into stage k/2
		return blockID(depths, k/2, 0), true
	case k%2 == 1 && (k-1)/2 < len(depths):
		js, _, _ := strings.Cut(rest, ".")
		if j, err := strconv.Atoi(js); err == nil {
			return blockID(depths, (k-1)/2, j), true
		}
	}
	return 0, false
}

// LayerID is the depth of a tensor for layer-wise learning-rate decay (optim.Layered), timm's
// ConvNeXt group_matcher through the mapping above: features.0 (the stem) at 0, features.2i+1.j
// (stage i's block j) and the downsampling before it at 1 + the blocks before, the classifier
// at the number of blocks + 1.
func (m *ConvNeXt) LayerID(name string) (id, last int) {
	depths := featureDepths(m.Features)
	last = lastID(depths)
	if id, ok := featuresID(depths, name); ok {
		return id, last
	}
	return last, last
}

// LayerID is the depth of a tensor for layer-wise learning-rate decay (optim.Layered), timm's
// SwinTransformer and SwinTransformerV2 group_matcher through the mapping above: features.0 (the
// patch embedding) at 0, features.2i+1.j (stage i's block j) and the patch merging before it at
// 1 + the blocks before, the final norm at the last block's, the head at the number of blocks + 1.
func (m *SwinTransformer) LayerID(name string) (id, last int) {
	depths := featureDepths(m.Features)
	last = lastID(depths)
	if id, ok := featuresID(depths, name); ok {
		return id, last
	}
	if strings.HasPrefix(name, "norm.") {
		return last - 1, last
	}
	return last, last
}

// LayerID is the depth of a tensor for layer-wise learning-rate decay (optim.Layered), timm's
// ConvNeXt group_matcher: stem at 0, stages.i.blocks.j and stages.i.downsample (with the
// stage's first block) at 1 + the blocks before, the head at the number of blocks + 1.
func (m *TimmConvNeXt) LayerID(name string) (id, last int) {
	depths := make([]int, len(m.Stages))
	for i, s := range m.Stages {
		depths[i] = len(s.Blocks)
	}
	last = lastID(depths)
	if strings.HasPrefix(name, "stem.") {
		return 0, last
	}
	if rest, ok := strings.CutPrefix(name, "stages."); ok {
		parts := strings.SplitN(rest, ".", 4)
		i, err := strconv.Atoi(parts[0])
		switch {
		case err != nil || i >= len(depths) || len(parts) < 2:
		case parts[1] == "downsample":
			return blockID(depths, i, 0), last
		case parts[1] == "blocks" && len(parts) > 2:
			if j, err := strconv.Atoi(parts[2]); err == nil {
				return blockID(depths, i, j), last
			}
		}
	}
	return last, last
}
