package models_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

// timmName maps a tensor of a torchvision-named Swin or ConvNeXt to the prefix of its module in
// timm's layout (layerdecay.go's mapping): features.0 to the stem, features.2i+1.j to stage i's
// block j, features.2i+2 to stage i+1's downsampling, the classifier or norm and head to timm's.
func timmName(name string, swin bool) string {
	stem, stages, head := "stem.", "stages", "head."
	if swin {
		stem, stages, head = "patch_embed.", "layers", "head.fc."
	}
	var k, j int
	switch {
	case strings.HasPrefix(name, "features.0."):
		return stem
	case strings.HasPrefix(name, "classifier."), strings.HasPrefix(name, "head."):
		return head
	case strings.HasPrefix(name, "norm."):
		return "norm."
	}
	if n, _ := fmt.Sscanf(name, "features.%d.%d.", &k, &j); n >= 1 && k%2 == 0 {
		return fmt.Sprintf("%s.%d.downsample.", stages, k/2)
	} else if n == 2 {
		return fmt.Sprintf("%s.%d.blocks.%d.", stages, (k-1)/2, j)
	}
	return name
}

// TestLayerDecayTimm: the layer ids of timm's ConvNeXt (timm names), of torchvision's ConvNeXt,
// Swin and Swin V2 (through timmName to a timm model of the same configuration) equal those
// timm 0.9.16's param_groups_layer_decay gives every parameter, and so does the number of the
// last layer; every timm parameter has a tensor. With TestLayerDecayScale (package train: the
// factor decay^(last-id) rounded as Python's) the learning-rate factors are timm's lr_scale.
func TestLayerDecayTimm(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	atto := models.TimmConvNeXtAtto
	swin := models.SwinConfig{PatchSize: 2, EmbedDim: 8, WindowSize: 2, Depths: [4]int{1, 2, 3, 1}, NumHeads: [4]int{1, 1, 2, 2}, MLPRatio: 2}
	swin2 := swin
	swin2.V2 = true
	const timmSwin = "img_size=32, patch_size=2, window_size=2, embed_dim=8, depths=(1, 2, 3, 1), num_heads=(1, 1, 2, 2), mlp_ratio=2, num_classes=5"
	cases := []struct {
		python string
		model  interface {
			optim.Layered
			nn.Module
		}
		swin, torchvision bool
	}{
		{"timm.create_model('convnext_atto', num_classes=5)", models.NewTimmConvNeXt(atto, 3, 5, "timm/convnext_atto"), false, false},
		{"timm.create_model('convnext_atto', num_classes=5, depths=(1, 3, 2, 1))", models.NewTimmConvNeXt(models.TimmConvNeXtConfig{Depths: [4]int{1, 3, 2, 1}, Dims: atto.Dims, ConvMLP: true}, 3, 5, ""), false, false},
		{"timm.create_model('convnext_atto', num_classes=5, depths=(1, 3, 2, 1))", must(models.NewConvNeXt(models.ConvNeXtConfig{Depths: [4]int{1, 3, 2, 1}, Widths: atto.Dims}, 3, 5, "")), false, true},
		{"timm.models.swin_transformer.SwinTransformer(" + timmSwin + ")", must(models.NewSwin(swin, 3, 5, "")), true, true},
		{"timm.models.swin_transformer_v2.SwinTransformerV2(" + timmSwin + ")", must(models.NewSwin(swin2, 3, 5, "")), true, true},
	}
	args := []string{"0.8"}
	for _, c := range cases {
		args = append(args, c.python)
	}
	var want map[string]map[string][3]float64 // layer_id, layer_max, lr_scale
	pythonJSON(t, &want, py, "timm_layer_decay.py", args...)
	for _, c := range cases {
		named, err := nn.StateDict(c.model)
		if err != nil {
			t.Fatal(err)
		}
		timm := want[c.python]
		covered := map[string]bool{}
		for _, n := range named {
			id, last := c.model.LayerID(n.Name)
			prefix := n.Name
			if c.torchvision {
				prefix = timmName(n.Name, c.swin)
			}
			found := false
			for tn, w := range timm {
				if tn == prefix || c.torchvision && strings.HasPrefix(tn, prefix) {
					found, covered[tn] = true, true
					if id != int(w[0]) || last != int(w[1]) {
						t.Errorf("%s: %s (timm's %s) at layer %d of %d; timm's at %g of %g (lr_scale %v)", c.python, n.Name, tn, id, last, w[0], w[1], w[2])
					}
				}
			}
			if !found {
				t.Errorf("%s: %s (timm's %s): no such timm parameter", c.python, n.Name, prefix)
			}
		}
		if len(covered) != len(timm) {
			t.Errorf("%s: %d of timm's %d parameters have a tensor", c.python, len(covered), len(timm))
		}
	}
}

func must[T any](m T, err error) T {
	if err != nil {
		panic(err)
	}
	return m
}

// TestLayerDecayZoo: a trainer of a ConvNeXt (torchvision's and timm's) or a Swin (V1 and V2)
// takes Config.LayerDecay: they are Layered, not refused as having no stack of blocks.
func TestLayerDecayZoo(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, spec := range []string{
		"convnext(width_1=8,width_2=8,width_3=8,width_4=8,depth_1=1,depth_2=1,depth_3=1,depth_4=1)",
		"timm/convnext_atto",
		"swin(patch_size=4,embed_dim=8,depth_1=1,depth_2=1,depth_3=1,depth_4=1,num_heads_1=1,num_heads_2=1,num_heads_3=1,num_heads_4=1,window_size=2)",
		"swin_v2(patch_size=4,embed_dim=8,depth_1=1,depth_2=1,depth_3=1,depth_4=1,num_heads_1=1,num_heads_2=1,num_heads_3=1,num_heads_4=1,window_size=2)",
	} {
		m, err := train.NewModel(spec, train.Shape{C: 3, H: 32, W: 32}, 3)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(context.Background(), m, dev, optim.AdamW{LR: 1e-3}, train.Config{LayerDecay: 0.8})
		if err != nil {
			t.Errorf("%s: LayerDecay 0.8: %v", spec, err)
			continue
		}
		tr.Close()
	}
}
