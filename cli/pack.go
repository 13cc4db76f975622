package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/internal/packdir"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/transforms"
)

// jpegQuality is the quality of re-encoded JPEGs: visually lossless for training images, and what
// torchvision/PIL pipelines commonly store.
const jpegQuality = 90

// packResult is the --json line of stoke pack.
type packResult struct {
	Data     string `json:"data"`
	Out      string `json:"out"`
	Spec     string `json:"spec"` // what to give --data to read the shards back
	Format   string `json:"format"`
	Compress string `json:"compress"`
	MaxSide  int    `json:"max_side"`
	Samples  int    `json:"samples"`
	// Splits counts the samples packed of each split, all in the one index.
	Splits      map[string]int `json:"splits"`
	Skipped     int            `json:"skipped"` // bad samples left out under --on-error skip
	Shards      []string       `json:"shards"`
	Bytes       int64          `json:"bytes"` // size of the shard files
	Seconds     float64        `json:"seconds"`
	SamplesPerS float64        `json:"samples_per_s"`
}

// compressSuffix maps --compress to the shard suffix that selects the compression.
var compressSuffix = map[string]string{"none": ".tar", "zstd": ".tar.zst", "gzip": ".tar.gz"}

func runPack(ctx context.Context, e *env, args []string) error {
	fs := e.flags("--data SPEC --out DIR [--overwrite] [--format jpeg|raw] [--compress none|zstd|gzip] [--max-side N] [--shard-size BYTES] [--split S] "+
		"[--workers W] [--on-error skip] [--json]", true)
	data := fs.String("data", "", "dataset: mnist, mnist:DIR, cifar10:DIR, cifar100:DIR, DIR or folder:DIR, shards:GLOB, shards:DIR")
	split := fs.String("split", "", "split of the dataset to pack: train, val or test (default: every split it has, into one index)")
	out := fs.String("out", "", "folder the shards and index.json are written to: new, empty, or holding a previous pack that --overwrite replaces")
	overwrite := fs.Bool("overwrite", false, "remove the previous pack in --out first (never other files)")
	onError := fs.String("on-error", "fail", "bad samples: fail (stop at the first, writing nothing) or skip (leave them out, count them)")
	maxSkipped := fs.Int("max-skipped", 1000, "with --on-error skip, fail once more samples than this were skipped (0: no limit)")
	format := fs.String("format", "jpeg",
		"jpeg: JPEG files (passed through when already JPEG and small enough, otherwise encoded at quality 90); raw: uint8 HWC pixels that load without "+
			"decoding")
	compress := fs.String("compress", "none", "compression of each whole shard: none, zstd or gzip")
	maxSide := fs.Int("max-side", 0, "shrink images whose longer side exceeds this many pixels, keeping the aspect ratio (0: keep sizes)")
	shardSize := new(int64)
	*shardSize = datasets.DefaultShardBytes
	fs.Var(byteCount{n: shardSize}, "shard-size", "start a new shard after this many bytes of samples (before compression), e.g. 256M")
	workers := fs.Int("workers", 0, "goroutines that decode and encode samples (0: one per core)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	switch {
	case *data == "" || *out == "":
		return fmt.Errorf("%w: --data and --out are required", errUsage)
	case *format != "jpeg" && *format != "raw":
		return fmt.Errorf("%w: --format %q; want jpeg or raw", errUsage, *format)
	case compressSuffix[*compress] == "":
		return fmt.Errorf("%w: --compress %q; want none, zstd or gzip", errUsage, *compress)
	case *maxSide < 0 || *shardSize < 1 || *workers < 0 || *workers > maxWorkers || *maxSkipped < 0:
		return fmt.Errorf("%w: --max-side %d --shard-size %d --workers %d --max-skipped %d; want >= 0, >= 1, 0 to %d, >= 0", errUsage, *maxSide, *shardSize,
			*workers, *maxSkipped, maxWorkers)
	}
	policy, err := loaders.ParseErrorPolicy(*onError)
	if err != nil {
		return fmt.Errorf("%w: --on-error %q; want fail or skip", errUsage, *onError)
	}
	if err := checkOverlap(*data, *out); err != nil {
		return err
	}
	if *workers == 0 {
		*workers = runtime.GOMAXPROCS(0)
	}
	splits := []string{*split}
	if *split == "" {
		if splits, err = datasetSplits(ctx, datasets.Opener{}, *data); err != nil {
			return err
		}
	}
	// Every split is opened before anything is written: the total for the progress bar, and no
	// pack cut short by a split that does not open.
	sets := make([]loaders.Dataset, len(splits))
	total := 0
	for i, s := range splits {
		if sets[i], err = openDataset(ctx, datasets.Opener{}, *data, s); err != nil {
			return err
		}
		defer closeDataset(sets[i])
		total += sets[i].Len()
	}
	pattern := filepath.Join(strings.ReplaceAll(*out, "%", "%%"), shardPrefix+"%s-%06d"+compressSuffix[*compress])
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: pattern, MaxBytes: *shardSize})
	if err != nil {
		return err
	}
	dir, err := createPackDir(*out, *overwrite)
	if err != nil {
		return err
	}
	// From here on, a failure leaves nothing that reads as a dataset: the shards are removed, and
	// a killed process leaves the lock file that readers refuse.
	committed := false
	defer func() {
		if !committed {
			w.Abort()
			dir.Abort()
		}
	}()

	start := time.Now()
	pk := &packer{format: *format, maxSide: *maxSide, workers: *workers, policy: policy, maxSkipped: *maxSkipped,
		bar: progress.New(e.stderr, e.progressMode(), "pack", "sample", int64(total))}
	r := packResult{Data: *data, Out: *out, Format: *format, Compress: *compress, MaxSide: *maxSide, Splits: map[string]int{}}
	for i, ds := range sets {
		skipped := pk.skipped
		if err = w.BeginSplit(splits[i]); err == nil {
			err = pk.packSplit(ctx, w, ds)
		}
		if err == nil && pk.skipped-skipped == ds.Len() {
			err = fmt.Errorf("every one of the %d samples of the %s split was bad; the last: %w", ds.Len(), splits[i], pk.lastSkipped)
		}
		if err != nil {
			pk.bar.Finish()
			return err
		}
		r.Splits[splits[i]] = ds.Len() - (pk.skipped - skipped)
		r.Samples += r.Splits[splits[i]]
	}
	pk.bar.Finish()
	if err := w.Close(); err != nil {
		return err
	}
	if err := dir.Commit(); err != nil {
		return err
	}
	committed = true
	r.Skipped, r.Shards, r.Seconds, r.Spec = pk.skipped, w.Shards(), time.Since(start).Seconds(), "shards:"+*out
	for _, s := range r.Shards {
		fi, err := os.Stat(s)
		if err != nil {
			return err
		}
		r.Bytes += fi.Size()
	}
	if r.Seconds > 0 {
		r.SamplesPerS = float64(r.Samples) / r.Seconds
	}
	var per []string
	for _, s := range splits {
		per = append(per, fmt.Sprintf("%s %d", s, r.Splits[s]))
	}
	e.printf("packed %d samples of %s (%s) into %d shards (%.1f MB, %s, compression %s) in %.2f s (%.0f samples/s)\n",
		r.Samples, r.Data, strings.Join(per, ", "), len(r.Shards), float64(r.Bytes)/1e6, r.Format, r.Compress, r.Seconds, r.SamplesPerS)
	if r.Skipped > 0 {
		e.printf("skipped %d bad samples; the last: %v\n", r.Skipped, pk.lastSkipped)
	}
	e.printf("read them with --data %s\n", r.Spec)
	return e.emit(r)
}

// shardPrefix starts the name of every shard stoke pack writes.
const shardPrefix = "shard-"

// checkOverlap refuses an output folder that holds the input or lies inside it: packing a folder
// onto itself would read its own output (or remove its input with --overwrite).
func checkOverlap(data, out string) error {
	in := data
	if kind, arg, ok := strings.Cut(data, ":"); ok {
		switch kind {
		case "mnist", "cifar10", "cifar100", "folder":
			in = arg
		case "shards":
			in = arg
			if st, err := os.Stat(arg); err != nil || !st.IsDir() {
				in = filepath.Dir(arg)
			}
		}
	} else if data == "mnist" {
		return nil
	}
	a, errA := canonical(in)
	b, errB := canonical(out)
	if errA != nil || errB != nil {
		return nil // a missing input fails when it is opened
	}
	if within(a, b) || within(b, a) {
		return fmt.Errorf("%w: --out %s and the input %s overlap; write the pack to a folder outside the data", errUsage, out, in)
	}
	return nil
}

// canonical is path made absolute with its symbolic links resolved; for a path that does not exist
// yet, its longest existing parent is resolved.
func canonical(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return "", os.ErrNotExist
		}
		rest = filepath.Join(filepath.Base(abs), rest)
		abs = parent
	}
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// packCause leads with the sample's error rather than the pipeline stage's.
func packCause(err error) error {
	var se *pipeline.StageError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// packer turns one sample into what is written: the original JPEG bytes when they may pass
// through, otherwise pixels decoded (and shrunk to maxSide) stored raw or encoded as JPEG.
type packer struct {
	format  string
	maxSide int
	name    string // the dataset's, for errors
	workers int
	// policy and maxSkipped are --on-error and --max-skipped; skipped counts the samples left out
	// of the whole pack, lastSkipped is the last one's error.
	policy      loaders.ErrorPolicy
	maxSkipped  int
	skipped     int
	lastSkipped error
	bar         *progress.Bar
}

// packSplit writes every sample of ds to w, in order, encoding them on pk.workers goroutines.
func (pk *packer) packSplit(ctx context.Context, w *datasets.ShardWriter, ds loaders.Dataset) error {
	pk.name = loaders.Describe(ds).Name
	p := pipeline.New()
	src := pipeline.FromSeq(p, "index", func(yield func(int) bool) {
		for i := range ds.Len() {
			if !yield(i) {
				return
			}
		}
	})
	// A sample the skip policy leaves out travels as its error, so that the writer, which sees the
	// samples in order, counts them.
	type packed struct {
		s   loaders.Sample
		err error
	}
	encoded := pipeline.Map(p, "encode", src, func(ctx context.Context, i int) (packed, error) {
		s, err := pk.pack(ctx, ds, i)
		if err != nil && pk.policy == loaders.Skip && ctx.Err() == nil {
			return packed{err: err}, nil
		}
		return packed{s: s}, err
	}, pipeline.Workers(pk.workers), pipeline.Ordered(true))
	pipeline.Sink(p, "write", encoded, func(_ context.Context, s packed) error {
		pk.bar.Add(1)
		if s.err != nil {
			pk.skipped++
			pk.lastSkipped = s.err
			if pk.maxSkipped > 0 && pk.skipped > pk.maxSkipped {
				return fmt.Errorf("more than --max-skipped %d bad samples; the last: %w", pk.maxSkipped, s.err)
			}
			return nil
		}
		return w.Write(s.s)
	})
	return packCause(p.Run(ctx))
}

func (pk *packer) pack(ctx context.Context, ds loaders.Dataset, i int) (loaders.Sample, error) {
	s, err := ds.Sample(ctx, i)
	if err != nil {
		return loaders.Sample{}, err
	}
	fail := func(err error) (loaders.Sample, error) {
		return loaders.Sample{}, &loaders.SampleError{Dataset: pk.name, Index: i, Key: s.Key, Err: err}
	}
	in := s.Input
	var w, h, c int
	if in.Encoded != nil {
		info, err := transforms.DecodeInfo(in.Encoded)
		if err != nil {
			return fail(err)
		}
		// Header bombs are refused before anything is allocated for them.
		if err := transforms.Compose().Admit(info); err != nil {
			return fail(err)
		}
		w, h, c = info.Width, info.Height, 3
		if pk.format == "jpeg" && info.Format == "jpeg" && info.Orientation == 1 && fits(w, h, pk.maxSide) {
			// Passed through, but only once it decodes whole: a truncated JPEG is refused here,
			// not at training time.
			if err := validate(in); err != nil {
				return fail(err)
			}
			return loaders.Sample{Input: transforms.Input{Encoded: in.Encoded}, Label: s.Label, Key: s.Key}, nil
		}
	} else {
		w, h, c = in.W, in.H, min(in.C, 3)
		if w <= 0 || h <= 0 || int64(w)*int64(h) > transforms.DefaultMaxPixels {
			return fail(fmt.Errorf("%dx%d pixels (limit %d): %w", w, h, transforms.DefaultMaxPixels, transforms.ErrTooLarge))
		}
	}
	ow, oh := bound(w, h, pk.maxSide)
	var tf *transforms.Chain
	if ow != w || oh != h {
		tf = transforms.Compose(transforms.ResizeTo(oh, ow))
	} else {
		tf = transforms.Compose()
	}
	px := make([]byte, oh*ow*c)
	if err := decode(tf, px, in); err != nil {
		return fail(err)
	}
	if pk.format == "raw" {
		return loaders.Sample{Input: transforms.Input{Pixels: px, H: oh, W: ow, C: c}, Label: s.Label, Key: s.Key}, nil
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, hwcImage(px, ow, oh, c), &jpeg.Options{Quality: jpegQuality}); err != nil {
		return fail(err)
	}
	return loaders.Sample{Input: transforms.Input{Encoded: buf.Bytes()}, Label: s.Label, Key: s.Key}, nil
}

// validate decodes a whole JPEG (into a small output, at the decoder's reduced scale) to prove that
// it is complete: the entropy-coded data is read to its end whatever the scale.
func validate(in transforms.Input) error {
	px := make([]byte, 3*8*8)
	return decode(transforms.Compose(transforms.ResizeTo(8, 8)), px, in)
}

// decode writes in's pixels through tf into dst as HWC. The Worker is made per sample: sizes vary
// from image to image, and a Worker serves one pipeline.
func decode(tf *transforms.Chain, dst []byte, in transforms.Input) error {
	return tf.NewWorker().ApplyLayout(dst, transforms.HWC, in, nil) // the transforms here are deterministic
}

// fits reports whether a w x h image needs no shrinking for maxSide (0: no bound).
func fits(w, h, maxSide int) bool { return maxSide == 0 || max(w, h) <= maxSide }

// bound returns w x h shrunk so that the longer side is maxSide, keeping the aspect ratio (each
// side at least 1 pixel), or unchanged when it fits.
func bound(w, h, maxSide int) (int, int) {
	if fits(w, h, maxSide) {
		return w, h
	}
	long := max(w, h)
	sw := max(1, (w*maxSide+long/2)/long)
	sh := max(1, (h*maxSide+long/2)/long)
	return sw, sh
}

// hwcImage wraps HWC pixels (1 or 3 channels) as an image for the JPEG encoder.
func hwcImage(px []byte, w, h, c int) image.Image {
	if c == 1 {
		return &image.Gray{Pix: px, Stride: w, Rect: image.Rect(0, 0, w, h)}
	}
	rgba := image.NewRGBA(image.Rect(0, 0, w, h))
	for i, j := 0, 0; i < len(px); i, j = i+3, j+4 {
		rgba.Pix[j], rgba.Pix[j+1], rgba.Pix[j+2], rgba.Pix[j+3] = px[i], px[i+1], px[i+2], 255
	}
	return rgba
}

// createPackDir takes out for a pack of this command's shards (see packdir.Create).
func createPackDir(out string, overwrite bool) (*packdir.Dir, error) {
	prefixes := []string{shardPrefix} // and the shards of packs before splits
	for _, s := range []string{"train", "val", "test"} {
		prefixes = append(prefixes, shardPrefix+s+"-")
	}
	return packdir.Create(out, packdir.Options{Prefixes: prefixes, Index: datasets.IndexName, IsShard: datasets.IsShardName, Overwrite: overwrite})
}
