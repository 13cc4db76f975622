package models_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/train"
)

// vitNames are the VisionTransformer configurations TestTorchvisionShapes compares with
// torchvision's (vit_l_* and vit_h_14 differ only in their sizes, and weigh gigabytes in Python).
var vitNames = []string{"vit_b_16", "vit_b_32"}

// TestViTNames: a small vit's tensors are torchvision's VisionTransformer's state_dict, in order.
func TestViTNames(t *testing.T) {
	m, err := train.NewModel("vit(image_size=8,patch_size=4,num_layers=2,num_heads=2,hidden_dim=8,mlp_dim=16)", train.Shape{C: 3, H: 8, W: 8}, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	shapes := map[string][]int{}
	for _, p := range m.Params() {
		got = append(got, p.Name)
		shapes[p.Name] = p.Shape
	}
	want := []string{"conv_proj.weight", "conv_proj.bias", "class_token", "encoder.pos_embedding"}
	for i := range 2 {
		b := "encoder.layers.encoder_layer_" + string(rune('0'+i)) + "."
		want = append(want, b+"ln_1.weight", b+"ln_1.bias", b+"self_attention.in_proj_weight", b+"self_attention.in_proj_bias",
			b+"self_attention.out_proj.weight", b+"self_attention.out_proj.bias", b+"ln_2.weight", b+"ln_2.bias",
			b+"mlp.0.weight", b+"mlp.0.bias", b+"mlp.3.weight", b+"mlp.3.bias")
	}
	want = append(want, "encoder.ln.weight", "encoder.ln.bias", "heads.head.weight", "heads.head.bias")
	if !slices.Equal(got, want) {
		t.Errorf("names\n got %v\nwant %v", got, want)
	}
	for name, shape := range map[string][]int{"conv_proj.weight": {8, 3, 4, 4}, "encoder.pos_embedding": {1, 5, 8},
		"encoder.layers.encoder_layer_1.self_attention.in_proj_weight": {24, 8}, "heads.head.weight": {5, 8}} {
		if !slices.Equal(shapes[name], shape) {
			t.Errorf("%s: shape %v; want %v", name, shapes[name], shape)
		}
	}
	if m.Name() != "vit(image_size=8,patch_size=4,num_layers=2,num_heads=2,hidden_dim=8,mlp_dim=16)" {
		t.Errorf("name %q", m.Name())
	}
}

func TestViTArguments(t *testing.T) {
	in := train.Shape{C: 1, H: 28, W: 28}
	for _, tc := range []struct{ spec, want string }{
		{"vit(image_size=28,patch_size=4)", "num_layers is required"},
		{"vit(image_size=28,patch_size=4,num_layers=1,num_heads=3,hidden_dim=8,mlp_dim=8)", "not a multiple of num_heads"},
		{"vit(image_size=28,patch_size=4,num_layers=1,num_heads=2,hidden_dim=8,mlp_dim=8,depth=3)", `argument "depth=3"`},
		{"vit(image_size=32,patch_size=4,num_layers=1,num_heads=2,hidden_dim=8,mlp_dim=8)", "the images are 28x28"},
		{"vit_b_16(image_size=28,dropout=1.5)", "dropout=1.5"},
		{"vit(image_size=28", "unbalanced"},
		{"vit(image_size=28,patch_size=5,num_layers=1,num_heads=2,hidden_dim=8,mlp_dim=8)", "image_size 28 is not a multiple of patch_size 5"},
		{"vit(image_size=28,patch_size=4,num_layers=1,num_heads=2,hidden_dim=1048576,mlp_dim=8)", "hidden_dim=1048576: want an integer from 0 to 32768"},
	} {
		_, err := train.NewModel(tc.spec, in, 10)
		if !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want ErrModel saying %q", tc.spec, err, tc.want)
		}
	}
	// Spaces around the name are not part of it, and inside the parentheses they are allowed.
	if _, err := train.NewModel(" vit( image_size = 28 , patch_size = 7 , num_layers = 1 , num_heads = 2 , hidden_dim = 8 , mlp_dim = 8 ) ", in, 10); err != nil {
		t.Errorf("a spec with spaces: %v", err)
	}
	m, err := train.NewModel("vit_b_32(image_size=64)", train.Shape{C: 3, H: 64, W: 64}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "vit_b_32(image_size=64)" || m.NumParams() < 85e6 {
		t.Errorf("vit_b_32: name %q, %d parameters", m.Name(), m.NumParams())
	}
	if !slices.Contains(models.Names(), "vit_h_14") {
		t.Errorf("models.Names() = %v lacks the zoo", models.Names())
	}
	// A named ViT without image_size takes its images' side: vit_h_14 at the 518 px of its
	// weights' evaluation crop, what stoke train gives it by default (built for 224, it refused
	// the images its own transform made).
	crop := models.EvalTransformFor("vit_h_14").Crop
	h, err := train.NewModel("vit_h_14", train.Shape{C: 3, H: crop, W: crop}, 1000)
	if err != nil {
		t.Fatalf("vit_h_14 at its weights' crop %d: %v", crop, err)
	}
	if h.Name() != "vit_h_14" || h.NumParams() != 633470440 {
		t.Errorf("vit_h_14 at %d px: name %q, %d parameters; want torchvision's vit_h_14(image_size=518) of 633,470,440", crop, h.Name(), h.NumParams())
	}
}

// TestViTTrains: a small vit learns with the fused attention (one epoch of SGD over 320 synthetic
// images of 4 classes brings the loss of the last steps below that of the first), and trains with
// attention dropout, which takes the composed MatMul, Softmax, Dropout, MatMul (finite losses).
func TestViTTrains(t *testing.T) {
	const vit = "vit(image_size=32,patch_size=8,num_layers=1,num_heads=2,hidden_dim=16,mlp_dim=32"
	losses := trainEpoch(t, vit+")", 320, 32)
	first, last := (losses[0]+losses[1])/2, (losses[len(losses)-2]+losses[len(losses)-1])/2
	if !(last < 0.8*first) {
		t.Errorf("fused attention: mean loss of the first two steps %.3f, of the last two %.3f; want the last below 80%% of the first", first, last)
	}
	for _, l := range trainEpoch(t, vit+",attention_dropout=0.5)", 8, 4) {
		if math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
			t.Errorf("attention dropout: loss %g", l)
		}
	}
}
