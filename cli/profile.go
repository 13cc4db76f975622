package cli

import (
	"context"
	"fmt"
	"iter"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/profile"
	"github.com/stoke-ml/stoke/train"
)

const (
	// maxTraceEvents bounds the recording (about 100 bytes an event).
	maxTraceEvents = 500_000
	// sampleEvery is the period of the counter tracks (busy workers per stage, copy engine).
	sampleEvery = 10 * time.Millisecond
)

func runProfile(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("--data SPEC [--size S] [--batch B] [--workers W|auto] [--device D] [--augment P] [--random-erasing P] [--mixup A] [--cutmix A] "+
		"[--batches N] [--train --model M] [--trace FILE] [--svg FILE] [--json]", true)
	lf.register(fs, 64)
	lf.augment = &augmentFlags{} // the training loader's augmentation, as stoke train's
	lf.augment.register(fs)
	lf.registerRanks(fs)
	lf.registerDecode(fs, "train")
	batches := fs.Int("batches", 50, "batches to profile (the loader runs as many epochs as that takes)")
	withTrain := fs.Bool("train", false, "profile the training step too: the trainer consumes the batches")
	model := fs.String("model", "mlp", "model trained with --train: "+strings.Join(models.Names(), ", "))
	tracePath := fs.String("trace", "", "write the timeline as Chrome trace-event JSON (Perfetto, chrome://tracing)")
	svgPath := fs.String("svg", "", "write the timeline as an SVG picture")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	if *batches < 1 {
		return fmt.Errorf("%w: --batches %d; want >= 1", errUsage, *batches)
	}
	if lf.augment.policy == "recipe" {
		lf.augment.useRecipe(fs, models.RecipeFor(*model))
	}
	if _, err := lf.augment.transforms(nil); err != nil {
		return err
	}
	if _, err := lf.augment.mix(); err != nil {
		return err
	}

	dev, err := gpu.Open(lf.device)
	if err != nil {
		return err
	}
	defer dev.Close()
	ds, err := openDataset(ctx, lf.opener, lf.data, "train")
	if err != nil {
		return err
	}
	defer closeDataset(ds)

	p := &profiler{e: e, n: *batches}
	var data train.Data
	var tr *train.Trainer
	if *withTrain {
		// The model needs the loader's output shape: a first loader tells it (and sizes --workers
		// auto), then the trainer's stream is given to the loader that is profiled.
		probe, err := lf.loader(ds, "train", true, dev, nil)
		if err != nil {
			return err
		}
		shape, classes := probe.Shape(), probe.Info().NumClasses
		probe.Close()
		m, err := train.NewModel(*model, shape, classes)
		if err != nil {
			return err
		}
		r := models.RecipeFor(*model)
		opt, err := optim.ForRecipe(r, lf.batch)
		if err != nil {
			return err
		}
		tr, err = train.New(ctx, m, dev, opt, train.Config{Epochs: 1, Schedule: optim.Cosine(r.WarmupEpochs), LabelSmoothing: r.LabelSmoothing, Seed: lf.seed})
		if err != nil {
			return err
		}
		defer tr.Close()
		p.stream, p.consumer = tr.Stream(), "train step"
	} else {
		if p.stream, err = dev.NewStream(); err != nil {
			return err
		}
		defer p.stream.Close()
		p.consumer = "step"
	}
	ld, err := p.loader(&lf, ds, dev)
	if err != nil {
		return err
	}
	defer ld.Close()
	p.ld = ld
	if tr == nil {
		ops, err := kernels.For(dev)
		if err != nil {
			return err
		}
		p.norm = &normalizer{dev: dev, ops: ops, stream: p.stream}
		defer p.norm.free()
		p.norm.mean, p.norm.std = ld.Normalization()
	} else {
		data = &profiledData{p: p, inner: train.FromLoader(ld)}
	}

	if err := p.run(ctx, tr, data); err != nil {
		return err
	}
	r := p.report(lf, dev)
	if !e.quiet {
		if err := r.WriteTable(e.stdout); err != nil {
			return err
		}
	}
	tl := p.rec.Timeline()
	if *tracePath != "" {
		if err := writeFile(*tracePath, func(f *os.File) error { return profile.WriteTrace(f, tl) }); err != nil {
			return err
		}
		e.printf("trace: %s (%d spans, %d tracks); open it in https://ui.perfetto.dev or chrome://tracing\n", *tracePath, len(tl.Spans),
			len(tl.Tracks)+len(tl.Counters))
	}
	if *svgPath != "" {
		if err := writeFile(*svgPath, func(f *os.File) error { return profile.WriteSVG(f, tl) }); err != nil {
			return err
		}
		e.printf("timeline: %s\n", *svgPath)
	}
	return e.emit(r)
}

// profiler runs the loader (and the trainer) for n batches and records what happened.
type profiler struct {
	e        *env
	n        int
	ld       *loaders.Loader
	stream   gpu.Stream
	norm     *normalizer // without --train: the consumer normalizes each batch, as every consumer does first
	consumer string

	rec *profile.Recorder
	// copyBase is the consumer's number of the running epoch's first batch: the copy lane names
	// each copy with the number the consumer's lanes give its batch.
	copyBase int64
	acc      profile.Accumulator
	start    time.Time
	elapsed  time.Duration
	batches  int64
	samples  int64
	bar      *progress.Bar
}

var _ pipeline.Tracer = (*profiler)(nil)

// loader opens the profiled Loader: lf.loader's configuration, shuffled, delivering before the
// work of p.stream, with the profiler as its Tracer. --workers auto is sized first, untraced.
func (p *profiler) loader(lf *loaderFlags, ds loaders.Dataset, dev gpu.Device) (*loaders.Loader, error) {
	cfg := lf.config(ds, "train", true, dev, p.stream)
	cfg.Tracer = p
	return lf.newLoader(ds, cfg)
}

// Span is the Loader's Tracer: every pipeline stage's items on lanes "STAGE WORKER" (one lane per
// transform worker), the reads within each transform worker's items on lanes "read WORKER", and
// every host-to-device copy on the lane "copy stream", beside the compute stream. The Loader
// calls it only while run records (p.rec is set before the first epoch).
func (p *profiler) Span(stage string, worker int, index int64, start, end time.Time) {
	switch stage {
	case loaders.CopyStage:
		p.rec.Add("copy stream", stage, "copy batch "+strconv.FormatInt(p.copyBase+index, 10), start, end)
	case loaders.ReadStage:
		p.rec.Add("read "+strconv.Itoa(worker), stage, "sample "+strconv.FormatInt(index, 10), start, end)
	default:
		p.rec.Span(stage, worker, index, start, end)
	}
}

func (p *profiler) run(ctx context.Context, tr *train.Trainer, data train.Data) error {
	p.bar = progress.New(p.e.stderr, p.e.progressMode(), "profile", "batch", int64(p.n))
	defer p.bar.Finish()
	p.start = time.Now()
	p.rec = profile.NewRecorder(p.start, maxTraceEvents) // before the first epoch starts the Loader's goroutines, which call Span

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { profile.SampleBusy(sctx, p.rec, p.ld.Stats, sampleEvery) })
	var err error
	if tr != nil {
		_, err = tr.Fit(ctx, data, nil)
	} else {
		err = p.consume(ctx)
	}
	p.elapsed = time.Since(p.start)
	stop()
	wg.Wait()
	return err
}

// consume is the consumer without --train: it normalizes every batch on the stream and waits for
// it, so that the step's time is the device's.
func (p *profiler) consume(ctx context.Context) error {
	for epoch := 0; int(p.batches) < p.n; epoch++ {
		p.copyBase = p.batches // before the epoch's goroutines start, which read it
		err := func() error {
			defer func() { p.acc.Add(p.ld.Stats().Stages) }()
			for b, err := range p.batchesOf(ctx, epoch) {
				if err != nil {
					return err
				}
				got := time.Now()
				first, err := p.stream.Record() // completes once the copy the loader made the stream wait for is done
				if err == nil {
					err = p.norm.apply(b)
				}
				var last gpu.Event
				if err == nil {
					last, err = p.stream.Record()
				}
				if err == nil {
					err = p.stream.Synchronize(ctx)
				}
				end := time.Now()
				b.Release()
				if err != nil {
					return err
				}
				ready := got
				if d, err := last.Elapsed(first); err == nil && end.Add(-d).After(got) {
					ready = end.Add(-d)
				}
				seq := strconv.FormatInt(p.batches-1, 10)
				if ready.After(got) {
					p.rec.Add("compute stream", "wait for copy", "wait for batch "+seq, got, ready)
				}
				p.rec.Add("compute stream", "normalize", "normalize batch "+seq, ready, end)
				p.rec.Add("consumer", p.consumer, p.consumer+" "+seq, got, end)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// batchesOf yields the loader's batches of epoch until n have been yielded in all, recording the
// consumer's waits and counting.
func (p *profiler) batchesOf(ctx context.Context, epoch int) iter.Seq2[*loaders.Batch, error] {
	return func(yield func(*loaders.Batch, error) bool) {
		from := time.Now()
		for b, err := range p.ld.Epoch(ctx, epoch) {
			if err != nil {
				yield(nil, err)
				return
			}
			got := time.Now()
			p.rec.Add("consumer", "wait for data", "wait for batch "+strconv.FormatInt(p.batches, 10), from, got)
			p.batches++
			p.samples += int64(b.N)
			p.bar.Add(1)
			if !yield(b, nil) || int(p.batches) == p.n {
				return
			}
			from = time.Now()
		}
	}
}

// report is the profile package's report of the Loader's statistics (the consumer's waits, the
// copies, the reads), with the stages summed over the epochs run, for the batches the profiler
// took in its run's time.
func (p *profiler) report(lf loaderFlags, dev gpu.Device) *profile.Report {
	st := p.ld.Stats()
	st.Stages = p.acc.Stats()
	r := profile.FromLoader(st, p.consumer)
	r.Device, r.Batch = dev.Info().String(), lf.batch
	r.Batches, r.Samples, r.Seconds = p.batches, p.samples, p.elapsed.Seconds()
	r.Flags = true // the advice names stoke's flags
	r.Conclude()
	return r
}

// profiledData is the trainer's data under --train: the loader's batches, n in all across epochs,
// with the consumer's waits and steps recorded.
type profiledData struct {
	p     *profiler
	inner train.Data
}

func (d *profiledData) Steps() int                           { return d.p.n }
func (d *profiledData) Normalization() (mean, std []float32) { return d.inner.Normalization() }

// Batches ignores the trainer's epoch (it runs one): the n batches span as many loader epochs as
// they need.
func (d *profiledData) Batches(ctx context.Context, _ int) iter.Seq2[train.Batch, error] {
	return func(yield func(train.Batch, error) bool) {
		p := d.p
		for epoch := 0; int(p.batches) < p.n; epoch++ {
			stopped := false
			p.copyBase = p.batches // before the epoch's goroutines start, which read it
			from := time.Now()
			for b, err := range d.inner.Batches(ctx, epoch) {
				if err != nil {
					p.acc.Add(p.ld.Stats().Stages)
					yield(b, err)
					return
				}
				got := time.Now()
				seq := strconv.FormatInt(p.batches, 10)
				p.rec.Add("consumer", "wait for data", "wait for batch "+seq, from, got)
				p.batches++
				p.samples += int64(b.N)
				p.bar.Add(1)
				ok := yield(b, nil)
				from = time.Now()
				p.rec.Add("consumer", p.consumer, p.consumer+" "+seq, got, from)
				if !ok || int(p.batches) == p.n {
					stopped = !ok
					break
				}
			}
			p.acc.Add(p.ld.Stats().Stages)
			if stopped {
				return
			}
		}
	}
}

// writeFile creates path, lets write fill it, and closes it, reporting the first error with the
// path.
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
