package train

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/optim"
)

// trainStep runs one optimizer step on the one batch b, as Fit does without accumulation, and
// returns its mean loss (total and perEpoch are the schedule's).
func (t *Trainer) trainStep(ctx context.Context, b Batch, mean, std []float32, total, perEpoch int) (float64, error) {
	g := stepGroup{}
	err := t.enqueueBatch(ctx, b, mean, std, &g, true)
	if b.Release != nil {
		b.Release()
	}
	if err != nil {
		return 0, err
	}
	return t.finishStep(context.Background(), g, perEpoch, total)
}

// stepWeights trains mk's model for epochs over data with cfg and returns the weights after every
// optimizer step, the EMA's after the last (nil without one) and the result.
func stepWeights(t *testing.T, dev gpu.Device, m *Model, data, test Data, opt optim.Optimizer, cfg Config) ([][][]float32, [][]float32, Result) {
	t.Helper()
	var tr *Trainer
	var per [][][]float32
	cfg.Progress = func(p *Progress) {
		if !p.Done {
			per = append(per, modelWeights(t, tr))
		}
	}
	tr, err := New(context.Background(), m, dev, opt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	res, err := tr.Fit(context.Background(), data, test)
	if err != nil {
		t.Fatal(err)
	}
	var ema [][]float32
	if tr.hasEMA {
		tr.swapEMA()
		ema = modelWeights(t, tr)
		tr.swapEMA()
	}
	return per, ema, res
}

// TestAccumulateEquivalence: 4 accumulated batches of 32 train as one batch of 128, step for step,
// within float32 rounding (the sums of the gradient products are split in four), the epoch's last
// step taking what is left (64 samples: 2 batches of 32, or one of 64), with a cosine schedule that
// counts optimizer steps in both runs.
func TestAccumulateEquivalence(t *testing.T) {
	const n = 128*5 + 64
	for _, mk := range []func(testing.TB) *Model{plainMLP, smallCNN} {
		dev := openCPU(t)
		imgs, labels := synthetic(n, 1)
		timgs, tlabels := synthetic(100, 2)
		test := newMemData(dev, timgs, tlabels, img8, 50, false, 0)
		defer test.close()
		run := func(batch, accumulate int) ([][][]float32, Result) {
			data := newMemData(dev, imgs, labels, img8, batch, true, 7)
			defer data.close()
			per, _, res := stepWeights(t, dev, mk(t), data, test, optim.SGD{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4},
				Config{Epochs: 2, Seed: 3, Schedule: optim.Cosine(0.5), Accumulate: accumulate})
			return per, res
		}
		big, rb := run(128, 1)
		acc, ra := run(32, 4)
		if len(big) != 12 || len(acc) != len(big) {
			t.Fatalf("%s: %d optimizer steps accumulated, %d with batch 128; want 12", mk(t).Name(), len(acc), len(big))
		}
		worst := 0.0
		for s := range big {
			worst = max(worst, relDiff(big[s], acc[s]))
		}
		// Measured: 1.3e-7 (mlp) and 7.7e-8 (cnn) after 12 steps; float32's epsilon is 1.2e-7.
		t.Logf("%s: largest weight difference over %d steps: %.2g of the largest weight; final loss %v vs %v", mk(t).Name(), len(big), worst,
			ra.FinalLoss, rb.FinalLoss)
		if worst > 1e-6 {
			t.Errorf("%s: accumulated weights drift from batch 128's by %.2g of the largest weight; want < 1e-6", mk(t).Name(), worst)
		}
		if math.Abs(ra.FinalLoss-rb.FinalLoss) > 1e-5*rb.FinalLoss {
			t.Errorf("%s: final loss %v accumulated, %v with batch 128", mk(t).Name(), ra.FinalLoss, rb.FinalLoss)
		}
		if ra.History[1].LR != rb.History[1].LR {
			t.Errorf("%s: last learning rate %v accumulated, %v with batch 128: the schedule must count optimizer steps",
				mk(t).Name(), ra.History[1].LR, rb.History[1].LR)
		}
	}
}

// countingReducer counts the gradient elements a streamReducer all-reduces on the device.
type countingReducer struct {
	streamReducer
	elems *atomic.Int64
}

func (r countingReducer) AllReduceOnDevice(s gpu.Stream, v kernels.F32, op collective.Op) error {
	r.elems.Add(int64(v.Len))
	return r.streamReducer.AllReduceOnDevice(s, v, op)
}

// TestAccumulateDataParallel: 2 ranks with batches of 16 accumulating 4 per step, clipping by norm
// and keeping an EMA, train as one process with batches of 128: every rank holds the same bits
// (weights and EMA), within float32 rounding of the single process's; the gradients are reduced
// once per optimizer step, not per batch (DDP's no_sync), on the device and through the host; the
// evaluation's top-1, top-5 and per-class scores over the padded split are the single process's.
func TestAccumulateDataParallel(t *testing.T) {
	const n = 128 * 4
	imgs, labels := synthetic(n, 1)
	timgs, tlabels := synthetic(203, 2)
	opt := optim.SGD{LR: 0.05, Momentum: 0.9}
	loop := Config{Epochs: 2, Seed: 3, ClipGradNorm: 0.5, EMA: 0.9, Plateau: &Plateau{Factor: 0.5, Patience: 0}, EarlyStop: 5}
	dev := openCPU(t)
	one, oneEMA, oneRes := stepWeights(t, dev, plainMLP(t), newRankMem(t, dev, imgs, labels, 128, 0, 1, true, 7),
		newRankMem(t, dev, timgs, tlabels, 50, 0, 1, false, 0), opt, loop)
	for _, onDevice := range []bool{false, true} {
		const world = 2
		groups := testGroups(t, world)
		per := make([][][][]float32, world)
		ema := make([][][]float32, world)
		res := make([]Result, world)
		var elems atomic.Int64
		var wg sync.WaitGroup
		for r := range world {
			dev := openCPU(t)
			cfg := loop
			cfg.Accumulate, cfg.Collective = 4, groups[r]
			if onDevice {
				cfg.DeviceReduce = countingReducer{streamReducer{groups[r]}, &elems}
			}
			data := newRankMem(t, dev, imgs, labels, 32, r, world, true, 7)
			test := newRankMem(t, dev, timgs, tlabels, 50, r, world, false, 0)
			m := plainMLP(t)
			wg.Go(func() { per[r], ema[r], res[r] = stepWeights(t, dev, m, data, test, opt, cfg) })
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if len(per[0]) != len(one) {
			t.Fatalf("%d steps on 2 ranks; %d in one process", len(per[0]), len(one))
		}
		worst := relDiff(oneEMA, ema[0])
		for s := range one {
			if !sameTensors(per[0][s], per[1][s]) {
				t.Fatalf("step %d: the ranks' weights differ", s+1)
			}
			worst = max(worst, relDiff(one[s], per[0][s]))
		}
		if !sameTensors(ema[0], ema[1]) {
			t.Fatal("the ranks' EMAs differ")
		}
		t.Logf("on device %v: largest weight or EMA difference to one process: %.2g of the largest weight", onDevice, worst)
		// Measured: 7.9e-8.
		if worst > 1e-6 {
			t.Errorf("on device %v: 2 ranks accumulating drift from one process by %.2g; want < 1e-6", onDevice, worst)
		}
		if params := plainMLP(t).NumParams(); onDevice && elems.Load() != int64(world*len(one)*params) {
			t.Errorf("%d gradient elements all-reduced on the device; want %d: each once per optimizer step on each rank", elems.Load(), world*len(one)*params)
		}
		// The ranks decide alike (the same scores, learning rates, best epoch), and score as one
		// process does (within a sample of 203: the weights differ by rounding).
		scores := func(h EpochResult) []float64 {
			return append([]float64{h.TestAcc, h.TestTop5, h.EMAAcc, h.EMATop5, h.LR}, h.ClassAcc...)
		}
		for e, b := range oneRes.History {
			a0, a1 := scores(res[0].History[e]), scores(res[1].History[e])
			if !slices.Equal(a0, a1) {
				t.Errorf("epoch %d: rank 0 scores %v, rank 1 %v", e+1, a0, a1)
			}
			for i, v := range scores(b) {
				if math.Abs(a0[i]-v) > 1.0/203+1e-12 && i != 4 || i == 4 && a0[i] != v {
					t.Errorf("epoch %d: 2 ranks score %v; one process %v", e+1, a0, scores(b))
					break
				}
			}
		}
		if res[0].BestEpoch != res[1].BestEpoch || res[0].BestMetric != res[1].BestMetric {
			t.Errorf("best epoch %d (%v) on rank 0, %d (%v) on rank 1", res[0].BestEpoch, res[0].BestMetric, res[1].BestEpoch, res[1].BestMetric)
		}
	}
}

// TestClipGradNorm: a clipped SGD step (no momentum, no decay) moves the weights by the unclipped
// step times ClipGradNorm/(norm+1e-6), the norm computed here from the unclipped step's
// gradients (w0-w1)/lr over every tensor; a bound above the norm changes no bit.
func TestClipGradNorm(t *testing.T) {
	f := newFixture(t, 32) // one step
	const lr = 0.1
	step := func(clip float64) (w0, w1 [][]float32, norm float64) {
		tr, err := New(context.Background(), plainMLP(t), f.dev, optim.SGD{LR: lr}, Config{Seed: 5, ClipGradNorm: clip})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		w0 = modelWeights(t, tr)
		if _, err := tr.Fit(context.Background(), f.train, nil); err != nil {
			t.Fatal(err)
		}
		return w0, modelWeights(t, tr), tr.gradNorm
	}
	w0, free, _ := step(0)
	var sum float64
	for i := range w0 {
		for j := range w0[i] {
			g := float64(w0[i][j]-free[i][j]) / lr
			sum += g * g
		}
	}
	norm := math.Sqrt(sum)
	_, loose, measured := step(norm * 1.01)
	if !sameTensors(loose, free) {
		t.Error("a bound above the gradient norm changed the step")
	}
	if math.Abs(measured-norm) > 1e-4*norm {
		t.Errorf("the trainer's gradient norm %v; the step's %v", measured, norm)
	}
	_, clipped, _ := step(norm / 4)
	coef := norm / 4 / (norm + 1e-6)
	worst, largest := 0.0, 0.0
	for i := range w0 {
		for j := range w0[i] {
			want := coef * float64(w0[i][j]-free[i][j])
			worst = max(worst, math.Abs(float64(w0[i][j]-clipped[i][j])-want))
			largest = max(largest, math.Abs(want))
		}
	}
	t.Logf("norm %.6g: the clipped step differs from %.4g x the free one by %.2g of its largest element", norm, coef, worst/largest)
	if worst > 1e-4*largest {
		t.Errorf("the clipped step differs from %.4g x the free one by %.2g of its largest element; want < 1e-4", coef, worst/largest)
	}
}

// TestEMA: after every optimizer step the EMA is decay*ema + (1-decay)*w, from a copy of the
// initial weights (timm's ModelEmaV2), or with the warm-up decay min(decay, 1-(1+s)^(-2/3)),
// s = step-1 (ModelEmaV3's use_warmup): checked against the formula over the weights after each
// step, in float64.
func TestEMA(t *testing.T) {
	f := newFixture(t, 128)
	for _, warm := range []bool{false, true} {
		cfg := Config{Epochs: 2, Seed: 5, EMA: 0.8, EMAWarmup: warm}
		if warm {
			cfg.EMA = 0.99
		}
		var tr *Trainer
		var per [][][]float32
		cfg.Progress = func(p *Progress) {
			if !p.Done {
				per = append(per, modelWeights(t, tr))
			}
		}
		tr, err := New(context.Background(), smallCNN(t), f.dev, optim.SGD{LR: 0.1, Momentum: 0.9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		want := make([][]float64, 0)
		for _, w := range modelWeights(t, tr) {
			row := make([]float64, len(w))
			for j, v := range w {
				row[j] = float64(v)
			}
			want = append(want, row)
		}
		res, err := tr.Fit(context.Background(), f.train, f.test)
		if err != nil {
			t.Fatal(err)
		}
		for s, w := range per {
			d := cfg.EMA
			if warm {
				d = min(d, 1-math.Pow(float64(s+1), -2.0/3)) // s+1 = (step-1)+1
			}
			for i := range w {
				for j, v := range w[i] {
					want[i][j] = d*want[i][j] + (1-d)*float64(v)
				}
			}
		}
		tr.swapEMA()
		got := modelWeights(t, tr)
		tr.swapEMA()
		worst, largest := 0.0, 0.0
		for i := range got {
			for j, v := range got[i] {
				worst, largest = max(worst, math.Abs(float64(v)-want[i][j])), max(largest, math.Abs(want[i][j]))
			}
		}
		t.Logf("warm-up %v: EMA within %.2g of the formula's (of its largest element) after %d steps; accuracy %.3f, EMA's %.3f", warm, worst/largest,
			len(per), res.TestAcc, res.EMAAcc)
		if worst > 1e-6*largest {
			t.Errorf("warm-up %v: the EMA differs from the formula's by %.2g of its largest element; want < 1e-6", warm, worst/largest)
		}
		if res.EMAAcc == 0 || res.History[0].EMAAcc == 0 {
			t.Errorf("warm-up %v: the EMA was not evaluated: %+v", warm, res.History)
		}
	}
}

// TestEMAResume: a run with an EMA interrupted after epoch 1 and resumed ends with the same
// weights and EMA, bit for bit, as one that was not, and the same scores; a trainer without an
// optimizer serves the checkpoint's EMA (UseEMA).
func TestEMAResume(t *testing.T) {
	f := newFixture(t, 96)
	dir := t.TempDir()
	cfg := Config{Epochs: 2, Seed: 5, EMA: 0.7, EMAWarmup: true, Accumulate: 2, Plateau: &Plateau{Factor: 0.5}}
	_, emaStraight, straight := stepWeights(t, f.dev, smallCNN(t), f.train, f.test, optim.SGD{LR: 0.1, Momentum: 0.9}, cfg)
	first := cfg
	first.Epochs, first.Checkpoint = 1, filepath.Join(dir, "ck")
	stepWeights(t, f.dev, smallCNN(t), f.train, f.test, optim.SGD{LR: 0.1, Momentum: 0.9}, first)
	second := cfg
	second.Resume = first.Checkpoint
	per, emaResumed, resumed := stepWeights(t, f.dev, smallCNN(t), f.train, f.test, optim.SGD{LR: 0.1, Momentum: 0.9}, second)
	if !sameTensors(emaStraight, emaResumed) {
		t.Error("the resumed run's EMA differs from the straight run's")
	}
	if a, b := resumed.History[1], straight.History[1]; a.EMAAcc != b.EMAAcc || a.TestAcc != b.TestAcc || a.TrainLoss != b.TrainLoss || a.LR != b.LR {
		t.Errorf("resumed epoch 2 %+v; straight %+v", a, b)
	}
	tr, err := New(context.Background(), smallCNN(t), f.dev, nil, Config{Resume: first.Checkpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	trained := modelWeights(t, tr)
	tr.swapEMA()
	ema := modelWeights(t, tr)
	tr.swapEMA()
	if ok, err := tr.UseEMA(context.Background()); !ok || err != nil {
		t.Fatalf("UseEMA on a checkpoint with an EMA = %v, %v", ok, err)
	}
	if !sameTensors(modelWeights(t, tr), ema) || sameTensors(trained, ema) || len(per) == 0 {
		t.Error("UseEMA did not put the checkpoint's EMA in the weights' place")
	}
}

// TestEMABehindNotServed: an EMA of decay 0.999 without warm-up, after the few steps of a short
// run, scores below the model; the best epoch is chosen by the model's score, the checkpoint of
// it remembers, and UseEMA declines both on the trainer and on a trainer that loads the checkpoint.
func TestEMABehindNotServed(t *testing.T) {
	f := newFixture(t, 128)
	best := filepath.Join(t.TempDir(), "best")
	res, tr := fit(t, f, smallCNN(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Epochs: 2, Seed: 5, EMA: 0.999, KeepBest: best})
	if !(res.EMAAcc < res.TestAcc) {
		t.Fatalf("EMA %v, model %v: the case shows nothing", res.EMAAcc, res.TestAcc)
	}
	if h := res.History[res.BestEpoch-1]; res.BestMetric != h.TestAcc {
		t.Errorf("best metric %v at epoch %d; want the model's %v, not the EMA's %v", res.BestMetric, res.BestEpoch, h.TestAcc, h.EMAAcc)
	}
	if ok, err := tr.UseEMA(context.Background()); ok || err != nil {
		t.Errorf("UseEMA after the run = %v, %v; want false: the EMA scored %v, the model %v", ok, err, res.EMAAcc, res.TestAcc)
	}
	served, err := New(context.Background(), smallCNN(t), f.dev, nil, Config{Resume: best})
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	last, ok := served.LastEpoch()
	if ok2, err := served.UseEMA(context.Background()); ok2 || err != nil || !ok || last.Epoch != res.BestEpoch {
		t.Errorf("UseEMA on the best checkpoint = %v, %v (last epoch %+v); want false, the record of epoch %d", ok2, err, last, res.BestEpoch)
	}
}

// TestPlateauHand: torch's ReduceLROnPlateau worked by hand on a flat metric (mode max, factor
// 0.5, patience 1, cooldown 1): reduce after the second bad epoch, then a cooldown epoch in
// which bad epochs do not count.
func TestPlateauHand(t *testing.T) {
	p := Plateau{Factor: 0.5, Patience: 1, Cooldown: 1, Threshold: 1e-4}
	s := plateauState{LR: 1}
	var got []float64
	for range 6 {
		s.step(p, 0.5, true)
		got = append(got, s.LR)
	}
	if want := []float64{1, 1, 0.5, 0.5, 0.5, 0.25}; !slices.Equal(got, want) {
		t.Errorf("learning rates %v; want %v", got, want)
	}
}

// TestPlateauTorch: ReduceLROnPlateau's learning rates match torch's own over metric sequences
// with rises, falls, flat runs and moves below the threshold, in both modes, for several settings
// (factor, patience, threshold, cooldown, min_lr).
func TestPlateauTorch(t *testing.T) {
	py := pyoracle.Python(t, "torch")
	type tcase struct {
		Mode      string    `json:"mode"`
		Factor    float64   `json:"factor"`
		Patience  int       `json:"patience"`
		Threshold float64   `json:"threshold"`
		Cooldown  int       `json:"cooldown"`
		MinLR     float64   `json:"min_lr"`
		Metrics   []float64 `json:"metrics"`
	}
	r := rand.New(rand.NewPCG(1, 2))
	var cases []tcase
	for _, mode := range []string{"min", "max"} {
		for _, p := range []Plateau{ReduceLROnPlateau(), {Factor: 0.5, Patience: 0}, {Factor: 0.3, Patience: 2, Threshold: 0.01, Cooldown: 2, MinLR: 0.004}} {
			v := 1.0
			var ms []float64
			for range 80 {
				switch r.IntN(4) {
				case 0: // flat
				case 1:
					v *= 1 + 1e-5*(r.Float64()-0.5) // below the threshold
				default:
					v *= 1 + 0.05*(r.Float64()-0.45)
				}
				ms = append(ms, v)
			}
			cases = append(cases, tcase{mode, p.Factor, p.Patience, p.Threshold, p.Cooldown, p.MinLR, ms})
		}
	}
	script := `
import json, sys, torch
out = []
for c in json.load(sys.stdin):
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=0.1)
    s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode=c["mode"], factor=c["factor"], patience=c["patience"],
        threshold=c["threshold"], threshold_mode="rel", cooldown=c["cooldown"], min_lr=c["min_lr"])
    lrs = []
    for m in c["metrics"]:
        s.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    out.append(lrs)
print(json.dumps(out))
`
	var want [][]float64
	pyoracle.Run(t, py, script, cases, &want)
	reductions := 0
	for i, c := range cases {
		s := plateauState{LR: 0.1}
		p := Plateau{Factor: c.Factor, Patience: c.Patience, Threshold: c.Threshold, Cooldown: c.Cooldown, MinLR: c.MinLR}
		for e, m := range c.Metrics {
			s.step(p, m, c.Mode == "max")
			if s.LR != want[i][e] {
				t.Fatalf("case %d (%+v, mode %s) epoch %d: learning rate %v; torch's %v", i, p, c.Mode, e+1, s.LR, want[i][e])
			}
		}
		if s.LR < 0.1 {
			reductions++
		}
	}
	if reductions < len(cases)/2 {
		t.Errorf("only %d of %d sequences reduced the rate: the cases test little", reductions, len(cases))
	}
}

// TestEarlyStopKeepBest: with a rate too small to change a prediction the metric stays flat:
// ReduceLROnPlateau (patience 1) halves the rate after epoch 3 and early stopping (patience 3)
// ends the run after epoch 4 with a normal return; the best checkpoint is epoch 1's; resuming the
// stopped run returns at once, stopped. With a real rate, KeepBest holds the best epoch.
func TestEarlyStopKeepBest(t *testing.T) {
	f := newFixture(t, 128)
	dir := t.TempDir()
	best, ck := filepath.Join(dir, "best"), filepath.Join(dir, "ck")
	cfg := Config{Epochs: 10, Seed: 5, Plateau: &Plateau{Factor: 0.5, Patience: 1}, EarlyStop: 3, KeepBest: best, Checkpoint: ck}
	_, _, res := stepWeights(t, f.dev, plainMLP(t), f.train, f.test, optim.SGD{LR: 1e-6}, cfg)
	if !res.StoppedEarly || res.StoppedEpoch != 4 || res.Epochs != 4 || res.BestEpoch != 1 {
		t.Fatalf("result: stopped %v after epoch %d, %d epochs, best %d; want stopped after 4, best 1", res.StoppedEarly, res.StoppedEpoch, res.Epochs, res.BestEpoch)
	}
	var lrs []float64
	for _, h := range res.History {
		lrs = append(lrs, h.LR)
	}
	if want := []float64{1e-6, 1e-6, 1e-6, 0.5e-6}; !slices.Equal(lrs, want) {
		t.Errorf("learning rates %v; want %v (%+v)", lrs, want, res.History)
	}
	if c := readCkpt(t, best); c.Epochs != 1 {
		t.Errorf("the best checkpoint holds %d epochs; want 1", c.Epochs)
	}
	again := cfg
	again.Resume = ck
	_, _, res2 := stepWeights(t, f.dev, plainMLP(t), f.train, f.test, optim.SGD{LR: 1e-6}, again)
	if !res2.StoppedEarly || res2.Epochs != 4 || len(res2.History) != 4 {
		t.Errorf("resumed stopped run: stopped %v, %d epochs; want stopped, 4", res2.StoppedEarly, res2.Epochs)
	}

	live := Config{Epochs: 4, Seed: 5, KeepBest: best}
	_, _, res3 := stepWeights(t, f.dev, plainMLP(t), f.train, f.test, optim.SGD{LR: 0.1, Momentum: 0.9}, live)
	c := readCkpt(t, best)
	if c.Epochs != res3.BestEpoch || c.history[c.Epochs-1].TestAcc != res3.BestMetric || res3.StoppedEarly {
		t.Errorf("best checkpoint of epoch %d (accuracy %v); the run's best epoch %d (%v)", c.Epochs, c.history[c.Epochs-1].TestAcc, res3.BestEpoch, res3.BestMetric)
	}
	for _, h := range res3.History {
		if h.TestAcc > res3.BestMetric {
			t.Errorf("epoch %d scored %v, above the best %v", h.Epoch, h.TestAcc, res3.BestMetric)
		}
	}
	if _, err := New(context.Background(), plainMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{EarlyStop: -1}); !errors.Is(err, ErrConfig) {
		t.Errorf("EarlyStop -1: error %v; want ErrConfig", err)
	}
	tr, err := New(context.Background(), plainMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{EarlyStop: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(context.Background(), f.train, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("EarlyStop without evaluation data: error %v; want ErrConfig", err)
	}
}

func readCkpt(t *testing.T, path string) *saved {
	t.Helper()
	c, err := readSaved(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTopKAndPerClass: a hand-made case (ties rank the lower class first), then EvaluateClasses
// against scores computed here from Predict's logits by sorting.
func TestTopKAndPerClass(t *testing.T) {
	p := &Predictions{Classes: 6, Labels: []int32{2, 0, 1, 1}, Logits: []float32{
		0, 1, 5, 2, 3, 4, // label 2: first
		0, 1, 2, 3, 4, 5, // label 0: sixth
		1, 1, 0, 0, 0, 0, // label 1: second (the tie ranks class 0 first)
		0, 3, 1, 1, 1, 1, // label 1: first
	}}
	var tally evalTally
	for i, l := range p.Labels {
		tally.add(i, int(l), p.Class(i) == int(l), p.InTopK(i, int(l), 5), crossEntropy(p.Logits[i*6:(i+1)*6], int(l)))
	}
	ev, err := tally.evaluation(6)
	if err != nil {
		t.Fatal(err)
	}
	// -log softmax by hand: log(sum exp(row)) - row[label] per sample.
	var want float64
	for i, l := range p.Labels {
		var sum float64
		for _, v := range p.Logits[i*6 : (i+1)*6] {
			sum += math.Exp(float64(v))
		}
		want += math.Log(sum) - float64(p.Logits[i*6+int(l)])
	}
	if want /= 4; math.Abs(ev.Loss-want) > 1e-6 {
		t.Errorf("hand case: loss %v; want %v", ev.Loss, want)
	}
	if ev.Acc != 0.5 || ev.Top5 != 0.75 || !slices.Equal(ev.ClassAcc, []float64{0, 0.5, 1, 0, 0, 0}) || !slices.Equal(ev.ClassSamples, []int{1, 2, 1, 0, 0, 0}) {
		t.Errorf("hand case: %+v; want acc 0.5, top-5 0.75, per class [0 0.5 1 0 0 0] of [1 2 1 0 0 0]", ev)
	}
	if !p.InTopK(2, 1, 2) || p.InTopK(2, 1, 1) {
		t.Error("InTopK: label 1 of sample 2 ranks second")
	}

	f := newFixture(t, 128)
	res, tr := fit(t, f, smallCNN(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Seed: 5})
	got, err := tr.EvaluateClasses(context.Background(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := tr.Predict(context.Background(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	var top1, top5, loss float64
	right, count := make([]float64, 10), make([]int, 10)
	for i, l := range pr.Labels {
		row := pr.Logits[i*10 : (i+1)*10]
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v))
		}
		loss += math.Log(sum) - float64(row[l])
		order := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		slices.SortStableFunc(order, func(a, b int) int { return cmpDesc(row[a], row[b]) })
		count[l]++
		if order[0] == int(l) {
			top1++
			right[l]++
		}
		if slices.Contains(order[:5], int(l)) {
			top5++
		}
	}
	n := float64(pr.Len())
	if got.Samples != pr.Len() || got.Acc != top1/n || got.Top5 != top5/n {
		t.Errorf("EvaluateClasses: %d samples, top-1 %v, top-5 %v; by sorting %d, %v, %v", got.Samples, got.Acc, got.Top5, pr.Len(), top1/n, top5/n)
	}
	if math.Abs(got.Loss-loss/n) > 1e-5*loss/n || got.Loss <= 0 {
		t.Errorf("EvaluateClasses: loss %v; from Predict's logits %v", got.Loss, loss/n)
	}
	// Fit reports the last epoch's evaluation: the same weights, the same loss.
	if last := res.History[len(res.History)-1]; res.TestLoss != got.Loss || last.TestLoss != got.Loss {
		t.Errorf("Fit's validation loss %v (history %v); EvaluateClasses after it %v", res.TestLoss, last.TestLoss, got.Loss)
	}
	for c := range right {
		if want := right[c] / float64(count[c]); got.ClassAcc[c] != want || got.ClassSamples[c] != count[c] {
			t.Errorf("class %d: accuracy %v of %d; by sorting %v of %d", c, got.ClassAcc[c], got.ClassSamples[c], want, count[c])
		}
	}
	if got.Top5 <= got.Acc || got.Acc == 1 {
		t.Logf("top-1 %v, top-5 %v: the case tests little", got.Acc, got.Top5)
	}
}

func cmpDesc(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
