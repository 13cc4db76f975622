package main

import (
	"context"
	"fmt"
	"iter"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/profile"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/train"
)

const (
	// maxTraceEvents bounds the recording (about 100 bytes an event).
	maxTraceEvents = 500_000
	// sampleEvery is the period of the counter tracks (busy workers per stage, copy engine).
	sampleEvery = 10 * time.Millisecond
	// parallelStage is the Loader's stage whose workers --workers sets.
	parallelStage = "transform"
)

func runProfile(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("--data SPEC [--size S] [--batch B] [--workers W|auto] [--device D] [--batches N] [--train --model M] [--trace FILE] [--svg FILE] [--json]", true)
	lf.register(fs, 64)
	lf.registerRanks(fs)
	batches := fs.Int("batches", 50, "batches to profile (the loader runs as many epochs as that takes)")
	withTrain := fs.Bool("train", false, "profile the training step too: the trainer consumes the batches")
	model := fs.String("model", "mlp", "model trained with --train: "+strings.Join(train.Models(), ", "))
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

	dev, err := gpu.Open(lf.device)
	if err != nil {
		return err
	}
	defer dev.Close()
	ds, err := loaders.Open(lf.data, "train")
	if err != nil {
		return err
	}
	defer closeDataset(ds)
	traced := &tracedDataset{Dataset: ds}

	p := &profiler{e: e, n: *batches, traced: traced}
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
		m, err := train.NewModel(*model, train.Shape{C: shape.C, H: shape.H, W: shape.W}, classes)
		if err != nil {
			return err
		}
		opt, sched := train.Recipe(*model)
		tr, err = train.New(m, dev, opt, train.Config{Epochs: 1, Schedule: sched, Seed: lf.seed})
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
	ld, err := p.loader(&lf, traced, dev)
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
		e.printf("trace: %s (%d spans, %d tracks); open it in https://ui.perfetto.dev or chrome://tracing\n", *tracePath, len(tl.Spans), len(tl.Tracks)+len(tl.Counters))
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
	traced   *tracedDataset
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
	wait     time.Duration
	batches  int64
	samples  int64
	bar      *progress.Bar
}

var _ pipeline.Tracer = (*profiler)(nil)

// loader opens the profiled Loader: lf.loader's configuration, shuffled, delivering before the
// work of p.stream, with the profiler as its Tracer. --workers auto is sized first, untraced.
func (p *profiler) loader(lf *loaderFlags, ds loaders.Dataset, dev gpu.Device) (*loaders.Loader, error) {
	cfg, err := lf.config(ds, "train", true, dev, p.stream)
	if err != nil {
		return nil, err
	}
	cfg.Tracer = p
	return loaders.New(ds, cfg)
}

// Span is the Loader's Tracer: every pipeline stage's items on lanes "STAGE WORKER" (one lane per
// transform worker), and every host-to-device copy on the lane "copy stream", beside the compute
// stream. The Loader calls it only while run records (p.rec is set before the first epoch).
func (p *profiler) Span(stage string, worker int, index int64, start, end time.Time) {
	if stage == loaders.CopyStage {
		p.rec.Add("copy stream", stage, "copy batch "+strconv.FormatInt(p.copyBase+index, 10), start, end)
		return
	}
	p.rec.Span(stage, worker, index, start, end)
}

func (p *profiler) run(ctx context.Context, tr *train.Trainer, data train.Data) error {
	p.bar = progress.New(p.e.stderr, p.e.progressMode(), "profile", "batch", int64(p.n))
	defer p.bar.Finish()
	p.start = time.Now()
	p.rec = profile.NewRecorder(p.start, maxTraceEvents)
	p.traced.rec = p.rec // no epoch runs now: the loader's workers start after this write (so for Span)

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.sample(sctx) })
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
			p.wait += got.Sub(from)
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

// sample measures, every sampleEvery, how many workers of each stage were busy and how busy the
// copy engine was since the previous sample, and records the series when ctx ends.
func (p *profiler) sample(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	type mark struct{ busy, elapsed time.Duration }
	prev := map[string]mark{}
	series := map[string]*counter{}
	var order []string
	add := func(name string, at time.Time, dt, busy, ceiling float64) {
		c := series[name]
		if c == nil {
			c = &counter{ceiling: ceiling}
			series[name] = c
			order = append(order, name)
		}
		c.at = append(c.at, at)
		c.dt = append(c.dt, dt)
		c.busy = append(c.busy, max(0, busy))
	}
	var prevCopy time.Duration
	last := p.start
	for {
		select {
		case <-ctx.Done():
			for _, name := range order {
				series[name].record(p.rec, name)
			}
			return
		case <-tick.C:
			// The tick's own time can be stale on a busy machine: take the time of the reading.
			st, now := p.ld.Stats(), time.Now()
			dt := float64(now.Sub(last))
			last = now
			if dt <= 0 {
				continue
			}
			for _, s := range st.Stages {
				if s.Kind == "source" {
					continue // its busy time is mostly waiting for free slots
				}
				m := prev[s.Name]
				if s.Elapsed < m.elapsed { // a new epoch's pipeline
					m = mark{}
				}
				prev[s.Name] = mark{s.Busy, s.Elapsed}
				add("busy workers: "+s.Name, now, dt, float64(s.Busy-m.busy), float64(s.Workers))
			}
			add("copy engine busy", now, dt, float64(st.CopyTime-prevCopy), 1)
			prevCopy = st.CopyTime
		}
	}
}

// counter is one sampled series: at each time, the busy time (summed over workers) reported in the
// dt before it. A stage's busy time is reported when an item ends, so a sample can hold work done
// during earlier ones: record moves what exceeds the ceiling (the stage's workers) times dt back to
// the samples before, where that work happened, keeping the total, and records busy/dt.
type counter struct {
	at       []time.Time
	dt, busy []float64 // nanoseconds
	ceiling  float64
}

func (c *counter) record(rec *profile.Recorder, name string) {
	for i := len(c.busy) - 1; i > 0; i-- {
		if extra := c.busy[i] - c.ceiling*c.dt[i]; extra > 0 {
			c.busy[i-1] += extra
			c.busy[i] -= extra
		}
	}
	for i, at := range c.at {
		rec.Count(name, at, c.busy[i]/c.dt[i])
	}
}

func (p *profiler) report(lf loaderFlags, dev gpu.Device) *profile.Report {
	st := p.ld.Stats()
	stats := p.acc.Stats()
	r := &profile.Report{
		Device: dev.Info().String(), Cores: runtime.GOMAXPROCS(0), Batch: lf.batch,
		Batches: p.batches, Samples: p.samples, Seconds: p.elapsed.Seconds(),
		Stages:   append(profile.FromPipeline(stats), profile.Consumer(p.consumer, p.batches, p.wait, p.elapsed)),
		Copy:     profile.Copy{Bytes: st.CopyBytes, Seconds: st.CopyTime.Seconds(), GBps: st.CopyGBps()},
		Pinned:   st.Pool.Pinned,
		Parallel: parallelStage,
	}
	if p.elapsed > 0 {
		r.Stall = float64(p.wait) / float64(p.elapsed)
		r.Copy.Busy = min(1, float64(st.CopyTime)/float64(p.elapsed))
	}
	for _, s := range stats {
		if s.Name == parallelStage {
			r.Workers = s.Workers
			if s.Busy > 0 {
				r.ReadShare = min(1, float64(p.traced.busy())/float64(s.Busy))
			}
		}
	}
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
				p.wait += got.Sub(from)
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

// tracedDataset times every Sample call (the read part of the transform stage) on lanes "read N":
// a worker is in at most one call, so the lanes in use never exceed the workers.
type tracedDataset struct {
	loaders.Dataset
	rec *profile.Recorder // nil: not recording (set before an epoch starts)

	mu    sync.Mutex
	lanes []bool
	total time.Duration
}

// Info keeps the dataset's own description (name, classes, shape, normalization).
func (d *tracedDataset) Info() loaders.Info { return loaders.Describe(d.Dataset) }

// ShardStarts passes the dataset's shards on, so that ranks split them as they do in stoke bench.
func (d *tracedDataset) ShardStarts() []int {
	if s, ok := d.Dataset.(loaders.Sharded); ok {
		return s.ShardStarts()
	}
	return nil
}

func (d *tracedDataset) Sample(ctx context.Context, i int) (loaders.Sample, error) {
	if d.rec == nil {
		return d.Dataset.Sample(ctx, i)
	}
	lane := d.take()
	start := time.Now()
	s, err := d.Dataset.Sample(ctx, i)
	end := time.Now()
	d.rec.Add("read "+strconv.Itoa(lane), "read", "sample "+strconv.Itoa(i), start, end)
	d.mu.Lock()
	d.lanes[lane] = false
	d.total += end.Sub(start)
	d.mu.Unlock()
	return s, err
}

func (d *tracedDataset) take() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, used := range d.lanes {
		if !used {
			d.lanes[i] = true
			return i
		}
	}
	d.lanes = append(d.lanes, true)
	return len(d.lanes) - 1
}

// busy is the time spent in Sample while recording.
func (d *tracedDataset) busy() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

var _ loaders.Describer = (*tracedDataset)(nil)

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
