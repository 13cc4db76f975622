package train

import (
	"context"
	"os"
	"testing"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/mnistfetch"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/transforms"
)

func memDataset(n int, seed uint64) *loaders.Memory {
	imgs, labels := synthetic(n, seed)
	samples := make([]loaders.Sample, n)
	for i := range samples {
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: imgs[i*64 : (i+1)*64], H: 8, W: 8, C: 1}, Label: int(labels[i])}
	}
	return loaders.NewMemory(loaders.Info{Name: "synthetic", NumClasses: 10, Shape: transforms.Shape{C: 1, H: 8, W: 8},
		Mean: []float32{0.3}, Std: []float32{0.3}}, samples)
}

// fitLoader trains model on ds through real loaders (workers goroutines each) and returns the result.
// The training loader mixes batches with mix (the zero value: none).
func fitLoader(t *testing.T, dev gpu.Device, m *Model, trainDS, testDS loaders.Dataset, workers, epochs, batch int, mix transforms.Mix) Result {
	t.Helper()
	tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.05, Momentum: 0.9, Nesterov: true}, Config{Epochs: epochs, Seed: 1, Schedule: optim.Cosine(0.1)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}()
	trainL, err := loaders.New(trainDS, loaders.Config{Batch: batch, Workers: workers, Shuffle: true, Seed: 9, Device: dev, Stream: tr.Stream(), Mix: mix})
	if err != nil {
		t.Fatal(err)
	}
	defer trainL.Close()
	testL, err := loaders.New(testDS, loaders.Config{Batch: 500, Workers: workers, Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	defer testL.Close()
	res, err := tr.Fit(context.Background(), FromLoader(trainL), FromLoader(testL))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLoaderWorkersDoNotChangeTheRun(t *testing.T) {
	dev := openCPU(t)
	trainDS, testDS := memDataset(600, 1), memDataset(200, 2)
	var first Result
	for _, workers := range []int{1, 3, 8} {
		res := fitLoader(t, dev, smallCNN(t), trainDS, testDS, workers, 2, 32, transforms.Mix{})
		if workers == 1 {
			first = res
			if res.TestAcc < 0.8 {
				t.Fatalf("test accuracy through the loader = %v; want >= 0.8", res.TestAcc)
			}
			continue
		}
		if res.FinalLoss != first.FinalLoss || res.TestAcc != first.TestAcc {
			t.Fatalf("workers=%d: final loss %v, accuracy %v; want %v, %v as with 1 worker", workers, res.FinalLoss, res.TestAcc, first.FinalLoss, first.TestAcc)
		}
	}
}

// subset is samples [off, off+n) of a dataset.
type subset struct {
	loaders.Dataset
	off, n int
}

func (s subset) Len() int           { return s.n }
func (s subset) Info() loaders.Info { return loaders.Describe(s.Dataset) }
func (s subset) Sample(ctx context.Context, i int) (loaders.Sample, error) {
	return s.Dataset.Sample(ctx, s.off+i)
}

// TestMNISTSmoke trains the MLP for 40 steps of 64 on real MNIST (when the GoMNIST module is in
// the module cache, or STOKE_MNIST names a folder of the IDX files) and expects far better than
// chance on other images. It reads only the test split: decompressing the training split under
// the race detector would take most of the package's time budget.
func TestMNISTSmoke(t *testing.T) {
	spec := "mnist"
	if d := os.Getenv("STOKE_MNIST"); d != "" {
		spec = "mnist:" + d
	}
	spec, err := mnistfetch.Spec(t.Context(), spec)
	if err != nil {
		t.Skipf("no MNIST here: %v", err)
	}
	ds, err := datasets.Open(spec, "test")
	if err != nil {
		t.Skipf("no MNIST here: %v", err)
	}
	m, err := NewModel("mlp", Shape{C: 1, H: 28, W: 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	res := fitLoader(t, openCPU(t), m, subset{ds, 0, 40 * 64}, subset{ds, 5000, 1000}, 2, 1, 64, transforms.Mix{})
	if res.TestAcc < 0.8 {
		t.Fatalf("MNIST MLP after 40 steps: accuracy on 1000 other images %v; want >= 0.8", res.TestAcc)
	}
}
