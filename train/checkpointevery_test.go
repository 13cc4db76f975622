package train

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
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
		tr, err := New(context.Background(), smallMLP(t), dev, optim.SGD{LR: 0.05, Momentum: 0.9}, cfg)
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
	if got, want := modelWeights(t, resumed), modelWeights(t, whole); !reflect.DeepEqual(got, want) {
		t.Error("the run resumed within its epoch ends with other weights than the uninterrupted run")
	}

	// In-memory data without BatchesFrom cannot resume within the epoch.
	imgs, labels := synthetic(200, 1)
	mem := newMemData(dev, imgs, labels, img8, 20, true, 7) // 10 batches an epoch, as the loader's
	defer mem.close()
	tr, err := New(context.Background(), smallMLP(t), dev, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 3, Seed: 4, Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(context.Background(), mem, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("resuming within the epoch from data that cannot seek: %v; want ErrConfig", err)
	}
}

// TestMaxSteps: MaxSteps ends Fit inside an epoch, the schedule over its steps (a cosine's rate
// at zero by the last), that part evaluated and recorded; a run resumed from its checkpoint with
// no bound goes on at the next batch and ends with the weights of a run never stopped, bit for
// bit (a constant rate, so that both take the same steps).
func TestMaxSteps(t *testing.T) {
	f := newFixture(t, 320) // 10 steps per epoch
	ck := filepath.Join(t.TempDir(), "ck")
	var lrs []float64
	res, tr := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Epochs: 3, Seed: 1, MaxSteps: 15, Schedule: optim.Cosine(0), Checkpoint: ck,
		Progress: func(p *Progress) {
			if !p.Done {
				lrs = append(lrs, p.LR)
			}
		}})
	if res.Steps != 15 || res.Epochs != 1 || len(res.History) != 2 || res.History[1].Epoch != 2 {
		t.Fatalf("%d steps, %d epochs, %d epoch records; want 15 steps, 1 whole epoch and a part of the second", res.Steps, res.Epochs, len(res.History))
	}
	if res.History[0].Partial || !res.History[1].Partial {
		t.Errorf("epochs partial %v, %v; want the second only", res.History[0].Partial, res.History[1].Partial)
	}
	if len(lrs) != 15 || !(lrs[14] < 0.1*0.02) {
		t.Errorf("%d steps' rates, the last %g; want 15, the cosine over them near 0 at the end", len(lrs), lrs[len(lrs)-1])
	}
	if _, err := tr.Fit(t.Context(), f.train, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "MaxSteps") {
		t.Errorf("Fit past MaxSteps: %v; want ErrConfig naming MaxSteps", err)
	}
	// The resume through a Loader, which starts an epoch at a batch (Seeker).
	dev := openCPU(t)
	ds := memDataset(200, 1) // 10 batches of 20
	// With test data, each epoch is evaluated; a plateau whose threshold no epoch beats reduces
	// the rate after each epoch but the first, and a part of an epoch must not count as one.
	run := func(cfg Config, evaluate bool) (Result, *Trainer) {
		t.Helper()
		tr, err := New(context.Background(), smallMLP(t), dev, optim.SGD{LR: 0.05, Momentum: 0.9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		open := func(ds loaders.Dataset, shuffle bool) Data {
			l, err := loaders.New(ds, loaders.Config{Batch: 20, Workers: 2, Shuffle: shuffle, Seed: 9, Device: dev, Stream: tr.Stream()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return FromLoader(l)
		}
		var test Data
		if evaluate {
			test = open(memDataset(60, 2), false)
		}
		res, err := tr.Fit(context.Background(), open(ds, true), test)
		if err != nil {
			t.Fatal(err)
		}
		return res, tr
	}
	plateau := &Plateau{Factor: 0.5, Threshold: 10}
	for _, evaluate := range []bool{false, true} {
		cfg := Config{Epochs: 2, Seed: 4}
		if evaluate {
			cfg.Plateau = plateau
		}
		ck2 := filepath.Join(t.TempDir(), "ck2")
		first, second := cfg, cfg
		first.Checkpoint, first.MaxSteps = ck2, 15
		second.Checkpoint, second.Resume = ck2, ck2
		run(first, evaluate)
		res2, tr2 := run(second, evaluate)
		_, whole := run(cfg, evaluate)
		if res2.Steps != 20 || res2.Epochs != 2 {
			t.Errorf("resumed (evaluated %v): %d steps, %d epochs; want 20 and 2", evaluate, res2.Steps, res2.Epochs)
		}
		got, want := modelWeights(t, tr2), modelWeights(t, whole)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("evaluated %v: tensor %d after a stop at step 15 and a resume differs from the uninterrupted run's", evaluate, i)
			}
		}
	}
}
