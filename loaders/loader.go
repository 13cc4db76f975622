package loaders

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/bytesize"
	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/transforms"
)

// Loader errors callers check with errors.Is.
var (
	// ErrTooManySkipped: under the Skip policy, an epoch skipped more than Config.MaxSkipped samples.
	ErrTooManySkipped = errors.New("too many bad samples skipped")
	// ErrBusy: Epoch was called while another epoch of the same Loader was being iterated, or Close
	// while one was.
	ErrBusy = errors.New("loader busy")
	// ErrClosed: the Loader was closed, or its host slot pool or feeder was (pinned.ErrClosed,
	// gpu.ErrClosed): an error of the Loader that wraps either of those matches ErrClosed too, so
	// code holding a Loader checks this one sentinel.
	ErrClosed = errors.New("loader closed")
	// ErrMemory: the Loader's host slots and device buffers would exceed Config.MemoryBudget.
	ErrMemory = errors.New("over the memory budget")
	// ErrConfig: a Config, sampler, shard writer or rank setting is invalid (a negative size,
	// contradictory options, a transform that does not fix the output size, bad weights).
	ErrConfig = errors.New("bad configuration")
	// ErrStateMismatch: Restore got a State from another dataset, seed or sharding, or a position
	// past the end of the epoch or, for a stream, inconsistent with the stream.
	ErrStateMismatch = errors.New("loader state does not match")
)

// closedErr makes an error that says the pool or the feeder was closed (pinned.ErrClosed,
// gpu.ErrClosed) match ErrClosed as well, with its message unchanged.
func closedErr(err error) error {
	if err == nil || errors.Is(err, ErrClosed) || !errors.Is(err, pinned.ErrClosed) && !errors.Is(err, gpu.ErrClosed) {
		return err
	}
	return &closedError{err}
}

// closedError is an error from below the Loader that matches ErrClosed.
type closedError struct{ err error }

func (e *closedError) Error() string   { return e.err.Error() }
func (e *closedError) Unwrap() []error { return []error{e.err, ErrClosed} }

// ErrorPolicy says what the Loader does with a sample that cannot be read, decoded or labelled.
type ErrorPolicy int

const (
	// FailFast (the zero value) ends the epoch with the first bad sample's error.
	FailFast ErrorPolicy = iota
	// Skip leaves bad samples out of their batch (which is then shorter), counts them, and fails
	// only once an epoch skipped more than Config.MaxSkipped. A sample that the store failed to
	// deliver (ErrStorage) is not a bad sample: it fails the epoch.
	Skip
)

func (p ErrorPolicy) String() string {
	switch p {
	case FailFast:
		return "fail"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("ErrorPolicy(%d)", int(p))
}

// ParseErrorPolicy parses "fail" (or "") and "skip", the names String gives.
func ParseErrorPolicy(s string) (ErrorPolicy, error) {
	switch s {
	case "fail", "":
		return FailFast, nil
	case "skip":
		return Skip, nil
	}
	return FailFast, fmt.Errorf("loaders: error policy %q, want fail or skip: %w", s, ErrConfig)
}

// Defaults of Config.
const (
	DefaultBatch    = 64
	DefaultPrefetch = 2
)

// Config configures a Loader. The zero value of every field selects its default.
type Config struct {
	// Batch is the number of samples per batch (default DefaultBatch).
	Batch int
	// Workers is the number of goroutines that read, decode and augment samples (default
	// runtime.GOMAXPROCS(0); AutoWorkers sizes it from a short measurement when the Loader
	// opens). The batches do not depend on it.
	Workers int
	// Prefetch is how many batches may wait, ready, ahead of the consumer, both in pinned host
	// slots and on the device (default DefaultPrefetch). Memory is bounded by about
	// 2 x (Prefetch + 2) batches whatever the speed of either side.
	Prefetch int
	// Shuffle visits the samples in an order that depends on (Seed, epoch) only: a permutation of
	// the dataset, or for a stream loader its parts in a permuted order through a shuffle buffer.
	Shuffle bool
	// Sampler chooses each epoch's indices over all ranks (see Sampler); nil means Sequential, or
	// Shuffled with Shuffle, which must then be false. A stream loader takes none.
	Sampler Sampler
	// ShuffleBuffer is the number of samples a stream loader's shuffle buffer holds (default
	// DefaultShuffleBuffer; only with Shuffle): each sample it yields is drawn, by (Seed, epoch,
	// position), from the buffer, which the stream then refills. Larger mixes better and holds
	// more memory.
	ShuffleBuffer int
	// DropLast leaves out the last batch of an epoch when it is short.
	DropLast bool
	// Seed drives the order (with Shuffle) and every sample's augmentation randomness, which
	// depends on (Seed, epoch, sample index) only.
	Seed uint64
	// Transform turns each sample into uint8 CHW pixels of one fixed shape. nil copies raw pixels
	// unchanged, which needs a dataset whose samples all have the same shape.
	Transform *transforms.Chain
	// Device receives the batches (default: a CPU device opened and closed by the Loader).
	Device gpu.Device
	// Stream is the consumer's compute stream. When set, a batch is yielded as soon as its copy is
	// enqueued, with Stream made to wait for the copy, and its device buffers are reused only after
	// work Stream had queued when Release was called. When nil, a batch is yielded once its copy has
	// completed, and its buffers are reused as soon as it is released.
	Stream gpu.Stream
	// OnError is what to do with a bad sample (default FailFast).
	OnError ErrorPolicy
	// MaxSkipped bounds the samples one epoch may skip under Skip before it fails with
	// ErrTooManySkipped; 0 means no bound.
	MaxSkipped int
	// Rank and WorldSize split every epoch between data-parallel processes, one Loader per rank
	// (WorldSize 0 means 1; EnvRank reads them from what torchrun sets). Every rank yields the same
	// number of batches, the ranks' parts are disjoint, and together they cover the epoch once
	// plus a stated padding:
	//   - a Sharded dataset (datasets.Shards) without a Sampler is split by whole shards, each rank reading
	//     only its own files, when the shards balance: each rank is padded to the largest rank's
	//     count by repeating its own first samples, and that padding may total at most one
	//     average shard;
	//   - otherwise the sampler's order is split sample by sample like PyTorch's
	//     DistributedSampler: padded by wrapping around to a multiple of WorldSize (fewer than
	//     WorldSize repeated samples), rank r taking positions r, r+WorldSize, ...;
	//   - a stream loader over a SizedSource whose parts balance is split by whole parts the same
	//     way, each rank reading its parts only (and its first ones again for the padding);
	//   - any other stream loader's ranks all read the stream and keep every WorldSize-th sample,
	//     padded like DistributedSampler (the ranks' shares are known only at the stream's end).
	Rank, WorldSize int
	// Target writes each sample's target into Batch.Labels (default Class(NumClasses): int32 class
	// ids); Vector and MultiHot give float targets.
	Target Target
	// Collate, when set, is called once per batch, in order, on the batch in its host slot after
	// its samples are in and before it is copied to the device: it may rewrite the images and
	// targets in place (mixup, label smoothing). It runs on the Loader's copy stage, one batch at a
	// time; an error ends the epoch.
	Collate func(*HostBatch) error
	// Mix, when it sets an alpha, is batch-level MixUp and CutMix (transforms.Mix): each batch is
	// mixed in its host slot, before Collate and the copy, with draws that depend on (Seed,
	// Mix.Seed, Rank, epoch, the batch's Seq) only, and Batch.Mix says what was drawn, so that the
	// loss can mix the class ids into soft targets (train.Trainer does). Each rank of a
	// data-parallel run draws its own lambdas and boxes, as each process of a torch DDP run does
	// (the ranks share Seed); rank 0, a single process's, draws what it would alone. It takes
	// class-id targets (the default Target). Leave it zero on a loader that evaluates.
	Mix transforms.Mix
	// Allocator provides the host slots. nil means pinned.Locked() (which falls back to ordinary
	// memory, reported in Stats, when the system refuses to lock it), registered with the device
	// when the device can register host memory (CUDA), so that copies from it are DMA transfers.
	Allocator pinned.Allocator
	// MemoryBudget bounds the bytes of host slots and device buffers the Loader allocates (slots
	// x batch x sample bytes, host and device): New refuses a configuration over it with
	// ErrMemory before allocating anything. 0 means DefaultMemoryBudget(); negative means no bound.
	MemoryBudget int64
	// Tracer, when set, receives a span for every item the pipeline's stages process (stage
	// TransformStage: one per sample, worker 0 to Workers-1, index the sample's position in the
	// epoch's run; also SamplerStage and FeedStage, one per sample and per batch; CollateStage
	// reports none), one per sample for the part of its transform span spent reading it (stage
	// ReadStage, the same worker, index the dataset index), and one per host-to-device copy
	// (stage CopyStage, worker 0, index the batch's Seq), which lasts the copy's device time,
	// measured between the feeder's events, and ends when the feeder saw the copy complete. nil
	// traces nothing. It is called concurrently from the Loader's goroutines and must be fast.
	Tracer pipeline.Tracer
}

// DefaultMemoryBudget is the MemoryBudget of a Config that sets none: a quarter of the memory this
// process may use (pinned.SystemMemory), or 8 GiB where that is unknown.
func DefaultMemoryBudget() int64 {
	if m := pinned.SystemMemory(); m > 0 {
		return m / 4
	}
	return 8 << 30
}

// Validate reports whether New and NewStream accept c. It only checks: it changes nothing (the
// zero value of a field selects its default, which WithDefaults fills in).
func (c Config) Validate() error {
	if c.Batch < 0 || (c.Workers < 0 && c.Workers != AutoWorkers) || c.Prefetch < 0 || c.MaxSkipped < 0 || c.ShuffleBuffer < 0 {
		return fmt.Errorf("loaders: config: negative batch %d, workers %d, prefetch %d, max skipped %d or shuffle buffer %d: %w", c.Batch, c.Workers, c.Prefetch,
			c.MaxSkipped, c.ShuffleBuffer, ErrConfig)
	}
	if c.Sampler != nil && c.Shuffle {
		return fmt.Errorf("loaders: config: Shuffle with a Sampler: the sampler decides the order: %w", ErrConfig)
	}
	if c.ShuffleBuffer > 0 && !c.Shuffle {
		return fmt.Errorf("loaders: config: a shuffle buffer of %d without Shuffle: %w", c.ShuffleBuffer, ErrConfig)
	}
	if c.Target != nil && c.Target.Size() < 1 {
		return fmt.Errorf("loaders: config: target of %d bytes: %w", c.Target.Size(), ErrConfig)
	}
	if c.OnError != FailFast && c.OnError != Skip {
		return fmt.Errorf("loaders: config: %v: %w", c.OnError, ErrConfig)
	}
	if err := c.Mix.Validate(); err != nil {
		return fmt.Errorf("loaders: config: %w: %w", err, ErrConfig)
	}
	if _, class := c.Target.(class); c.Target != nil && !class && c.Mix.Enabled() {
		return fmt.Errorf("loaders: config: Mix with %T targets: MixUp and CutMix mix class ids (the default Target): %w", c.Target, ErrConfig)
	}
	if err := checkRank(c.Rank, c.WorldSize); err != nil {
		return err
	}
	return nil
}

// WithDefaults returns c with the default of each zero field filled in, as New and NewStream use
// it: Batch DefaultBatch, Workers runtime.GOMAXPROCS(0) (AutoWorkers stays: New sizes it),
// Prefetch DefaultPrefetch, MemoryBudget DefaultMemoryBudget(). It does not validate c.
func (c Config) WithDefaults() Config {
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Prefetch == 0 {
		c.Prefetch = DefaultPrefetch
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget()
	}
	return c
}

// footprint is what a Loader allocates up front, in bytes.
type footprint struct {
	// Host is the pinned slots: Slots of SlotBytes each (a batch of images and its labels).
	Host, SlotBytes int64
	Slots           int
	// Device is the device buffer sets: Sets of SlotBytes each.
	Device int64
	Sets   int
}

// total is Host + Device.
func (f footprint) total() int64 { return f.Host + f.Device }

// footprintOf computes the allocation for batches of c.Batch images of sample bytes and targets of
// target bytes each, without overflow (sample and batch come from headers and flags).
func footprintOf(c Config, sample, target int64) (footprint, error) {
	const huge = 1 << 50
	if sample <= 0 || sample+target > huge/int64(c.Batch) || c.Prefetch > 1<<20 {
		return footprint{}, fmt.Errorf("loaders: batches of %d images of %d bytes, prefetch %d: %w", c.Batch, sample, c.Prefetch, ErrMemory)
	}
	slot := int64(c.Batch) * (sample + target)
	f := footprint{SlotBytes: slot, Slots: pinned.Config{Prefetch: c.Prefetch}.Slots(), Sets: c.Prefetch + 2}
	f.Host, f.Device = int64(f.Slots)*slot, int64(f.Sets)*slot
	return f, nil
}

// checkBudget refuses a footprint over the budget with an error that says what to change.
func checkBudget(name string, c Config, shape transforms.Shape) error {
	f, err := footprintOf(c, int64(shape.C)*int64(shape.H)*int64(shape.W), int64(c.Target.Size()))
	if err != nil {
		return err
	}
	if deviceDecodes(c) {
		// Each slot's table of samples; each buffer set's images besides the records, and the
		// table; the decode stream's scratch.
		table := 8 * int64(c.Batch)
		f.Host += int64(f.Slots) * table
		f.Device += int64(f.Sets)*(int64(c.Batch)*int64(shape.Len())+table) + int64(c.Batch)*int64(deviceScratch(shape))
	}
	if c.MemoryBudget > 0 && f.total() > c.MemoryBudget {
		return fmt.Errorf("loaders: %s: batches of %d images of %v need %s (%d host slots and %d device buffer sets of %s), over the memory budget of %s "+
			"(Config.MemoryBudget, stoke --memory); lower the batch size, the image size or the prefetch: %w",
			name, c.Batch, shape, bytesize.Format(f.total()), f.Slots, f.Sets, bytesize.Format(f.SlotBytes), bytesize.Format(c.MemoryBudget), ErrMemory)
	}
	return nil
}

// State is a Loader's position: the next batch it yields is batch Batch of epoch Epoch. The other
// fields identify the data and order the position belongs to.
type State struct {
	Epoch, Batch    int
	Seed            uint64
	Len             int // dataset length; for a stream, a SizedSource's (0: unknown)
	Rank, WorldSize int
	BatchSize       int
	Shuffle         bool
	DropLast        bool
	ShuffleBuffer   int // a stream loader's
	// Read and Buffer place a stream loader within its epoch: the first Read samples of the
	// epoch's stream have been read, and Buffer holds the stream positions of the samples in the
	// shuffle buffer, slot by slot. Both are zero for a dataset loader.
	Read   int
	Buffer []int
}

// sameRun reports whether s and t belong to the same data, order and sharding.
func (s State) sameRun(t State) bool {
	return s.Seed == t.Seed && s.Len == t.Len && s.Rank == t.Rank && s.WorldSize == t.WorldSize &&
		s.BatchSize == t.BatchSize && s.Shuffle == t.Shuffle && s.DropLast == t.DropLast && s.ShuffleBuffer == t.ShuffleBuffer
}

// Batch is one batch on the device. Samples that a Skip policy left out are not in it, so N may be
// less than the configured batch size.
//
// # Ownership
//
// The device buffers belong to the Loader; the consumer uses them until it calls Release, which
// must be called exactly once (later calls do nothing).
type Batch struct {
	// Images holds N uint8 images of Shape, CHW, one after the other, from offset 0; the buffer may
	// be longer than N*Shape.Len().
	Images gpu.Buffer
	// Labels holds the N targets from offset 0: with the default Target (Class), little-endian
	// int32 class ids; otherwise Config.Target.Size() bytes per sample. It may be longer.
	Labels gpu.Buffer
	N      int
	Shape  transforms.Shape
	// Indices are the dataset indices of the N samples; for a stream loader, their positions in
	// the epoch's stream.
	Indices []int
	// Epoch and Seq place the batch in the loader's order (Seq counts the epoch's batches,
	// including any that the Skip policy left empty).
	Epoch, Seq int
	// Mix is what Config.Mix did to the batch (Mixed false: nothing).
	Mix transforms.MixParams
	// Ready completes when the batch's copies to the device have completed.
	Ready gpu.Event

	l      *Loader
	dev    *gpu.DeviceBatch
	once   sync.Once
	read   int   // a stream reader's position after the batch (State.Read)
	buffer []int // and its shuffle buffer (State.Buffer)
}

// Release hands the batch's device buffers back to the Loader. With Config.Stream set, they are
// reused only after the work enqueued on Stream so far.
func (b *Batch) Release() {
	b.once.Do(func() {
		b.l.mu.Lock()
		b.l.held--
		b.l.mu.Unlock()
		// A second release is ruled out by once; freeing the buffers of a batch released after
		// Close can fail only on a closed device, which nothing here could act on.
		_ = b.dev.Release()
	})
}

// Loader turns a Dataset (New) or a StreamSource (NewStream) into batches on a device: a sampler
// picks the indices (or one goroutine reads the stream through a shuffle buffer), workers read,
// decode and augment each sample straight into its place in a pinned host slot, and each full slot
// is copied to the device on a copy stream while the consumer works on the previous batch.
//
// The batches of an epoch depend on the configuration, the seed and the epoch only, never on the
// number of workers or on timing, and State/Restore resume them mid-epoch exactly.
//
// # Concurrency
//
// One epoch is iterated at a time. Stats, State and Normalization may be called from any goroutine;
// Batch.Release too. Close must not run while an epoch is being iterated.
//
// # Ownership
//
// The Loader owns its slot pool, its feeder (copy stream and device buffers) and, when Config.Device
// was nil, its device; Close releases them. It does not own the dataset or Config.Stream.
type Loader struct {
	ds      Dataset      // nil for a stream loader
	src     StreamSource // nil for a dataset loader
	info    Info
	cfg     Config
	sampler Sampler    // nil for a stream loader
	split   shardSplit // ranks of a dataset split by shards; split.ranks is nil otherwise
	perRank int        // indices per rank per epoch (padding included); 0 for a stream of unknown length
	shape   transforms.Shape
	sample  int // bytes of one output image
	tsize   int // bytes of one target
	labOff  int // offset of the targets in a slot
	offOff  int // offset of a device decode's table of samples (offset, kind) in a slot
	dd      *deviceDecode

	streamLen int // a SizedSource's number of samples (0: unknown)

	dev    gpu.Device
	ownDev bool
	pool   *pinned.Pool
	feeder *gpu.Feeder
	// With Config.Tracer: the batch number of each Feed call not yet reported as copied.
	traceMu sync.Mutex
	feeds   int64
	feedSeq map[int64]int
	workers []workerState // one per transform worker, indexed by pipeline.WorkerIndex
	read    atomic.Int64  // nanoseconds in Dataset.Sample
	cpu     atomic.Int64  // nanoseconds of thread CPU in the transform and copy stages (Stats.HostCPU)

	mu         sync.Mutex
	running    bool
	closed     bool
	held       int // batches yielded and not released
	state      State
	restored   bool // state was set by Restore and applies to the next Epoch(state.Epoch)
	stages     []pipeline.StageStats
	pl         *pipeline.Pipeline // the running epoch's, for live statistics
	epochStart time.Time
	stats      Stats
}

type workerState struct {
	w *transforms.Worker
	r *rng.Sample
}

// New returns a Loader over ds. It fixes the output shape (from the dataset's Info.Shape through
// the transform, or from a transform that ends in a fixed-size crop or resize), allocates the slot
// pool and the device buffers, and opens the device if Config.Device is nil.
func New(ds Dataset, cfg Config) (*Loader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Workers == AutoWorkers {
		n, err := autoWorkers(cfg, func(c Config) (*Loader, error) { return New(ds, c) })
		if err != nil {
			return nil, err
		}
		cfg.Workers = n
	}
	l := &Loader{ds: ds, info: Describe(ds), cfg: cfg, sampler: cfg.Sampler}
	n, world := ds.Len(), max(cfg.WorldSize, 1)
	if cfg.ShuffleBuffer != 0 {
		return nil, fmt.Errorf("loaders: %s: a shuffle buffer is for stream loaders (a dataset is shuffled whole): %w", l.info.Name, ErrConfig)
	}
	if n <= 0 {
		return nil, fmt.Errorf("loaders: %s: %w", l.info.Name, ErrEmpty)
	}
	if l.sampler == nil {
		l.sampler = Sequential(n)
		if cfg.Shuffle {
			l.sampler = Shuffled(n)
		}
		if sh, ok := ds.(Sharded); ok {
			l.split, _ = splitShards(sh.ShardStarts(), n, world)
		}
	}
	if l.sampler.Len() <= 0 {
		return nil, fmt.Errorf("loaders: %s: the sampler visits %d samples per epoch: %w", l.info.Name, l.sampler.Len(), ErrEmpty)
	}
	l.perRank = (l.sampler.Len() + world - 1) / world
	if l.split.ranks != nil {
		l.perRank = l.split.per
	}
	return l, l.setup()
}

// NewStream returns a Loader over the stream src: each epoch reads src's parts front to back on one
// goroutine (in a permuted order, through a shuffle buffer, with Config.Shuffle), and its workers
// decode and augment the samples as for a Dataset. Unless src is a SizedSource, the length of an
// epoch is known only at its end: BatchesPerEpoch is 0, and the last batch is short unless
// DropLast. Config.Sampler must be nil.
// src may implement Describer; its Info.Shape is usually zero, so the transform must fix the size.
func NewStream(src StreamSource, cfg Config) (*Loader, error) {
	if cfg.Shuffle && cfg.ShuffleBuffer == 0 {
		cfg.ShuffleBuffer = DefaultShuffleBuffer
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Workers == AutoWorkers {
		n, err := autoWorkers(cfg, func(c Config) (*Loader, error) { return NewStream(src, c) })
		if err != nil {
			return nil, err
		}
		cfg.Workers = n
	}
	l := &Loader{src: src, cfg: cfg, info: Info{Name: fmt.Sprintf("%T", src)}}
	if d, ok := src.(Describer); ok {
		l.info = d.Info()
	}
	if cfg.Sampler != nil {
		return nil, fmt.Errorf("loaders: %s: a stream loader takes no Sampler: %w", l.info.Name, ErrConfig)
	}
	if src.Parts() < 1 {
		return nil, fmt.Errorf("loaders: %s: a stream of %d parts: %w", l.info.Name, src.Parts(), ErrEmpty)
	}
	if s, ok := src.(SizedSource); ok && s.PartLens() != nil {
		lens := s.PartLens()
		if len(lens) != src.Parts() {
			return nil, fmt.Errorf("loaders: %s: sizes of %d parts for a stream of %d: %w", l.info.Name, len(lens), src.Parts(), ErrConfig)
		}
		starts := make([]int, len(lens))
		for k, n := range lens {
			if n < 0 {
				return nil, fmt.Errorf("loaders: %s: part %d of %d samples: %w", l.info.Name, k, n, ErrConfig)
			}
			starts[k] = l.streamLen
			l.streamLen += n
		}
		if l.streamLen == 0 {
			return nil, fmt.Errorf("loaders: %s: %w", l.info.Name, ErrEmpty)
		}
		world := max(cfg.WorldSize, 1)
		l.perRank = (l.streamLen + world - 1) / world
		if l.split, _ = splitShards(starts, l.streamLen, world); l.split.ranks != nil {
			l.perRank = l.split.per
		}
	}
	return l, l.setup()
}

// setup fixes the output shape and the target, allocates the slot pool and the device buffers,
// and opens the device if Config.Device is nil.
func (l *Loader) setup() error {
	cfg := l.cfg
	shape, err := outShape(l.info, cfg.Transform)
	if err != nil {
		return err
	}
	if l.cfg.Target == nil {
		l.cfg.Target = Class(l.info.NumClasses)
	}
	if err := checkDeviceDecode(l.info.Name, cfg); err != nil {
		return err
	}
	if err := checkBudget(l.info.Name, l.cfg, shape); err != nil {
		return err
	}
	l.shape, l.sample, l.tsize = shape, shape.Len(), l.cfg.Target.Size()
	l.labOff = cfg.Batch * l.sample
	if deviceDecodes(cfg) {
		l.offOff = l.labOff
		l.labOff += 8 * cfg.Batch
	}
	l.state = l.position(0, 0)

	l.dev = cfg.Device
	if l.dev == nil {
		if l.dev, err = gpu.Open("cpu"); err != nil {
			return fmt.Errorf("loaders: %w", err)
		}
		l.ownDev = true
	}
	if l.cfg.Allocator == nil {
		l.cfg.Allocator = pinned.Locked()
		if r, ok := l.dev.(pinned.Registerer); ok {
			l.cfg.Allocator = pinned.Registered(l.cfg.Allocator, r)
		}
	}
	if err := l.alloc(); err != nil {
		return errors.Join(err, l.free())
	}
	l.workers = make([]workerState, cfg.Workers)
	for i := range l.workers {
		l.workers[i] = workerState{w: cfg.Transform.NewWorker(), r: rng.NewSample()}
	}
	return nil
}

// outShape finds the one shape every output image has.
func outShape(info Info, t *transforms.Chain) (transforms.Shape, error) {
	if info.Shape.H > 0 {
		s, err := t.OutShape(info.Shape)
		if err != nil {
			return s, fmt.Errorf("loaders: %s: samples of %v: %w", info.Name, info.Shape, err)
		}
		return s, nil
	}
	// Samples differ in size: the transform must fix the output size. Two unrelated input sizes
	// giving the same output show that it does.
	a, errA := t.OutShape(transforms.Shape{C: 3, H: 480, W: 640})
	b, errB := t.OutShape(transforms.Shape{C: 3, H: 1111, W: 333})
	if err := errors.Join(errA, errB); err != nil {
		return a, fmt.Errorf("loaders: %s: %w", info.Name, err)
	}
	if a != b {
		return a, fmt.Errorf("loaders: %s: samples differ in size, so the transform must end in a fixed-size crop or resize (such as transforms.Train(224)): %w",
			info.Name, ErrConfig)
	}
	return a, nil
}

func (l *Loader) alloc() error {
	var err error
	l.pool, err = pinned.NewPool(pinned.Config{SlotSize: l.labOff + l.tsize*l.cfg.Batch, Prefetch: l.cfg.Prefetch, Allocator: l.cfg.Allocator})
	if err != nil {
		return fmt.Errorf("loaders: host slots: %w", err)
	}
	// One buffer set being copied into, one held by the consumer, Prefetch waiting between them.
	fc := gpu.FeederConfig{Device: l.dev, Compute: l.cfg.Stream, Sizes: []int{l.cfg.Batch * l.sample, l.tsize * l.cfg.Batch}, Ring: l.cfg.Prefetch + 2}
	if deviceDecodes(l.cfg) {
		// The records (and host pixels), the samples' table, the targets, and the images
		// RenderRecords makes of them.
		fc.Sizes = []int{l.cfg.Batch * l.sample, 8 * l.cfg.Batch, l.tsize * l.cfg.Batch, l.cfg.Batch * l.sample}
		if err := l.openDeviceDecode(); err != nil {
			return err
		}
	}
	if l.cfg.Tracer != nil {
		l.feedSeq = map[int64]int{}
		fc.Copied = l.copied
	}
	l.feeder, err = gpu.NewFeeder(fc)
	if err != nil {
		return fmt.Errorf("loaders: %w", err)
	}
	return nil
}

// free releases what alloc and New acquired. The feeder goes first: closing it waits for the
// copies, so every slot is back in the pool before the pool is closed.
func (l *Loader) free() error {
	var errs []error
	if l.feeder != nil {
		errs = append(errs, l.feeder.Close())
	}
	if l.dd != nil {
		errs = append(errs, l.dd.close())
	}
	if l.pool != nil {
		errs = append(errs, l.pool.Close())
	}
	if l.held > 0 && l.ownDev {
		errs = append(errs, fmt.Errorf("loaders: close: %d batches not released still use the device", l.held))
	}
	if l.ownDev {
		errs = append(errs, l.dev.Close())
	}
	return errors.Join(errs...)
}

// Close waits for the copies in flight, then releases the feeder, the slot pool and the device the
// Loader opened. It fails with ErrBusy while an epoch is being iterated. A second Close returns nil.
func (l *Loader) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		return fmt.Errorf("loaders: close: %w", ErrBusy)
	}
	if l.closed {
		return nil
	}
	l.closed = true
	return l.free()
}

// Target returns the target the batches carry (Config.Target, or the default Class).
func (l *Loader) Target() Target { return l.cfg.Target }

// Shape returns the shape of every image the Loader yields.
func (l *Loader) Shape() transforms.Shape { return l.shape }

// Info returns the dataset's Info.
func (l *Loader) Info() Info { return l.info }

// Normalization returns what the consumer should apply to the uint8 images on the device,
// (float32(v)/255 - mean[c]) / std[c]: the transform's Normalize if it has one, otherwise the
// dataset's usual values, otherwise mean 0 and std 1 (plain scaling to [0, 1]). The slices have one
// value per output channel and are the caller's.
func (l *Loader) Normalization() (mean, std []float32) {
	if m, s, ok := l.cfg.Transform.Normalization(); ok {
		return m, s
	}
	if len(l.info.Mean) == l.shape.C && len(l.info.Std) == l.shape.C {
		return append([]float32(nil), l.info.Mean...), append([]float32(nil), l.info.Std...)
	}
	mean, std = make([]float32, l.shape.C), make([]float32, l.shape.C)
	for i := range std {
		std[i] = 1
	}
	return mean, std
}

// BatchesPerEpoch returns the number of batches each epoch yields on this rank (counting batches
// that a Skip policy might leave empty); 0 for a stream loader whose source is not a SizedSource,
// whose length is known only at the end of each epoch.
func (l *Loader) BatchesPerEpoch() int {
	n := l.perRank
	if l.cfg.DropLast {
		return n / l.cfg.Batch
	}
	return (n + l.cfg.Batch - 1) / l.cfg.Batch
}

func (l *Loader) position(epoch, batch int) State {
	s := State{Epoch: epoch, Batch: batch, Seed: l.cfg.Seed, Rank: l.cfg.Rank,
		WorldSize: max(l.cfg.WorldSize, 1), BatchSize: l.cfg.Batch, Shuffle: l.cfg.Shuffle, DropLast: l.cfg.DropLast,
		ShuffleBuffer: l.cfg.ShuffleBuffer}
	if l.ds != nil {
		s.Len = l.ds.Len()
	} else {
		s.Len = l.streamLen
	}
	return s
}

// State returns the position after the last batch yielded: save it once the step that used that
// batch is done, and Restore it to continue from the next batch.
func (l *Loader) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Restore makes the next Epoch(ctx, s.Epoch) start at batch s.Batch, yielding exactly what the
// Loader that saved s would have yielded next. s must come from a Loader with the same dataset
// length, seed, batch size, shuffling, drop-last, shuffle buffer and sharding (ErrStateMismatch
// otherwise).
// A stream loader gets there by reading the epoch's stream up to s.Read again, without decoding,
// keeping the samples s.Buffer names; a State that does not fit the stream fails that epoch with
// ErrStateMismatch.
func (l *Loader) Restore(s State) error {
	want := l.position(s.Epoch, s.Batch)
	bad := !s.sameRun(want) || s.Epoch < 0 || s.Batch < 0
	if l.src == nil {
		bad = bad || s.Batch > l.BatchesPerEpoch() || s.Read != 0 || len(s.Buffer) > 0
	} else {
		// A stream is placed by what was read of it: a batch past the first with nothing read
		// (a State made from a batch count alone) would start the stream over under its number.
		bad = bad || s.Read < 0 || (s.Batch > 0 && s.Read == 0) || len(s.Buffer) > l.cfg.ShuffleBuffer || (len(s.Buffer) > 0 && l.cfg.ShuffleBuffer <= 1) ||
			(l.perRank > 0 && s.Batch > l.BatchesPerEpoch())
	}
	if bad {
		return fmt.Errorf("loaders: restore %+v into a loader at %+v (%d batches per epoch): %w", s, want, l.BatchesPerEpoch(), ErrStateMismatch)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		return fmt.Errorf("loaders: restore: %w", ErrBusy)
	}
	l.state, l.restored = s, true
	return nil
}

// Stats describes the Loader's work so far.
type Stats struct {
	// Stages are the pipeline stages of the running epoch, or of the last one.
	Stages []pipeline.StageStats
	// Batches and Samples count what was yielded; Skipped counts samples left out under the Skip
	// policy (all epochs), LastSkipped is the error of the most recent one.
	Batches, Samples, Skipped int64
	LastSkipped               error
	// CopyBytes and CopyTime measure the host-to-device copies whose slots are back in the pool
	// (device time between events), from the feeder. Once an epoch's iterator has returned they
	// include every copy it made (unless its context ended first).
	CopyBytes int64
	CopyTime  time.Duration
	// Read is the time the transform workers spent in Dataset.Sample, reading samples (all
	// epochs); the rest of the transform stage's busy time is decoding and augmenting them.
	Read time.Duration
	// Transform is where that rest went, summed over the workers (all epochs): decoding, the
	// resampling of the geometry and each transform's pixel steps (transforms.Worker.Times).
	Transform []transforms.Time
	// Wait is the time the consumer spent waiting for the next batch inside the iterator;
	// Elapsed is the time spent iterating epochs, including the running one. Wait/Elapsed is
	// the consumer's stall fraction.
	Wait, Elapsed time.Duration
	// Pool describes the host slots, including whether they are pinned and why not.
	Pool pinned.Stats
	// With transforms.DeviceDecode: DeviceDecoded counts the samples the device decoded (all
	// epochs), HostPath those that took the host path (another format, pixel steps, a record
	// too long or needing more device scratch than a sample has: transforms.ErrHostPath), and
	// RecordBytes the bytes of the device decoded samples' records.
	DeviceDecoded, HostPath, RecordBytes int64
	// HostCPU is the CPU time of the transform and copy stages' work (all epochs): reading,
	// decoding, augmenting, packing and enqueuing each batch's copy, on the threads that ran it
	// (Linux; 0 elsewhere). It leaves out what the device does, also on the CPU backend, whose
	// streams run on threads of their own: the host's cost of the data, which a device decode
	// lowers.
	HostCPU time.Duration
}

// hostCPUStart is a thread's CPU time when a stage's work began (ok: the system reports it).
type hostCPUStart struct {
	t  time.Duration
	ok bool
}

// startHostCPU locks the calling goroutine to its thread and reads the thread's CPU time, for
// stopHostCPU, which counts what the work took into Stats.HostCPU. (Values, not a closure: the
// pair runs once a sample.)
func startHostCPU() hostCPUStart {
	runtime.LockOSThread()
	t, ok := cputime.Thread()
	return hostCPUStart{t, ok}
}

// stopHostCPU counts the calling thread's CPU time since s into Stats.HostCPU and unlocks the
// goroutine from its thread.
func (l *Loader) stopHostCPU(s hostCPUStart) {
	if t, ok := cputime.Thread(); ok && s.ok {
		l.cpu.Add(int64(t - s.t))
	}
	runtime.UnlockOSThread()
}

// CopyGBps is the copy bandwidth in GB/s (0 before the first copy has been timed).
func (s Stats) CopyGBps() float64 {
	if s.CopyTime <= 0 {
		return 0
	}
	return float64(s.CopyBytes) / s.CopyTime.Seconds() / 1e9
}

// StallFraction is Wait/Elapsed, the share of the consumer's time spent waiting for data.
func (s Stats) StallFraction() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return min(float64(s.Wait)/float64(s.Elapsed), 1)
}

// Stats returns a snapshot.
func (l *Loader) Stats() Stats {
	l.mu.Lock()
	st := l.stats
	pl := l.pl
	st.Stages = l.stages
	if l.running {
		st.Elapsed += time.Since(l.epochStart)
	}
	l.mu.Unlock()
	if pl != nil {
		st.Stages = pl.Stats()
	}
	st.Read = time.Duration(l.read.Load())
	st.HostCPU = time.Duration(l.cpu.Load())
	at := map[string]int{} // by name: a worker leaves out the transforms that took it no time
	for _, ws := range l.workers {
		for _, t := range ws.w.Times() {
			i, ok := at[t.Name]
			if !ok {
				i, at[t.Name] = len(st.Transform), len(st.Transform)
				st.Transform = append(st.Transform, transforms.Time{Name: t.Name})
			}
			st.Transform[i].Time += t.Time
		}
	}
	if l.pool != nil {
		st.Pool = l.pool.Stats()
	}
	if l.feeder != nil {
		fs := l.feeder.Stats()
		st.CopyBytes, st.CopyTime = fs.Bytes, fs.CopyTime
	}
	return st
}
