package datasets

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/loaders"
)

// Defaults of ShardWriterConfig.
const (
	DefaultShardSamples = 10000
	DefaultShardBytes   = 1 << 30
)

// ShardWriterConfig says where and how a ShardWriter writes. The zero value of each field selects
// its default.
type ShardWriterConfig struct {
	// Pattern names the shards: a path with one integer verb, e.g. "out/train-%06d.tar". Its
	// suffix selects the compression: ".tar" none, ".tar.gz" or ".tgz" gzip, ".tar.zst" zstd.
	// A writer of several splits (BeginSplit) may name each split's shards with a %s verb before
	// the integer one, which takes the split's name, each split's shards numbered from 0
	// ("out/shard-%s-%06d.tar": shard-train-000000.tar, ..., shard-val-000000.tar); without
	// one, the numbers go on from split to split.
	Pattern string
	// MaxSamples starts a new shard after this many samples (default DefaultShardSamples).
	MaxSamples int
	// MaxBytes starts a new shard once this many payload bytes were written to the current one
	// (default DefaultShardBytes); a shard holds at least one sample whatever its size.
	MaxBytes int64
	// Index is the path of the index written by Close (default: IndexName next to the shards),
	// in the format of WebDataset's wids ("wids-shard-index-v1"), with shard URLs relative to it,
	// and Stoke's fields that locate each sample (readers that do not know them ignore them):
	//
	//	{"url":"shard-000000.tar.zst","nsamples":10000,"filesize":2039382,"classes":10,
	//	 "sizes":[3584,3584,...],"frames":[[3822,68096],[3857,68096],...]}
	//
	// sizes: the bytes of each sample's run of tar members in order (5 to 7 bytes of JSON per
	// sample); classes: one more than the shard's largest label; frames (compressed shards): the
	// bytes of each independent frame in the file and of tar it holds; split (see BeginSplit): the
	// shard's split, absent for a writer of one split. A wids reader, which does not know split,
	// reads every split's shards as one list: give it one split's shards by name.
	Index string
}

// Validate reports whether NewShardWriter accepts c. It only checks: it changes nothing (the zero
// value of a field selects its default, which WithDefaults fills in).
func (c ShardWriterConfig) Validate() error {
	verbs := 1 // the integer, and the split's %s if first
	if splitVerb(c.Pattern) {
		verbs = 2
	}
	if c.Pattern == "" || strings.Count(strings.ReplaceAll(c.Pattern, "%%", ""), "%") != verbs {
		return fmt.Errorf("datasets: shard writer: pattern %q needs exactly one integer verb such as %%06d (and may have one %%s before it for the split): %w",
			c.Pattern, loaders.ErrConfig)
	}
	if _, err := shardCompression(c.Pattern); err != nil {
		return err
	}
	if c.MaxSamples < 0 || c.MaxBytes < 0 {
		return fmt.Errorf("datasets: shard writer: negative MaxSamples %d or MaxBytes %d: %w", c.MaxSamples, c.MaxBytes, loaders.ErrConfig)
	}
	return nil
}

// WithDefaults returns c with the default of each zero field filled in, as NewShardWriter uses
// it: MaxSamples DefaultShardSamples, MaxBytes DefaultShardBytes, Index the IndexName beside the
// shards. It does not validate c.
func (c ShardWriterConfig) WithDefaults() ShardWriterConfig {
	if c.MaxSamples == 0 {
		c.MaxSamples = DefaultShardSamples
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultShardBytes
	}
	if c.Index == "" {
		c.Index = filepath.Join(filepath.Dir(c.Pattern), IndexName)
	}
	return c
}

// splitVerb reports whether pattern's first verb is a %s, for the split's name.
func splitVerb(pattern string) bool {
	p := strings.ReplaceAll(pattern, "%%", "")
	i := strings.IndexByte(p, '%')
	return i >= 0 && strings.HasPrefix(p[i:], "%s") && strings.Count(p, "%s") == 1
}

func shardCompression(pattern string) (string, error) {
	switch {
	case strings.HasSuffix(pattern, ".tar"):
		return "", nil
	case strings.HasSuffix(pattern, ".tar.gz"), strings.HasSuffix(pattern, ".tgz"):
		return "gz", nil
	case strings.HasSuffix(pattern, ".tar.zst"):
		return "zst", nil
	}
	return "", fmt.Errorf("datasets: shard writer: pattern %q must end in .tar, .tar.gz, .tgz or .tar.zst: %w", pattern, loaders.ErrConfig)
}

// IsShardName reports whether name ends in a suffix of the shards that the ShardWriter writes and
// the readers take: .tar, .tar.gz, .tgz or .tar.zst.
func IsShardName(name string) bool {
	_, err := shardCompression(name)
	return err == nil
}

// ShardWriter writes samples into WebDataset tar shards: sample number k becomes the members
// "%09d.EXT" (k) holding the encoded image under its format's extension (jpg, png, gif, bmp, webp)
// or, for raw pixels, a .raw member with a .json {"shape": [H, W, C]}, and a .cls member with the
// decimal label. Python's webdataset reads them as they are. A ShardWriter is not safe for
// concurrent use.
//
// A compressed shard is a sequence of independent frames (zstd frames or gzip members) of about
// 64 KiB of tar, cut between samples: one stream to any reader, and to Stoke, through the index,
// samples of a remote shard that read by fetching and decompressing their frames alone.
//
// Shards are written under hidden temporary names (".NAME.tmp...") and take their names only in
// Close, which writes the index last, the same way: until Close returns, nothing under the
// pattern's names reads as a dataset. Abort removes what was written.
type ShardWriter struct {
	cfg      ShardWriterConfig
	comp     string
	count    int // samples written overall
	shards   []shardEntry
	fh       *os.File
	buf      *bufio.Writer
	frames   *frameWriter // a compressed shard's
	tw       *tar.Writer
	pos      *countingWriter // the tar's (uncompressed) bytes so far in the current shard
	runStart int64           // where the next sample's run starts in it
	written  int64           // payload bytes in the current shard
	mtime    time.Time
	// split is the split being written ("" before BeginSplit), splits those begun, splitShards
	// the shards of the current one.
	split       string
	splits      []string
	splitShards int
}

// shardEntry is one shard of an index. URL, NSamples and FileSize are wids' fields; Classes and
// Sizes are Stoke's, written by ShardWriter and absent from older indexes (and from those of other
// writers), whose shards are then scanned when opened.
type shardEntry struct {
	URL      string `json:"url"`
	NSamples int    `json:"nsamples"`
	FileSize int64  `json:"filesize"`
	// Classes is one more than the largest label in the shard (0 with Sizes absent).
	Classes int `json:"classes,omitempty"`
	// Sizes locates the samples in the tar (decompressed, for a compressed shard): sample k's run
	// of members, its tar headers and padding included, is the Sizes[k] bytes that follow the runs
	// before it, from byte 0; members that belong to no sample (metadata, folders) are counted in
	// the run before them, or the first. The end-of-archive marker follows the last run and ends the tar.
	Sizes []int64 `json:"sizes,omitempty"`
	// Frames lists a compressed shard's independent frames (zstd frames or gzip members), in
	// order: the bytes of each in the file, and the bytes of tar it holds. With it a sample is
	// read by decompressing the frames that hold its run; without, the shard is decompressed whole.
	Frames [][2]int64 `json:"frames,omitempty"`
	// Split is the split the shard belongs to: train, val or test ("": the index holds one split,
	// read as train).
	Split string `json:"split,omitempty"`
	path  string // final name
	tmp   string // name while written; "" once renamed
}

// indexed reports whether the entry locates its samples (Sizes), so that the shard is read
// without a scan.
func (e *shardEntry) indexed() bool { return e.Sizes != nil }

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// IndexName is the name of the index that ShardWriter writes next to its shards by default.
const IndexName = "index.json"

// shardIndex is WebDataset's wids index ("wids-shard-index-v1").
type shardIndex struct {
	Kind      string       `json:"__kind__"`
	Version   int          `json:"wids_version"`
	Name      string       `json:"name"`
	ShardList []shardEntry `json:"shardlist"`
}

// marshal writes the index with one line per shard: readable, and as compact as JSON gets for
// the run sizes of millions of samples.
func (ix *shardIndex) marshal() ([]byte, error) {
	head, err := json.MarshalIndent(shardIndex{Kind: ix.Kind, Version: ix.Version, Name: ix.Name, ShardList: []shardEntry{}}, "", "  ")
	if err != nil {
		return nil, err
	}
	// The shard list goes where MarshalIndent put the empty one: last, before the closing brace.
	b, ok := bytes.CutSuffix(head, []byte("[]\n}"))
	if !ok {
		return nil, fmt.Errorf("unexpected encoding %q", head)
	}
	b = append(b, '[')
	for i := range ix.ShardList {
		e, err := json.Marshal(&ix.ShardList[i])
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(b, "\n    "...), e...)
	}
	if len(ix.ShardList) > 0 {
		b = append(b, "\n  "...)
	}
	return append(b, "]\n}\n"...), nil
}

// maxIndexBytes bounds an index file: 64 bytes per shard and 6 to 8 per sample (the run sizes),
// 5 million samples of 10 KB or a million shards.
const maxIndexBytes = 64 << 20

// readShardIndex reads and checks an index: shard URLs relative to it, inside its folder.
func readShardIndex(path string) (*shardIndex, error) {
	b, err := readFileLimited(path, maxIndexBytes)
	if err != nil {
		return nil, err
	}
	return parseShardIndex(path, b)
}

// parseShardIndex checks the index read from path (a file name or a URL).
func parseShardIndex(path string, b []byte) (*shardIndex, error) {
	var ix shardIndex
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, loaders.ErrCorrupt, err)
	}
	if ix.Kind != "wids-shard-index-v1" {
		return nil, fmt.Errorf("%s: __kind__ %q, want wids-shard-index-v1: %w", path, ix.Kind, loaders.ErrCorrupt)
	}
	seen := make(map[string]bool, len(ix.ShardList))
	for i := range ix.ShardList {
		e := &ix.ShardList[i]
		u := filepath.FromSlash(e.URL)
		if e.URL == "" || filepath.IsAbs(u) || !filepath.IsLocal(u) || e.NSamples < 0 || e.FileSize < 0 {
			return nil, fmt.Errorf("%s: shard entry %+v (want a relative url inside the folder, counts >= 0): %w", path, e, loaders.ErrCorrupt)
		}
		// A sample takes a tar header at least, of the tar the file holds or may expand to: so
		// that sample counts (summed over shards by streams and ranks) stay what a file can hold.
		if most := max(e.FileSize, expansionLimit(e.FileSize)) / 512; int64(e.NSamples) > most {
			return nil, fmt.Errorf("%s: shard %s: %d samples, more than a file of %d bytes holds (%d): %w", path, e.URL, e.NSamples, e.FileSize, most,
				loaders.ErrCorrupt)
		}
		if e.Split != "" && !slices.Contains(splitOrder, e.Split) {
			return nil, fmt.Errorf("%s: shard %s: split %q, want train, val or test: %w", path, e.URL, e.Split, loaders.ErrCorrupt)
		}
		if e.Classes > math.MaxInt32+1 {
			return nil, fmt.Errorf("%s: shard %s: classes %d past the int32 class ids: %w", path, e.URL, e.Classes, loaders.ErrCorrupt)
		}
		if err := errors.Join(e.checkSizes(), e.checkFrames()); err != nil {
			return nil, fmt.Errorf("%s: shard %s: %w", path, e.URL, err)
		}
		// A shard listed twice would be read twice: a dataset larger than the one packed.
		if u = filepath.Clean(u); seen[u] {
			return nil, fmt.Errorf("%s: shard %q listed twice: %w", path, e.URL, loaders.ErrCorrupt)
		}
		seen[u] = true
	}
	return &ix, nil
}

// checkSizes checks what an entry says about its samples on its own: a run for each sample, each
// at least one tar header and a whole number of 512-byte blocks, and labels to go with them. That
// the runs fit in the shard is checked when it is opened (a compressed shard's tar size is known
// only then).
func (e *shardEntry) checkSizes() error {
	if !e.indexed() {
		if e.Classes != 0 {
			return fmt.Errorf("classes %d without sample sizes: %w", e.Classes, loaders.ErrCorrupt)
		}
		return nil
	}
	if len(e.Sizes) != e.NSamples {
		return fmt.Errorf("%d sample sizes for %d samples: %w", len(e.Sizes), e.NSamples, loaders.ErrCorrupt)
	}
	if e.NSamples > 0 && e.Classes <= 0 {
		return fmt.Errorf("classes %d for %d samples: %w", e.Classes, e.NSamples, loaders.ErrCorrupt)
	}
	var sum int64
	for k, n := range e.Sizes {
		if n < 1024 || n%512 != 0 {
			return fmt.Errorf("sample %d: run of %d bytes, want a multiple of 512 holding a header and its data: %w", k, n, loaders.ErrCorrupt)
		}
		// No tar is read past this (and the sums cannot overflow).
		if sum += min(n, maxCompressedShard+1); sum > maxCompressedShard {
			return fmt.Errorf("samples 0-%d: runs of more than %d bytes: %w", k, int64(maxCompressedShard), loaders.ErrCorrupt)
		}
	}
	return nil
}

// NewShardWriter validates cfg and returns a writer; the first shard (and its folder) is created by
// the first Write.
func NewShardWriter(cfg ShardWriterConfig) (*ShardWriter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	comp, _ := shardCompression(cfg.Pattern)
	// A fixed modification time keeps shards byte-identical across runs.
	return &ShardWriter{cfg: cfg, comp: comp, mtime: time.Unix(0, 0)}, nil
}

// BeginSplit starts split name (train, val or test; valid and validation mean val): the samples
// written after it, up to the next BeginSplit or Close, are that split's, in shards of their own,
// and the index records each shard's split (see Open). Each split is begun at most once; a writer
// that never calls it writes the shards of one split, which the index leaves unnamed and readers
// take as train.
func (w *ShardWriter) BeginSplit(name string) error {
	split, err := splitName(name)
	if name == "" || err != nil {
		return fmt.Errorf("datasets: shard writer: split %q, want train, val (valid, validation) or test: %w", name, loaders.ErrConfig)
	}
	if slices.Contains(w.splits, split) {
		return fmt.Errorf("datasets: shard writer: split %s begun twice: %w", split, loaders.ErrConfig)
	}
	if w.tw != nil {
		if err := w.finishShard(); err != nil {
			return err
		}
	}
	w.split, w.splits, w.splitShards = split, append(w.splits, split), 0
	return nil
}

// Write appends one sample. Encoded images must be in a format transforms decodes; raw pixels need
// H, W, C > 0 and len(Pixels) == H*W*C. A label outside [0, math.MaxInt32] is an error.
func (w *ShardWriter) Write(s loaders.Sample) error {
	var name string
	var payload []byte
	var meta []byte
	switch in := s.Input; {
	case in.Encoded != nil:
		ext := sniffImage(in.Encoded)
		if ext == "" {
			return fmt.Errorf("datasets: shard writer: sample %d (%s): unknown image format: %w", w.count, s.Key, loaders.ErrCorrupt)
		}
		name, payload = ext, in.Encoded
	case in.H > 0 && in.W > 0 && in.C > 0 && len(in.Pixels) == in.H*in.W*in.C:
		name, payload = "raw", in.Pixels
		meta = fmt.Appendf(nil, `{"shape": [%d, %d, %d]}`, in.H, in.W, in.C)
	default:
		return fmt.Errorf("datasets: shard writer: sample %d (%s): neither encoded bytes nor %dx%dx%d pixels (%d bytes): %w", w.count, s.Key, in.H, in.W, in.C,
			len(in.Pixels), loaders.ErrCorrupt)
	}
	if s.Label < 0 || s.Label > math.MaxInt32 {
		return fmt.Errorf("datasets: shard writer: sample %d (%s): label %d, want 0 to %d: %w", w.count, s.Key, s.Label, math.MaxInt32, loaders.ErrLabel)
	}
	if w.tw != nil && (w.shards[len(w.shards)-1].NSamples >= w.cfg.MaxSamples || w.written >= w.cfg.MaxBytes) {
		if err := w.finishShard(); err != nil {
			return err
		}
	}
	if w.tw == nil {
		if err := w.startShard(); err != nil {
			return err
		}
	}
	key := fmt.Sprintf("%09d", w.count)
	members := []struct {
		ext  string
		data []byte
	}{{name, payload}, {"json", meta}, {"cls", strconv.AppendInt(nil, int64(s.Label), 10)}}
	for _, m := range members {
		if m.data == nil {
			continue
		}
		h := &tar.Header{Name: key + "." + m.ext, Mode: 0o444, Size: int64(len(m.data)), ModTime: w.mtime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := w.tw.WriteHeader(h); err != nil {
			return fmt.Errorf("datasets: shard writer: %s: %w", w.shards[len(w.shards)-1].path, err)
		}
		if _, err := w.tw.Write(m.data); err != nil {
			return fmt.Errorf("datasets: shard writer: %s: %w", w.shards[len(w.shards)-1].path, err)
		}
		w.written += int64(len(m.data))
	}
	// The padding of the last member belongs to the sample's run.
	if err := w.tw.Flush(); err != nil {
		return fmt.Errorf("datasets: shard writer: %s: %w", w.shards[len(w.shards)-1].path, err)
	}
	e := &w.shards[len(w.shards)-1]
	if w.frames != nil && len(w.frames.tar) >= frameBytes {
		if err := w.frames.cut(); err != nil {
			return fmt.Errorf("datasets: shard writer: %s: %w", e.path, err)
		}
	}
	e.Sizes = append(e.Sizes, w.pos.n-w.runStart)
	w.runStart = w.pos.n
	e.Classes = max(e.Classes, s.Label+1)
	e.NSamples++
	w.count++
	return nil
}

// sniffImage returns the file extension of an encoded image from its magic number, or "".
func sniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return "jpg"
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(b, []byte("GIF8")):
		return "gif"
	case bytes.HasPrefix(b, []byte("BM")):
		return "bmp"
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return "webp"
	}
	return ""
}

func (w *ShardWriter) startShard() error {
	path := fmt.Sprintf(w.cfg.Pattern, len(w.shards))
	if splitVerb(w.cfg.Pattern) {
		if w.split == "" {
			return fmt.Errorf("datasets: shard writer: pattern %q names a split: call BeginSplit before Write: %w", w.cfg.Pattern, loaders.ErrConfig)
		}
		path = fmt.Sprintf(w.cfg.Pattern, w.split, w.splitShards)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("datasets: shard writer: %w", err)
	}
	fh, err := os.CreateTemp(filepath.Dir(path), atomicfile.TempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("datasets: shard writer: %w", err)
	}
	if err := fh.Chmod(0o644); err != nil {
		fh.Close()
		return fmt.Errorf("datasets: shard writer: %w", err)
	}
	w.fh, w.buf, w.written = fh, bufio.NewWriterSize(fh, 1<<20), 0
	var out io.Writer = w.buf
	if w.comp != "" {
		fw, err := newFrameWriter(w.buf, w.comp)
		if err != nil {
			fh.Close()
			return fmt.Errorf("datasets: shard writer: %s: %w", path, err)
		}
		w.frames, out = fw, fw
	}
	w.pos, w.runStart = &countingWriter{w: out}, 0
	w.tw = tar.NewWriter(w.pos)
	w.shards = append(w.shards, shardEntry{path: path, tmp: fh.Name(), Sizes: []int64{}, Split: w.split})
	w.splitShards++
	return nil
}

func (w *ShardWriter) finishShard() error {
	e := &w.shards[len(w.shards)-1]
	errs := []error{w.tw.Close()}
	if w.frames != nil {
		errs = append(errs, w.frames.cut(), w.frames.Close())
		e.Frames = w.frames.frames
	}
	errs = append(errs, w.buf.Flush(), w.fh.Sync())
	if st, err := w.fh.Stat(); err == nil {
		e.FileSize = st.Size()
	}
	errs = append(errs, w.fh.Close())
	w.tw, w.frames, w.buf, w.fh = nil, nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("datasets: shard writer: %s: %w", e.path, err)
	}
	return nil
}

// Shards returns the paths of the shards written so far.
func (w *ShardWriter) Shards() []string {
	out := make([]string, len(w.shards))
	for i, e := range w.shards {
		out[i] = e.path
	}
	return out
}

// Abort stops writing and removes every file the writer created (shards under their temporary or
// final names). Use it instead of Close when the dataset is not complete.
func (w *ShardWriter) Abort() error {
	if w.tw != nil {
		w.fh.Close()
		if w.frames != nil {
			w.frames.Close()
		}
		w.tw, w.frames, w.buf, w.fh = nil, nil, nil, nil
	}
	var errs []error
	for i := range w.shards {
		e := &w.shards[i]
		for _, p := range []string{e.tmp, e.path} {
			if err := os.Remove(p); p != "" && err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	w.shards = nil
	return errors.Join(errs...)
}

// Close finishes the last shard, gives the shards their names and writes the index, last and
// under a temporary name too. Closing a writer that wrote nothing writes an index with no shards.
// After an error the files are left for Abort.
func (w *ShardWriter) Close() error {
	if w.tw != nil {
		if err := w.finishShard(); err != nil {
			return err
		}
	}
	for i := range w.shards {
		e := &w.shards[i]
		if e.tmp == "" {
			continue
		}
		if err := os.Rename(e.tmp, e.path); err != nil {
			return fmt.Errorf("datasets: shard writer: %w", err)
		}
		e.tmp = ""
	}
	base := filepath.Dir(w.cfg.Index)
	for i := range w.shards {
		rel, err := filepath.Rel(base, w.shards[i].path)
		if err != nil {
			rel = w.shards[i].path
		}
		w.shards[i].URL = filepath.ToSlash(rel)
	}
	idx := shardIndex{"wids-shard-index-v1", 1, filepath.Base(w.cfg.Pattern), w.shards}
	if idx.ShardList == nil {
		idx.ShardList = []shardEntry{}
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("datasets: shard writer: index: %w", err)
	}
	b, err := idx.marshal()
	if err != nil {
		return fmt.Errorf("datasets: shard writer: index: %w", err)
	}
	if err := atomicfile.WriteFile(w.cfg.Index, b, 0o644); err != nil {
		return fmt.Errorf("datasets: shard writer: index: %w", err)
	}
	return nil
}
