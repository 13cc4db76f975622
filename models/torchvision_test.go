package models_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
	"github.com/stoke-ml/stoke/weights"
)

// runPython runs testdata/script with args under py and returns what it printed; its standard
// error goes into the failure.
func runPython(t *testing.T, py, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", script)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.Bytes())
	}
	return out
}

// pythonJSON runs testdata/script as runPython does and decodes the JSON it printed into v.
func pythonJSON(t *testing.T, v any, py, script string, args ...string) {
	t.Helper()
	out := runPython(t, py, script, args...)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s printed %.200q: %v", script, out, err)
	}
}

// torchvisionCases are the zoo's models next to the torchvision constructor of the same
// architecture: small configurations, 3-channel images of the given size, 5 classes.
var torchvisionCases = []struct {
	spec, python string
	size         int
}{
	{"mobilenet_v2(width_mult=0.5)", "torchvision.models.mobilenet_v2(width_mult=0.5, num_classes=5)", 32},
	{"mobilenet_v3_small", "torchvision.models.mobilenet_v3_small(num_classes=5)", 32},
	{"efficientnet_b0", "torchvision.models.efficientnet_b0(num_classes=5)", 32},
	{"efficientnet_v2_s", "torchvision.models.efficientnet_v2_s(num_classes=5)", 32},
	{"efficientnet(width_mult=0.25,depth_mult=0.25)",
		"torchvision.models.EfficientNet(torchvision.models.efficientnet._efficientnet_conf('efficientnet_b0', " +
			"width_mult=0.25, depth_mult=0.25)[0], 0.2, num_classes=5)", 32},
	{"vit(image_size=16,patch_size=4,num_layers=2,num_heads=2,hidden_dim=16,mlp_dim=32)",
		"torchvision.models.VisionTransformer(16, 4, 2, 2, 16, 32, num_classes=5)", 16},
	{"convnext(width_1=8,width_2=16,width_3=24,width_4=32,depth_1=1,depth_2=1,depth_3=2,depth_4=1)",
		"torchvision.models.ConvNeXt([torchvision.models.convnext.CNBlockConfig(w, o, d) for w, o, d in " +
			"[(8, 16, 1), (16, 24, 1), (24, 32, 2), (32, None, 1)]], num_classes=5)", 32},
	{"resnet(layers_1=1,layers_2=1,layers_3=2,layers_4=1,groups=4,width_per_group=8)",
		"torchvision.models.ResNet(torchvision.models.resnet.Bottleneck, [1, 1, 2, 1], num_classes=5, groups=4, width_per_group=8)", 32},
	{"regnet(depth_1=1,depth_2=1,depth_3=2,depth_4=1,width_1=8,width_2=16,width_3=24,width_4=32,group_width=8,se_ratio=0.25,stem_width=8)",
		"torchvision.models.RegNet(torchvision.models.regnet.BlockParams([1, 1, 2, 1], [8, 16, 24, 32], [8] * 4, [1.0] * 4, [2] * 4, 0.25), " +
			"num_classes=5, stem_width=8)", 32},
	// 28 px in 2 px patches: 14, 7, 4 and 2 px maps, padded to whole windows and shifted
	// (torchvision's roll and mask) where a window does not cover the map.
	{"swin(patch_size=2,embed_dim=8,depth_1=2,depth_2=2,depth_3=2,depth_4=1,num_heads_1=2,num_heads_2=2,num_heads_3=4,num_heads_4=4,window_size=4)",
		"torchvision.models.SwinTransformer([2, 2], 8, [2, 2, 2, 1], [2, 2, 4, 4], [4, 4], num_classes=5)", 28},
	{"swin_v2(patch_size=2,embed_dim=8,depth_1=2,depth_2=2,depth_3=2,depth_4=2,num_heads_1=2,num_heads_2=2,num_heads_3=4,num_heads_4=4,window_size=3)",
		"torchvision.models.SwinTransformer([2, 2], 8, [2, 2, 2, 2], [2, 2, 4, 4], [3, 3], num_classes=5, " +
			"block=torchvision.models.swin_transformer.SwinTransformerBlockV2, downsample_layer=torchvision.models.swin_transformer.PatchMergingV2)", 28},
}

// TestTorchvision: each model of torchvisionCases, built in PyTorch with random weights and
// BatchNorm statistics and saved as safetensors, loads strictly into the zoo's model of the same
// arguments; on the same uint8 pixels and normalization its logits equal torchvision's within
// 1e-4 of the largest.
func TestTorchvision(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy")
	for _, tc := range torchvisionCases {
		t.Run(tc.spec, func(t *testing.T) { compareTorchvision(t, py, tc.spec, tc.python, tc.size) })
	}
}

func compareTorchvision(t *testing.T, py, spec, python string, size int) {
	compareParity(t, py, spec, size, 1e-4, python)
}

// compareParity builds exprs[0] in Python (torchvision_parity.py: random weights saved as
// safetensors, and the logits of exprs[1] with them when given) and checks that spec, loading
// those weights strictly, predicts the same logits on the same size×size pixels within tol of the
// largest. It returns LoadWeights's report.
func compareParity(t *testing.T, py, spec string, size int, tol float64, exprs ...string) *weights.Report {
	t.Helper()
	const n, classes = 3, 5
	r := rand.New(rand.NewPCG(3, 4))
	pixels := make([]uint8, n*3*size*size)
	for i := range pixels {
		pixels[i] = uint8(r.IntN(256))
	}
	dir := t.TempDir()
	u8, st := filepath.Join(dir, "pixels.u8"), filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(u8, pixels, 0o644); err != nil {
		t.Fatal(err)
	}
	out := runPython(t, py, "torchvision_parity.py", append([]string{st, u8, strconv.Itoa(n), strconv.Itoa(size)}, exprs...)...)
	var want [][]float64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var row []float64
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("torchvision_parity.py printed %q: %v", line, err)
		}
		want = append(want, row)
	}

	in := train.Shape{C: 3, H: size, W: size}
	m, err := train.NewModel(spec, in, classes)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tr, err := train.New(context.Background(), m, dev, nil, train.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := tr.LoadWeights(context.Background(), st, weights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) == 1 {
		// Weights in, weights out: the export holds the file's tensors bit for bit, so it loads
		// back into the Python model strictly and unchanged.
		back := filepath.Join(dir, "back.safetensors")
		if err := tr.Export(context.Background(), back); err != nil {
			t.Fatal(err)
		}
		sameTensors(t, st, back)
	}
	samples := make([]loaders.Sample, n)
	per := 3 * size * size
	for i := range samples {
		// The loader takes interleaved (HWC) pixels; the file is planar (CHW).
		px := make([]uint8, per)
		for c := range 3 {
			for j := range size * size {
				px[j*3+c] = pixels[i*per+c*size*size+j]
			}
		}
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: size, W: size, C: 3}}
	}
	data, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "pixels", NumClasses: classes, Shape: in,
		Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225}}, samples),
		loaders.Config{Batch: n, Workers: 1, Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	p, err := tr.Predict(t.Context(), train.FromLoader(data))
	if err != nil {
		t.Fatal(err)
	}
	var worst, scale float64
	for i := range n {
		for j := range classes {
			worst = max(worst, math.Abs(float64(p.Logits[i*classes+j])-want[i][j]))
			scale = max(scale, math.Abs(want[i][j]))
		}
	}
	t.Logf("largest logit difference from Python's %.2g (logits up to %.2g)", worst, scale)
	if worst > tol*scale || scale < 0.1 {
		t.Errorf("logits differ from Python's by up to %.3g (largest %.3g); want at most %g of the largest", worst, scale, tol)
	}
	return rep
}

// sameTensors checks that the safetensors files want and got hold the same tensors (names, dtypes,
// shapes) with the same bytes.
func sameTensors(t *testing.T, want, got string) {
	t.Helper()
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	read := func(path string) (map[string]entry, []byte) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(b)
		var h map[string]json.RawMessage
		if err := json.Unmarshal(b[8:8+n], &h); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		delete(h, "__metadata__")
		out := map[string]entry{}
		for k, v := range h {
			var e entry
			if err := json.Unmarshal(v, &e); err != nil {
				t.Fatalf("%s: %s: %v", path, k, err)
			}
			out[k] = e
		}
		return out, b[8+n:]
	}
	we, wd := read(want)
	ge, gd := read(got)
	for k, w := range we {
		g, ok := ge[k]
		switch {
		case !ok:
			t.Errorf("the export lacks %s", k)
		case w.DType != g.DType || !slices.Equal(w.Shape, g.Shape):
			t.Errorf("%s: exported %s %v; the file's %s %v", k, g.DType, g.Shape, w.DType, w.Shape)
		case !bytes.Equal(wd[w.Offsets[0]:w.Offsets[1]], gd[g.Offsets[0]:g.Offsets[1]]):
			t.Errorf("%s: the exported values differ from the file's", k)
		}
	}
	for k := range ge {
		if _, ok := we[k]; !ok {
			t.Errorf("the export has %s, which the file lacks", k)
		}
	}
}
