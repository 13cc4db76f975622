package train

import (
	"bytes"
	"context"
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

	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/weights"
)

// normData is a memData with a per-channel mean and std of its own.
type normData struct {
	*memData
	std []float32
}

func (d normData) Normalization() (mean, std []float32) { return d.mean, d.std }

// imageNet's mean and std, which testdata/torchvision_weights.py normalizes with.
var (
	imageNetMean = []float32{0.485, 0.456, 0.406}
	imageNetStd  = []float32{0.229, 0.224, 0.225}
)

// TestTorchvisionWeights: a torchvision resnet18 and resnet50, initialized in PyTorch with a fixed
// seed, BatchNorm statistics set to non-trivial values and saved with safetensors, load strictly
// into stoke's resnet of the same name; on the same uint8 pixels and normalization their logits
// in evaluation mode equal torchvision's within 1e-4, and exporting the loaded model gives back
// every tensor of the file bit for bit (num_batches_tracked included).
func TestTorchvisionWeights(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy")
	const n, size, classes = 6, 64, 5
	r := rand.New(rand.NewPCG(3, 4))
	pixels := make([]uint8, n*3*size*size)
	for i := range pixels {
		pixels[i] = uint8(r.IntN(256))
	}
	dir := t.TempDir()
	u8 := filepath.Join(dir, "pixels.u8")
	if err := os.WriteFile(u8, pixels, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"resnet18", "resnet50"} {
		t.Run(name, func(t *testing.T) {
			st := filepath.Join(dir, name+".safetensors")
			cmd := exec.Command(py, filepath.Join("testdata", "torchvision_weights.py"), name, strconv.Itoa(classes), st, strconv.Itoa(size), u8, strconv.Itoa(n))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("torchvision_weights.py: %v", err)
			}
			var want [][]float64
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var row []float64
				if err := json.Unmarshal([]byte(line), &row); err != nil {
					t.Fatalf("torchvision_weights.py printed %q: %v", line, err)
				}
				want = append(want, row)
			}
			if len(want) != n {
				t.Fatalf("torchvision_weights.py printed %d rows; want %d", len(want), n)
			}

			m, err := NewModel(name, Shape{C: 3, H: size, W: size}, classes)
			if err != nil {
				t.Fatal(err)
			}
			dev := openCPU(t)
			tr, err := New(context.Background(), m, dev, nil, Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			rep, err := tr.LoadWeights(context.Background(), st, weights.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Loaded) != len(m.tensors()) {
				t.Fatalf("loaded %d of %d tensors", len(rep.Loaded), len(m.tensors()))
			}
			md := newMemData(dev, pixels, make([]int32, n), m.Input(), n, false, 0)
			defer md.close()
			md.mean = imageNetMean
			p, err := tr.Predict(t.Context(), normData{md, imageNetStd})
			if err != nil {
				t.Fatal(err)
			}
			var worst, scale float64
			for i := range n {
				for j := range classes {
					got := float64(p.Logits[i*classes+j])
					worst = max(worst, math.Abs(got-want[i][j]))
					scale = max(scale, math.Abs(want[i][j]))
				}
			}
			t.Logf("%s: largest logit difference from torchvision %.2g (logits up to %.2g)", name, worst, scale)
			if worst > 1e-4 {
				t.Errorf("%s: logits differ from torchvision's by up to %.3g; want at most 1e-4", name, worst)
			}
			if scale < 0.05 {
				t.Errorf("%s: logits up to %.3g only: the comparison would prove little", name, scale)
			}

			again := filepath.Join(dir, name+"-again.safetensors")
			if err := tr.Export(context.Background(), again); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(st)
			b, _ := os.ReadFile(again)
			orig, _, _ := readSafetensors(t, a)
			back, _, _ := readSafetensors(t, b)
			if len(orig) != len(back) {
				t.Fatalf("export after import has %d tensors; the torchvision file %d", len(back), len(orig))
			}
			for k, e := range orig {
				g, ok := back[k]
				if !ok || g.DType != e.DType || !slices.Equal(g.Shape, e.Shape) || !bytes.Equal(g.data, e.data) {
					t.Fatalf("%s: exported %s %v differs from torchvision's %s %v (present %v)", k, g.DType, g.Shape, e.DType, e.Shape, ok)
				}
			}
		})
	}
}
