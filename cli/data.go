package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/transforms"
)

// loaderFlags are the flags of every command that runs a Loader.
type loaderFlags struct {
	data                           string
	size, batch, workers, prefetch int
	device                         string
	onError                        string
	maxSkipped                     int
	seed                           uint64
	memory                         memoryValue
	// autoWorkers is --workers auto: workers is sized by a short measurement when the loader opens.
	autoWorkers bool
	// opener reads remote shards (--cache-dir, --cache-size).
	opener datasets.Opener
	// rank and worldSize place this process among data-parallel ones (--rank, --world-size, from
	// the launcher's environment by default); localRank (LOCAL_RANK) picks its GPU.
	rank, worldSize, localRank int
	// decode is --decode by split (registerDecode): stoke train's for "train", predict's for "test".
	decode map[string]*transforms.DecodeMode
	// augment, set by stoke train, adds its --augment and --random-erasing to the training split.
	augment *augmentFlags
	// model is the model the photos are for (--model, a checkpoint's): its evaluation transform
	// (models.EvalTransformFor) evaluates, and its normalization trains; pre, if set, is what a
	// checkpoint records of its data, or how weights named by --weights or --init evaluate
	// (models.Preprocess), whose transform and normalization serve instead (evalTransform).
	model           string
	pre             *models.Preprocess
	envErr, distErr error
	// sampleLog, set by stoke train's --sample-log-dir, sees every batch the training loader
	// delivers (its Collate).
	sampleLog func(*loaders.HostBatch) error
	// env is the launcher's placement; masterAddr, masterPort and distTimeout the rendezvous
	// (registerDist).
	env         collective.Config
	masterAddr  string
	masterPort  int
	distTimeout time.Duration
}

// registerRanks adds --rank and --world-size, whose defaults come from the environment torchrun
// or Slurm set (RANK, WORLD_SIZE or SLURM_PROCID, SLURM_NTASKS; LOCAL_RANK or SLURM_LOCALID picks
// the GPU for --device cuda).
func (lf *loaderFlags) registerRanks(fs *flag.FlagSet) {
	cfg, err := collective.FromEnv()
	if err != nil {
		// Commands that only split the data (bench, profile) need no rendezvous: RANK and
		// WORLD_SIZE are enough for them; group reports what is missing.
		lf.distErr = err
		rank, world, local, err := loaders.EnvRank()
		if err != nil {
			rank, world, local, lf.envErr = 0, 1, 0, err
		}
		cfg = collective.Config{Rank: rank, WorldSize: world, LocalRank: local, Secret: os.Getenv(collective.SecretEnv)}
	}
	lf.env = cfg
	lf.localRank = cfg.LocalRank
	fs.IntVar(&lf.rank, "rank", cfg.Rank, "this process's rank among data-parallel processes (default: $RANK or $SLURM_PROCID)")
	fs.IntVar(&lf.worldSize, "world-size", max(cfg.WorldSize, 1),
		"number of data-parallel processes; each reads a disjoint part of every epoch (default: $WORLD_SIZE or $SLURM_NTASKS)")
}

// registerDist adds the rendezvous flags of a command whose ranks talk to each other.
func (lf *loaderFlags) registerDist(fs *flag.FlagSet) {
	lf.registerRanks(fs)
	addr := lf.env.Addr
	if addr == "" {
		addr = "127.0.0.1"
	}
	fs.StringVar(&lf.masterAddr, "master-addr", addr,
		"host of rank 0's store, where the ranks meet; the store listens on this address only (default: $MASTER_ADDR). Set the same $STOKE_SECRET on every rank to authenticate the job")
	fs.IntVar(&lf.masterPort, "master-port", lf.env.Port, "port of that store (default: $MASTER_PORT; required with --world-size above 1)")
	fs.DurationVar(&lf.distTimeout, "dist-timeout", 30*time.Minute,
		"how long a rank waits for the others (at the start, and in any collective) before it fails, naming the rank and the operation")
}

// group joins the data-parallel group the flags and the environment describe (a group of one with
// --world-size 1). The caller closes it.
func (lf *loaderFlags) group(ctx context.Context) (*collective.Group, error) {
	cfg := lf.env
	if lf.distErr != nil && lf.worldSize > 1 && lf.masterPort == 0 {
		return nil, fmt.Errorf("%w: %v (or pass --master-addr and --master-port)", errUsage, lf.distErr)
	}
	if cfg.Rank != lf.rank || cfg.WorldSize != lf.worldSize {
		// The flags place this process: no launcher's store to join.
		cfg.Rank, cfg.WorldSize, cfg.UseAgentStore = lf.rank, lf.worldSize, false
	}
	cfg.Addr, cfg.Port, cfg.Timeout = lf.masterAddr, lf.masterPort, lf.distTimeout
	if cfg.WorldSize > 1 && cfg.Port == 0 {
		return nil, fmt.Errorf("%w: --world-size %d needs --master-port (or $MASTER_PORT), where rank 0's store listens", errUsage, cfg.WorldSize)
	}
	if !(lf.distTimeout > 0) {
		return nil, fmt.Errorf("%w: --dist-timeout %v; want > 0", errUsage, lf.distTimeout)
	}
	g, err := collective.Init(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d: %w", cfg.Rank, cfg.WorldSize, err)
	}
	return g, nil
}

// workersValue parses --workers: a count, or auto.
type workersValue struct{ lf *loaderFlags }

func (v workersValue) String() string {
	if v.lf == nil {
		return "0"
	}
	if v.lf.autoWorkers {
		return "auto"
	}
	return strconv.Itoa(v.lf.workers)
}

func (v workersValue) Set(s string) error {
	if s == "auto" {
		v.lf.autoWorkers, v.lf.workers = true, 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%q: want a number >= 0 or auto", s)
	}
	if n > maxWorkers {
		return fmt.Errorf("%d workers: want at most %d", n, maxWorkers)
	}
	v.lf.autoWorkers, v.lf.workers = false, n
	return nil
}

// maxSize bounds --size, far above any training resolution.
const maxSize = 1 << 14

// maxWorkers bounds --workers: each worker holds a decoded image, so a count far past the cores
// buys nothing and can take the memory.
const maxWorkers = 1024

// memoryValue parses --memory: a byte count with an optional K, M, G or T suffix (powers of 1024),
// or "none".
type memoryValue int64

func (v *memoryValue) String() string {
	switch {
	case v == nil || *v == 0:
		return "a quarter of the machine's memory"
	case *v < 0:
		return "none"
	}
	return strconv.FormatInt(int64(*v), 10)
}

func (v *memoryValue) Set(s string) error {
	if s == "none" {
		*v = -1
		return nil
	}
	n, err := parseBytes(s)
	if err != nil || n == 0 {
		return fmt.Errorf("%q: want a size such as 8G, 512M or none", s)
	}
	*v = memoryValue(n)
	return nil
}

// parseBytes parses a byte count with an optional K, M, G or T suffix (powers of 1024; 8G, 8GiB
// and 8gb alike).
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"), int64(1)
	if n := len(num); n > 0 {
		if i := strings.IndexByte("KMGT", num[n-1]); i >= 0 {
			num, mult = num[:n-1], int64(1)<<(10*(i+1))
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f >= 0) || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q: not a size", s)
	}
	return int64(f * float64(mult)), nil
}

// zeroSize reports whether s, a size parseBytes reads, is zero itself, not a fraction of a byte
// that rounds to it ("0.5" would otherwise mean no bound).
func zeroSize(s string) bool {
	return strings.Trim(strings.TrimRight(strings.ToUpper(s), "KMGTIB"), "0.") == ""
}

// byteCount parses a count of bytes with parseBytes's suffixes: at least one byte, or 0 as well
// when zero is allowed (--cache-size 0: no bound), never a fraction of a byte taken for 0.
type byteCount struct {
	n      *int64
	zeroOK bool
}

func (c byteCount) String() string {
	if c.n == nil {
		return "0"
	}
	return strconv.FormatInt(*c.n, 10)
}

func (c byteCount) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil || n < 1 && !(c.zeroOK && zeroSize(s)) {
		if c.zeroOK {
			return fmt.Errorf("%q: want a size such as 200G or 512M, at least one byte (0: no bound)", s)
		}
		return fmt.Errorf("%q: want a size such as 256M or 1G", s)
	}
	*c.n = n
	return nil
}

// reportSkipped says how many bad samples were skipped, under --on-error skip (always, so that a
// partial run never reads as a complete one) or whenever some were.
func (lf *loaderFlags) reportSkipped(e *env, n int64, last error) {
	switch {
	case n > 0:
		e.printf("skipped %d bad samples; the last: %v\n", n, last)
	case lf.onError == "skip":
		e.printf("skipped 0 bad samples\n")
	}
}

func (lf *loaderFlags) register(fs *flag.FlagSet, batch int) {
	fs.StringVar(&lf.data, "data", "", "dataset: mnist, mnist:DIR, cifar10:DIR, cifar100:DIR, DIR or folder:DIR, "+
		"shards:PATTERN (local, s3:// or https:// shards; braces {000..099}, wildcards, or an index.json)")
	fs.StringVar(&lf.opener.CacheDir, "cache-dir", "", "folder of local copies of remote shards, shared safely by several processes "+
		"(default: none; plain shards are then read by byte ranges)")
	fs.Var(byteCount{&lf.opener.CacheSize, true}, "cache-size", "bound of --cache-dir, e.g. 200G; past it the least recently used shards go (0: no bound)")
	fs.IntVar(&lf.size, "size", 0, "output image side; 0 keeps a fixed-shape dataset's own size (MNIST, CIFAR) and means, for photos, "+
		"the crop of the model's weights' evaluation transform (224 for most models; efficientnet_b1 240, efficientnet_v2_s 384)")
	fs.IntVar(&lf.batch, "batch", batch, "samples per batch")
	fs.Var(workersValue{lf}, "workers",
		"loader workers: a number (0: one per core) or auto (sized from a short measurement of the loader's stages, within the cores)")
	fs.IntVar(&lf.prefetch, "prefetch", 0, "batches ready ahead of the consumer (0: default)")
	fs.StringVar(&lf.device, "device", "cpu", "device: cpu, cuda, cuda:N")
	fs.StringVar(&lf.onError, "on-error", "fail", "bad samples: fail (stop at the first) or skip (count and skip them)")
	fs.IntVar(&lf.maxSkipped, "max-skipped", 1000, "with --on-error skip, fail once an epoch skips more samples than this (0: no limit)")
	fs.Uint64Var(&lf.seed, "seed", 1, "seed of the sample order and of the augmentations")
	fs.Var(&lf.memory, "memory", "budget of the loader's host slots and device buffers, e.g. 8G or none (default: a quarter of the machine's memory)")
}

func (lf *loaderFlags) check() error {
	if lf.data == "" {
		return fmt.Errorf("%w: --data is required", errUsage)
	}
	if lf.batch < 1 {
		return fmt.Errorf("%w: --batch %d; want >= 1", errUsage, lf.batch)
	}
	if _, err := loaders.ParseErrorPolicy(lf.onError); err != nil {
		return fmt.Errorf("%w: --on-error %q; want fail or skip", errUsage, lf.onError)
	}
	if lf.envErr != nil {
		return fmt.Errorf("%w: %v", errUsage, lf.envErr)
	}
	if lf.worldSize < 1 || lf.rank < 0 || lf.rank >= lf.worldSize {
		return fmt.Errorf("%w: --rank %d --world-size %d; want 0 <= rank < world size", errUsage, lf.rank, lf.worldSize)
	}
	if lf.device == "cuda" && lf.localRank > 0 {
		lf.device = fmt.Sprintf("cuda:%d", lf.localRank) // one GPU per process on a host, as torchrun expects
	}
	if lf.maxSkipped < 0 || lf.size < 0 || lf.prefetch < 0 {
		return fmt.Errorf("%w: --max-skipped %d --size %d --prefetch %d; want >= 0", errUsage, lf.maxSkipped, lf.size, lf.prefetch)
	}
	if lf.size > maxSize {
		return fmt.Errorf("%w: --size %d; want at most %d", errUsage, lf.size, maxSize)
	}
	return nil
}

// transform picks the transform for split: none for fixed-shape datasets at their own size, a plain
// resize for one-channel ones at another (digits neither flip nor take ImageNet's colour means),
// otherwise the evaluation transform of lf.model's weights (test; models.EvalTransformFor:
// transforms.Eval's for a model without one) or torchvision's ImageNet training crop and flip with
// the normalization of that transform (train); then, for train, the augmentation of stoke train's
// --augment and --random-erasing.
func (lf *loaderFlags) transform(info loaders.Info, split string) *transforms.Chain {
	p := lf.baseTransform(info, split)
	if split == "train" && lf.augment != nil {
		mean, _, _ := p.Normalization()
		ts, _ := lf.augment.transforms(mean) // checked when the flags were parsed
		if len(ts) > 0 {
			p = p.Append(ts...)
		}
	}
	return p
}

func (lf *loaderFlags) baseTransform(info loaders.Info, split string) *transforms.Chain {
	if lf.size == 0 && info.Shape.C > 0 {
		return nil
	}
	if info.Shape.C == 1 {
		return transforms.Compose(transforms.ResizeTo(lf.size, lf.size))
	}
	e := lf.evalTransform()
	size := lf.size
	if size == 0 {
		size = e.Crop // the size its weights were evaluated at
	}
	if split == "test" {
		if lf.pre != nil { // the checkpoint's or the weights' own: a resize and central crop, or a resize to the input
			return lf.pre.Chain(transforms.Shape{H: size, W: size})
		}
		return e.Chain(size)
	}
	return transforms.Compose(transforms.RandomResizedCrop(size), transforms.HorizontalFlip(0.5), transforms.Normalize(e.Mean, e.Std))
}

// evalTransform is the evaluation transform of photos: the checkpoint's or the weights' own
// (lf.pre, unless it resizes without a crop), else the model's (models.EvalTransformFor).
func (lf *loaderFlags) evalTransform() models.EvalTransform {
	if lf.pre != nil && lf.pre.Eval.Crop > 0 {
		return lf.pre.Eval
	}
	return models.EvalTransformFor(lf.model)
}

// preprocess is what stoke train's checkpoints record of ds (models.Preprocess): the evaluation
// transform baseTransform gives its test split, for a model of input shape in (a resize to the
// input for fixed-shape and one-channel data, the weights' resize and central crop for photos),
// the normalization mean and std of its loaders, and its class names when it names as many as
// the model has.
func (lf *loaderFlags) preprocess(ds loaders.Dataset, in transforms.Shape, classes int, mean, std []float32) *models.Preprocess {
	p := &models.Preprocess{Eval: models.EvalTransform{Mean: mean, Std: std}}
	if info := loaders.Describe(ds); info.Shape.C == 0 || (lf.size != 0 && info.Shape.C != 1) {
		p.Eval = lf.evalTransform().At(in.H)
	}
	if names := classNames(ds); len(names) == classes {
		p.Classes = names
	}
	return p
}

// open opens split of the dataset and a Loader over it that delivers to dev, ordered before the
// work of stream (nil: yielded once copied). The returned closer closes both.
func (lf *loaderFlags) open(ctx context.Context, split string, shuffle bool, dev gpu.Device, stream gpu.Stream) (*loaders.Loader, io.Closer, error) {
	ds, err := openDataset(ctx, lf.opener, lf.data, split)
	if err != nil {
		return nil, nil, err
	}
	ld, err := lf.loader(ds, split, shuffle, dev, stream)
	if err != nil {
		closeDataset(ds)
		return nil, nil, err
	}
	return ld, closers{ld, datasetCloser{ds}}, nil
}

// loader returns a Loader over ds configured by the flags (see config).
func (lf *loaderFlags) loader(ds loaders.Dataset, split string, shuffle bool, dev gpu.Device, stream gpu.Stream) (*loaders.Loader, error) {
	return lf.newLoader(ds, lf.config(ds, split, shuffle, dev, stream))
}

// config is the Loader configuration the flags describe for split of ds. With --workers auto the
// first Loader sizes its workers (loaders.AutoWorkers); newLoader records the count in
// lf.workers, so that later loaders reuse it.
func (lf *loaderFlags) config(ds loaders.Dataset, split string, shuffle bool, dev gpu.Device, stream gpu.Stream) loaders.Config {
	policy, _ := loaders.ParseErrorPolicy(lf.onError)
	cfg := loaders.Config{
		Batch: lf.batch, Workers: lf.workers, Prefetch: lf.prefetch,
		Shuffle: shuffle, Seed: lf.seed,
		Transform: lf.withDecode(lf.transform(loaders.Describe(ds), split), split),
		Device:    dev, Stream: stream,
		OnError: policy, MaxSkipped: lf.maxSkipped, MemoryBudget: int64(lf.memory),
		Rank: lf.rank, WorldSize: lf.worldSize,
	}
	if lf.autoWorkers && lf.workers == 0 {
		cfg.Workers = loaders.AutoWorkers
	}
	if split == "train" && lf.augment != nil {
		cfg.Mix, _ = lf.augment.mix() // checked when the flags were parsed
	}
	if split == "train" {
		cfg.Collate = lf.sampleLog
	}
	return cfg
}

// newLoader opens a Loader over ds with cfg and records the workers --workers auto chose.
func (lf *loaderFlags) newLoader(ds loaders.Dataset, cfg loaders.Config) (*loaders.Loader, error) {
	ld, err := loaders.New(ds, cfg)
	if err != nil {
		if cfg.Workers == loaders.AutoWorkers {
			err = fmt.Errorf("--workers auto: %w", err)
		}
		return nil, err
	}
	if lf.autoWorkers && lf.workers == 0 {
		lf.workers = ld.Workers()
	}
	return ld, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type datasetCloser struct{ ds loaders.Dataset }

func (d datasetCloser) Close() error { return closeDataset(d.ds) }

func closeDataset(ds loaders.Dataset) error {
	if c, ok := ds.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
