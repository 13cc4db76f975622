package models_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// swinNames are the Swin Transformer configurations TestTorchvisionShapes compares with
// torchvision's.
var swinNames = []string{"swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"}

const smallSwin = "depth_1=1,depth_2=1,depth_3=1,depth_4=1,num_heads_1=2,num_heads_2=2,num_heads_3=2,num_heads_4=2"

// TestSwinArguments: swin and swin_v2 take torchvision's SwinTransformer arguments by name and
// refuse bad ones with an error naming the argument or the constraint; a model's name records
// what was given, and the named configurations build for small grayscale images.
func TestSwinArguments(t *testing.T) {
	in := train.Shape{C: 1, H: 28, W: 28}
	for _, tc := range []struct{ spec, want string }{
		{"swin(patch_size=2,embed_dim=8,window_size=4)", "depth_1 is required"},
		{"swin(patch_size=2,embed_dim=5,window_size=4," + smallSwin + ")", "stage 1: 5 channels (embed_dim·1) are not a multiple of num_heads_1=2"},
		{"swin(patch_size=2,embed_dim=8,window_size=0," + smallSwin + ")", "window_size 0"},
		{"swin_v2(patch_size=2,embed_dim=8,window_size=1," + smallSwin + ")", "window_size 1: V2 wants at least 2"},
		{"swin(patch_size=2,embed_dim=8,window_size=4,mlp_ratio=0.01," + smallSwin + ")", "mlp_ratio 0.01"},
		{"swin(patch_size=2,embed_dim=8,window_size=4,mlp_ratio=64," + smallSwin + ")", "mlp_ratio=64"},
		{"swin(patch_size=32,embed_dim=8,window_size=4," + smallSwin + ")", "the images are 28x28; want at least patch_size 32"},
		{"swin(patch_size=2,embed_dim=8,window_size=4," + strings.Replace(smallSwin, "depth_3=1", "depth_3=0", 1) + ")", "stage 3: depth 0"},
		{"swin_t(window_size=4)", `argument "window_size=4"`},
		{"swin_v2_b(stochastic_depth_prob=1)", "stochastic_depth_prob=1"},
	} {
		_, err := train.NewModel(tc.spec, in, 10)
		if !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want ErrModel saying %q", tc.spec, err, tc.want)
		}
	}
	for _, name := range []string{
		"swin_t", "swin_v2_s(stochastic_depth_prob=0.1)",
		"swin(patch_size=2,embed_dim=8," + smallSwin + ",window_size=4,mlp_ratio=2.5,dropout=0.1)",
		"swin_v2(patch_size=4,embed_dim=8," + smallSwin + ",window_size=2,stochastic_depth_prob=0)",
	} {
		m, err := train.NewModel(name, in, 10)
		if err != nil {
			t.Errorf("NewModel(%q): %v", name, err)
		} else if m.Name() != name {
			t.Errorf("NewModel(%q) is named %q", name, m.Name())
		}
	}
}

// TestSwinTrains: small Swin V1 and V2 models learn ten classes of synthetic 16 px grayscale
// images (a bright bar whose row is the class, on noise) on the CPU: the second epoch's training
// loss is below the first's and the test accuracy is well above chance.
func TestSwinTrains(t *testing.T) {
	const classes, size = 8, 16
	in := train.Shape{C: 1, H: size, W: size}
	r := rand.New(rand.NewPCG(5, 6))
	images := func(n int) []loaders.Sample {
		s := make([]loaders.Sample, n)
		for i := range s {
			label := r.IntN(classes)
			px := make([]uint8, size*size)
			for j := range px {
				px[j] = uint8(r.IntN(96))
			}
			for x := 2; x < size-2; x++ {
				px[2*label*size+x] = 255
			}
			s[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: size, W: size, C: 1}, Label: label}
		}
		return s
	}
	trainSet, testSet := images(160), images(80)
	for _, spec := range []string{
		"swin(patch_size=2,embed_dim=16," + smallSwin + ",window_size=4)",
		"swin_v2(patch_size=2,embed_dim=16," + smallSwin + ",window_size=4)",
	} {
		t.Run(spec[:strings.IndexByte(spec, '(')], func(t *testing.T) {
			m, err := train.NewModel(spec, in, classes)
			if err != nil {
				t.Fatal(err)
			}
			dev, err := gpu.Open("cpu")
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			tr, err := train.New(context.Background(), m, dev, optim.AdamW{LR: 2e-3, WeightDecay: 0.05}, train.Config{Epochs: 2, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			load := func(s []loaders.Sample, shuffle bool) *loaders.Loader {
				l, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "bars", NumClasses: classes, Shape: in,
					Mean: []float32{0.3}, Std: []float32{0.3}}, s),
					loaders.Config{Batch: 20, Workers: 1, Shuffle: shuffle, Seed: 1, Device: dev, Stream: tr.Stream()})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			trainData, testData := load(trainSet, true), load(testSet, false)
			defer trainData.Close()
			defer testData.Close()
			res, err := tr.Fit(t.Context(), train.FromLoader(trainData), train.FromLoader(testData))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("losses %.3f then %.3f, test accuracy %.3f, %.1f s", res.History[0].TrainLoss, res.History[1].TrainLoss, res.TestAcc, res.Seconds)
			if res.History[1].TrainLoss >= res.History[0].TrainLoss || res.TestAcc < 0.5 {
				t.Errorf("losses %.3f then %.3f, test accuracy %.3f: want a falling loss and accuracy at least 0.5",
					res.History[0].TrainLoss, res.History[1].TrainLoss, res.TestAcc)
			}
		})
	}
}

// TestSwinV2LogitScaleClamp: V2's attention scale is exp(min(logit_scale, log 100)), as
// torchvision's clamp: a logit_scale above log 100 gives the logits of log 100 and no gradient,
// one below it other logits and a gradient.
func TestSwinV2LogitScaleClamp(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ops, err := kernels.For(dev)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := nn.NewArena(dev)
	defer a.Free()
	cfg := models.SwinConfig{PatchSize: 2, EmbedDim: 8, WindowSize: 2, Depths: [4]int{1, 1, 1, 1}, NumHeads: [4]int{2, 2, 2, 2}, MLPRatio: 2, V2: true}
	m, err := models.NewSwin(cfg, 1, 3, "swin_v2")
	if err != nil {
		t.Fatal(err)
	}
	if err := nn.Bind(m, a, s, 1); err != nil {
		t.Fatal(err)
	}
	named, err := nn.StateDict(m)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, 2*8*8)
	for i := range in {
		in[i] = float32(math.Sin(float64(i)))
	}
	// run sets every logit_scale to v and returns the logits and the first block's logit_scale
	// gradient.
	run := func(v float32) (logits, grad []float32) {
		g := nn.NewGraph(ops, s, a, true, 1)
		for _, n := range named {
			g.Attach(n.Tensor)
			if strings.HasSuffix(n.Name, "logit_scale") {
				vals := []float32{v, v}
				if err := s.CopyH2D(n.Tensor.Data().Buf, 4*n.Tensor.Data().Off, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 8)); err != nil {
					t.Fatal(err)
				}
			}
		}
		y := m.Forward(g.Constant(in, 2, 1, 8, 8))
		if err := g.Backward(nn.Sum(y, []int{0, 1}, false), nil); err != nil {
			t.Fatal(err)
		}
		if logits, err = y.Host(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		scale := m.Features[1].(nn.Sequential)[0].(*models.SwinBlock).Attn.LogitScale
		if grad, err = g.Input(scale.GradData(), 2).Host(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		return logits, grad
	}
	clamped, _ := run(float32(math.Log(100)))
	above, gradAbove := run(6)
	below, gradBelow := run(3)
	if !slices.Equal(above, clamped) || slices.ContainsFunc(gradAbove, func(v float32) bool { return v != 0 }) {
		t.Errorf("logit_scale 6: logits %v, gradient %v; want log 100's %v and no gradient", above, gradAbove, clamped)
	}
	if slices.Equal(below, clamped) || !slices.ContainsFunc(gradBelow, func(v float32) bool { return v != 0 }) {
		t.Errorf("logit_scale 3: logits %v, gradient %v; want others than log 100's and a gradient", below, gradBelow)
	}
}

// TestSwinGradients: small Swin V1 and V2 models with torchvision's random weights give every
// parameter the gradient torchvision gives it, of sum(logits²)/2 in evaluation mode, within 1e-4
// of the tensor's largest: the backward pass through windows, shifts, masks, the position-bias
// gathers and V2's cosine attention (whose key bias gets none) is torchvision's autograd's. The
// images are not square, so that some maps are shifted along one side only (a window covers the
// other), and V2's merge odd sides.
func TestSwinGradients(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy")
	const n, classes = 2, 5
	for _, tc := range []struct {
		name   string
		h, w   int
		cfg    models.SwinConfig
		python string
	}{
		// 16x8, 8x4 (shifted along H only), 4x2 and 2x1 maps.
		{"v1", 32, 16, models.SwinConfig{PatchSize: 2, EmbedDim: 8, WindowSize: 4, Depths: [4]int{2, 2, 2, 1}, NumHeads: [4]int{2, 2, 4, 4}, MLPRatio: 4},
			"torchvision.models.SwinTransformer([2, 2], 8, [2, 2, 2, 1], [2, 2, 4, 4], [4, 4], num_classes=5)"},
		// 14x10, 7x5, 4x3 (padded to 6x3, shifted along H only) and 2x2 maps.
		{"v2", 28, 20, models.SwinConfig{PatchSize: 2, EmbedDim: 8, WindowSize: 3, Depths: [4]int{2, 2, 2, 2}, NumHeads: [4]int{2, 2, 4, 4}, MLPRatio: 4, V2: true},
			"torchvision.models.SwinTransformer([2, 2], 8, [2, 2, 2, 2], [2, 2, 4, 4], [3, 3], num_classes=5, " +
				"block=torchvision.models.swin_transformer.SwinTransformerBlockV2, downsample_layer=torchvision.models.swin_transformer.PatchMergingV2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			pixels := make([]uint8, n*3*tc.h*tc.w)
			for i := range pixels {
				pixels[i] = uint8(r.IntN(256))
			}
			dir := t.TempDir()
			u8, wst, gst := filepath.Join(dir, "pixels.u8"), filepath.Join(dir, "w.safetensors"), filepath.Join(dir, "g.safetensors")
			if err := os.WriteFile(u8, pixels, 0o644); err != nil {
				t.Fatal(err)
			}
			runPython(t, py, "torchvision_parity.py", wst, u8, strconv.Itoa(n), fmt.Sprintf("%dx%d", tc.h, tc.w), tc.python, "--grads", gst)
			weights, grads := readF32Safetensors(t, wst), readF32Safetensors(t, gst)

			dev, err := gpu.Open("cpu")
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			ops, err := kernels.For(dev)
			if err != nil {
				t.Fatal(err)
			}
			s, err := dev.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			a := nn.NewArena(dev)
			defer a.Free()
			m, err := models.NewSwin(tc.cfg, 3, classes, "swin")
			if err != nil {
				t.Fatal(err)
			}
			if err := nn.Bind(m, a, s, 1); err != nil {
				t.Fatal(err)
			}
			named, err := nn.StateDict(m)
			if err != nil {
				t.Fatal(err)
			}
			g := nn.NewGraph(ops, s, a, false, 1)
			for _, p := range named {
				w, ok := weights[p.Name]
				if !ok || len(w) != p.Tensor.Len() {
					t.Fatalf("%s: %d values in torchvision's file; want %d", p.Name, len(w), p.Tensor.Len())
				}
				if err := s.CopyH2D(p.Tensor.Data().Buf, 4*p.Tensor.Data().Off, unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))); err != nil {
					t.Fatal(err)
				}
				g.Attach(p.Tensor)
			}
			mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
			x := make([]float32, len(pixels))
			for i, v := range pixels {
				c := i / (tc.h * tc.w) % 3
				x[i] = (float32(v)/255 - mean[c]) / std[c]
			}
			y := m.Forward(g.Constant(x, n, 3, tc.h, tc.w))
			if err := g.Backward(nn.Scale(nn.Sum(nn.Mul(y, y), []int{0, 1}, false), 0.5), nil); err != nil {
				t.Fatal(err)
			}
			var worst float64
			for _, p := range named {
				want := grads[p.Name]
				got, err := g.Input(p.Tensor.GradData(), p.Tensor.Shape()...).Host(t.Context(), g)
				if err != nil {
					t.Fatal(err)
				}
				var diff, scale float64
				for i := range want {
					diff = max(diff, math.Abs(float64(got[i]-want[i])))
					scale = max(scale, math.Abs(float64(want[i])))
				}
				worst = max(worst, diff/max(scale, 1e-30))
				if diff > 1e-4*scale {
					t.Errorf("%s: gradient differs from torchvision's by up to %.3g (largest %.3g)", p.Name, diff, scale)
				}
			}
			t.Logf("largest gradient difference %.2g of its tensor's largest", worst)
		})
	}
}

// readF32Safetensors reads a safetensors file's float32 tensors (others, torchvision's int64
// indices, are left out) by name.
func readF32Safetensors(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+hl], &header); err != nil {
		t.Fatal(err)
	}
	data := b[8+hl:]
	out := map[string][]float32{}
	for name, raw := range header {
		var info struct {
			DType   string `json:"dtype"`
			Offsets [2]int `json:"data_offsets"`
		}
		if name == "__metadata__" || json.Unmarshal(raw, &info) != nil || info.DType != "F32" {
			continue
		}
		v := make([]float32, (info.Offsets[1]-info.Offsets[0])/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[info.Offsets[0]+4*i:]))
		}
		out[name] = v
	}
	return out
}
