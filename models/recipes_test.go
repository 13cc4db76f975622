package models_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// TestZooRecipes: every builder of the zoo has its family's recipe registered (models.RecipeFor
// finds it by name, with arguments too), not the built-in CNN's that RecipeFor gives an unknown
// name.
func TestZooRecipes(t *testing.T) {
	builtin := []string{"mlp", "cnn", "resnet8", "resnet20", "resnet18", "resnet50"}
	for _, name := range models.Names() {
		if slices.Contains(builtin, name) {
			continue
		}
		if r := models.RecipeFor(name); r.LRBatch == 0 {
			t.Errorf("%s: recipe %v; want its family's (a learning rate per batch)", name, r)
		}
	}
	vit := models.RecipeFor("vit(image_size=28,patch_size=4,num_layers=4,num_heads=4,hidden_dim=64,mlp_dim=256)")
	if vit.Optimizer != "adamw" || vit.WeightDecay != 0.05 || vit.ScaledLR(512) != 4e-3 || vit != models.RecipeFor("vit_b_16") {
		t.Errorf("vit(...)'s recipe %v; want DeiT's: adamw, weight decay 0.05, vit_b_16's", vit)
	}
	// MobileNetV3 trains with torchvision's RMSprop, V2 with SGD.
	v3 := models.RecipeFor("mobilenet_v3_small(width_mult=0.5)")
	if got, want := must(optim.ForRecipe(v3, 1024)), (optim.RMSprop{LR: 0.512, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9, WeightDecay: 1e-5}); v3.Optimizer != "rmsprop" ||
		got != want || v3 != models.RecipeFor("mobilenet_v3_large") {
		t.Errorf("mobilenet_v3_small(...)'s recipe %v, optimizer %v at a batch of 1024; want torchvision's RMSprop %v, mobilenet_v3_large's", v3, got, want)
	}
	if v2 := models.RecipeFor("mobilenet_v2"); v2.Optimizer != "sgd" {
		t.Errorf("mobilenet_v2's recipe %v; want sgd", v2)
	}
	// The automatic augmentation of torchvision's references/classification: DeiT's
	// RandAugment(2, 9) for the transformers, --auto-augment ta_wide for the EfficientNets,
	// imagenet for MobileNetV3, none for the others.
	for _, tc := range []struct {
		policy string
		models []string
	}{
		{"randaugment:2:9", []string{"vit_b_16", "vit(image_size=28)", "timm/deit_tiny_patch16_224", "swin_t", "swin_v2_b", "convnext_tiny", "timm/convnext_atto"}},
		{"trivialaugment", []string{"efficientnet_b0", "efficientnet_b7", "efficientnet_v2_s(stochastic_depth_prob=0.1)", "efficientnet_v2_l", "timm/efficientnet_b3"}},
		{"autoaugment", []string{"mobilenet_v3_large", "mobilenet_v3_small"}},
		{"", []string{"mobilenet_v2", "regnet_y_400mf", "resnet34", "resnext50_32x4d", "mlp", "resnet50"}},
	} {
		for _, m := range tc.models {
			if got := models.RecipeFor(m).AutoAugment; got != tc.policy {
				t.Errorf("%s's recipe: AutoAugment %q; want %q", m, got, tc.policy)
			}
		}
	}
}

// TestViTNoDecay: a ViT's tensors without weight decay are exactly timm's no-decay set: the
// biases, the LayerNorms' scales and shifts, the position embedding and the class token; the
// others (the patch projection, the attention's and MLP's weights, the head) decay.
func TestViTNoDecay(t *testing.T) {
	m, err := train.NewModel("vit(image_size=8,patch_size=4,num_layers=2,num_heads=2,hidden_dim=8,mlp_dim=16)", train.Shape{C: 3, H: 8, W: 8}, 5)
	if err != nil {
		t.Fatal(err)
	}
	var decayed, not []string
	for _, p := range m.Params() {
		if p.Decayed() {
			decayed = append(decayed, p.Name)
		} else {
			not = append(not, p.Name)
		}
	}
	want := []string{"conv_proj.weight", "heads.head.weight"}
	for i := range 2 {
		b := "encoder.layers.encoder_layer_" + string(rune('0'+i)) + "."
		want = append(want, b+"self_attention.in_proj_weight", b+"self_attention.out_proj.weight", b+"mlp.0.weight", b+"mlp.3.weight")
	}
	slices.Sort(want)
	slices.Sort(decayed)
	if !slices.Equal(decayed, want) {
		t.Errorf("decayed tensors %v; want %v", decayed, want)
	}
	for _, name := range not {
		if !strings.HasSuffix(name, "bias") && !strings.Contains(name, "ln") && name != "class_token" && name != "encoder.pos_embedding" {
			t.Errorf("%s is not decayed; want only biases, norms, the position embedding and the class token", name)
		}
	}
	if !slices.Contains(not, "class_token") || !slices.Contains(not, "encoder.pos_embedding") {
		t.Errorf("not decayed: %v; want the class token and the position embedding among them", not)
	}
}

// TestFineTuneZoo: a convnext, a ViT and a resnet start from weights of the same architecture with another
// class count (Config.Init: a new head, the model's last linear layer) and a frozen backbone:
// after training every backbone tensor (BatchNorm statistics too) is the file's bit for bit, and the new head learns the
// bars (4 classes: accuracy well above chance).
func TestFineTuneZoo(t *testing.T) {
	const size = 32
	in := train.Shape{C: 1, H: size, W: size}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, c := range []struct {
		spec string
		head []string
	}{
		{"convnext(width_1=8,width_2=16,width_3=32,width_4=64,depth_1=1,depth_2=1,depth_3=1,depth_4=1)", []string{"classifier.2.weight", "classifier.2.bias"}},
		{"vit(image_size=32,patch_size=8,num_layers=2,num_heads=2,hidden_dim=32,mlp_dim=64)", []string{"heads.head.weight", "heads.head.bias"}},
		// BatchNorm: frozen, it keeps its running statistics.
		{"resnet(layers_1=1,layers_2=1,layers_3=1,layers_4=1,bottleneck=0)", []string{"fc.weight", "fc.bias"}},
	} {
		name, _, _ := strings.Cut(c.spec, "(")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			pre, err := train.NewModel(c.spec, in, 10)
			if err != nil {
				t.Fatal(err)
			}
			ptr, err := train.New(context.Background(), pre, dev, nil, train.Config{Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "pre.safetensors")
			err = ptr.Export(context.Background(), path)
			ptr.Close()
			if err != nil {
				t.Fatal(err)
			}
			m, err := train.NewModel(c.spec, in, 4)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := train.New(context.Background(), m, dev, optim.AdamW{LR: 1e-2}, train.Config{Epochs: 2, Seed: 1, Init: path, FreezeBackbone: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if got := tr.InitReport().NewHead; !slices.Equal(got, c.head) {
				t.Errorf("new head %v; want %v", got, c.head)
			}
			var trained []string
			for _, p := range m.Params() {
				trained = append(trained, p.Name)
			}
			if !slices.Equal(trained, c.head) {
				t.Errorf("trained tensors %v; want the head's %v", trained, c.head)
			}
			trainData, testData := bars(t, dev, tr, 400, true), bars(t, dev, tr, 200, false)
			defer trainData.Close()
			defer testData.Close()
			res, err := tr.Fit(t.Context(), train.FromLoader(trainData), train.FromLoader(testData))
			if err != nil {
				t.Fatal(err)
			}
			after := filepath.Join(dir, "after.safetensors")
			if err := tr.Export(context.Background(), after); err != nil {
				t.Fatal(err)
			}
			was, now := readF32Safetensors(t, path), readF32Safetensors(t, after)
			for name, w := range now {
				if slices.Contains(c.head, name) {
					continue
				}
				if !slices.Equal(w, was[name]) {
					t.Errorf("frozen %s changed in training", name)
				}
			}
			t.Logf("test accuracy %.3f, %.1f s", res.TestAcc, res.Seconds)
			if res.TestAcc < 0.7 {
				t.Errorf("the new head on the frozen backbone: test accuracy %.3f; want >= 0.7 (chance 0.25)", res.TestAcc)
			}
		})
	}
}

// bars is a loader of n 32x32 images of 4 classes: bright horizontal bars at rows of the class's,
// over noise; each class's rows are at another place within an 8x8 patch (a frozen random ViT
// sees little of where its patches lie).
func bars(t *testing.T, dev gpu.Device, tr *train.Trainer, n int, shuffle bool) *loaders.Loader {
	t.Helper()
	const size, classes = 32, 4
	r := rand.New(rand.NewPCG(uint64(n), 6))
	s := make([]loaders.Sample, n)
	for i := range s {
		label := r.IntN(classes)
		px := make([]uint8, size*size)
		for j := range px {
			px[j] = uint8(r.IntN(96))
		}
		for _, y := range []int{2 * label, 2*label + 1, 16 + 2*label, 17 + 2*label} {
			for x := 4; x < size-4; x++ {
				px[y*size+x] = 255
			}
		}
		s[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: size, W: size, C: 1}, Label: label}
	}
	l, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "bars", NumClasses: classes, Shape: train.Shape{C: 1, H: size, W: size},
		Mean: []float32{0.3}, Std: []float32{0.3}}, s),
		loaders.Config{Batch: 25, Workers: 1, Shuffle: shuffle, Seed: 1, Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestViTLayerID: a ViT's tensors lie at timm's depths for layer decay: the patch projection,
// class token and position embedding at 0, encoder_layer_i's at i+1, the final norm and the
// head at num_layers+1.
func TestViTLayerID(t *testing.T) {
	v, err := models.NewViT(models.ViTConfig{ImageSize: 8, PatchSize: 4, NumLayers: 2, NumHeads: 2, HiddenDim: 8, MLPDim: 16}, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	named, err := nn.StateDict(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range named {
		want := 3
		switch {
		case strings.HasPrefix(n.Name, "conv_proj.") || n.Name == "class_token" || n.Name == "encoder.pos_embedding":
			want = 0
		case strings.HasPrefix(n.Name, "encoder.layers.encoder_layer_0."):
			want = 1
		case strings.HasPrefix(n.Name, "encoder.layers.encoder_layer_1."):
			want = 2
		}
		if id, last := v.LayerID(n.Name); id != want || last != 3 {
			t.Errorf("%s: layer %d of %d; want %d of 3", n.Name, id, last, want)
		}
	}
}

// TestFreezeUpToZoo: FreezeUpTo in a zoo model freezes its tensors in state_dict order up to the
// last one it names (a ViT's first block and all before it), and refuses to freeze the head.
func TestFreezeUpToZoo(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	const vit = "vit(image_size=8,patch_size=4,num_layers=2,num_heads=2,hidden_dim=8,mlp_dim=16)"
	m, err := train.NewModel(vit, train.Shape{C: 1, H: 8, W: 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(context.Background(), m, dev, optim.AdamW{LR: 1e-3}, train.Config{FreezeUpTo: "encoder.layers.encoder_layer_0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var trained []string
	for _, p := range m.Params() {
		trained = append(trained, p.Name)
	}
	if len(trained) == 0 || !strings.HasPrefix(trained[0], "encoder.layers.encoder_layer_1.") || !slices.Contains(trained, "heads.head.weight") {
		t.Errorf("trained tensors %v; want encoder_layer_1's and all after", trained)
	}
	m2, err := train.NewModel(vit, train.Shape{C: 1, H: 8, W: 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := train.New(context.Background(), m2, dev, optim.AdamW{LR: 1e-3}, train.Config{FreezeUpTo: "heads"}); err == nil || !strings.Contains(err.Error(), "its head too") {
		t.Errorf("FreezeUpTo heads: %v; want a refusal to freeze the head", err)
	}
	// A name of no layer lists the model's layers two names deep, as they are accepted (the list
	// named the first tensor's module only: "stem.0" for timm's convnext_atto).
	atto, err := train.NewModel("timm/convnext_atto", train.Shape{C: 3, H: 32, W: 32}, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, err = train.New(context.Background(), atto, dev, optim.AdamW{LR: 1e-3}, train.Config{FreezeUpTo: "stages.9"})
	if !errors.Is(err, train.ErrConfig) || !strings.Contains(err.Error(), "its layers, two names deep: stem.0, stem.1, stages.0, stages.1, stages.2, stages.3, head.norm, head.fc;") {
		t.Errorf("FreezeUpTo stages.9 of convnext_atto: %v; want the layers listed", err)
	}
}

// TestTimmViTLayerID: timm's ViT lies at get_layer_id_for_vit's depths: patch_embed, cls_token
// and pos_embed at 0, blocks.i at i+1, norm and head at depth+1.
func TestTimmViTLayerID(t *testing.T) {
	v, err := models.NewTimmViT(models.TimmViTConfig{ImgSize: 8, PatchSize: 4, EmbedDim: 8, Depth: 2, NumHeads: 2, MLPRatio: 2}, 3, 5, "timm/vit")
	if err != nil {
		t.Fatal(err)
	}
	named, err := nn.StateDict(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range named {
		want := 3
		switch {
		case strings.HasPrefix(n.Name, "patch_embed.") || n.Name == "cls_token" || n.Name == "pos_embed":
			want = 0
		case strings.HasPrefix(n.Name, "blocks.0."):
			want = 1
		case strings.HasPrefix(n.Name, "blocks.1."):
			want = 2
		}
		if id, last := v.LayerID(n.Name); id != want || last != 3 {
			t.Errorf("%s: layer %d of %d; want %d of 3", n.Name, id, last, want)
		}
	}
}
