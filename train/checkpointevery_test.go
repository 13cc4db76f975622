package train

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/loaders"
)

// TestCheckpointEvery: with CheckpointEvery a run writes its checkpoint within the epoch, and a
// run killed after it resumes inside the epoch at the next batch (the loader placed there without
// reading the batches before) and ends with the weights of the uninterrupted run, bit for bit:
// the same order, dropout masks and optimizer state. Data that cannot start an epoch at a batch
// is refused, not trained from its first batch again.
func TestCheckpointEvery(t *testing.T) {
	dev := openCPU(t)
	trainDS, testDS := memDataset(200, 1), memDataset(60, 2)
	run := func(cfg Config, stopAt int) (*Trainer, error) {
		t.Helper()
		tr, err := New(context.Background(), smallMLP(t), dev, SGD{LR: 0.05, Momentum: 0.9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trainL, err := loaders.New(trainDS, loaders.Config{Batch: 20, Workers: 2, Shuffle: true, Seed: 9, Device: dev, Stream: tr.Stream()})
		if err != nil {
			t.Fatal(err)
		}
		defer trainL.Close()
		testL, err := loaders.New(testDS, loaders.Config{Batch: 30, Device: dev, Stream: tr.Stream()})
		if err != nil {
			t.Fatal(err)
		}
		defer testL.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		steps := 0
		tr.cfg.Progress = func(p *Progress) {
			if !p.Done {
				if steps++; steps == stopAt {
					cancel() // killed during step stopAt+1
				}
			}
		}
		_, err = tr.Fit(ctx, FromLoader(trainL), FromLoader(testL))
		return tr, err
	}
	whole, err := run(Config{Epochs: 3, Seed: 4}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	if _, err := run(Config{Epochs: 3, Seed: 4, Checkpoint: ck, CheckpointEvery: 3}, 16); !errors.Is(err, context.Canceled) {
		t.Fatalf("the run to kill: %v", err)
	}
	f, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	var st loopState
	if err := json.Unmarshal(f.State, &st); err != nil || f.Epochs != 1 || f.Steps != 15 || st.EpochBatches != 5 {
		t.Fatalf("the last checkpoint: %d epochs, %d steps, %d batches into the next epoch (%v); want 1, 15 and 5", f.Epochs, f.Steps, st.EpochBatches, err)
	}
	resumed, err := run(Config{Epochs: 3, Seed: 4, Resume: ck}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.step != 30 || resumed.epochs != 3 {
		t.Fatalf("resumed run ended at step %d, epoch %d; want 30 and 3", resumed.step, resumed.epochs)
	}
	if got, want := weights(t, resumed), weights(t, whole); !reflect.DeepEqual(got, want) {
		t.Error("the run resumed within its epoch ends with other weights than the uninterrupted run")
	}

	// In-memory data without BatchesFrom cannot resume within the epoch.
	imgs, labels := synthetic(200, 1)
	mem := newMemData(dev, imgs, labels, img8, 20, true, 7) // 10 batches an epoch, as the loader's
	defer mem.close()
	tr, err := New(context.Background(), smallMLP(t), dev, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 3, Seed: 4, Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(context.Background(), mem, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("resuming within the epoch from data that cannot seek: %v; want ErrConfig", err)
	}
}
