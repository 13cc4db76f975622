package datasets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/stoke-ml/stoke/internal/packdir"
	"github.com/stoke-ml/stoke/internal/remote"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// Shards is a dataset of WebDataset tar shards (plain, gzip or zstd compressed, recognised by their
// first bytes), for random access.
//
// A shard that the index of its pack locates sample by sample (index.json as ShardWriter and stoke
// pack write it: the byte size of each sample's run of members) is not read when opened: reading a
// sample is one read of its run, a pread for a local shard and one ranged GET for a remote one, and
// a sample whose bytes are damaged fails when it is read, naming it. Other shards (older indexes,
// other writers, no index) are scanned once when opened: the headers of a plain tar (skipping
// member data) and its small label members.
//
// A remote compressed shard that the index lists with its frames, read without a cache, is read
// sample by sample too: one ranged GET of the frames that hold the sample. Any other compressed
// shard is decompressed once, as a stream, into an unnamed temporary file (in
// os.TempDir, removed from the folder at once, so that even a killed process leaves nothing behind)
// and then read like a plain tar: memory stays bounded whatever the shard's size, and every shard
// ever written (by any pack, by Python's webdataset, gzip or zstd) reads the same way. The
// temporary file takes the shard's decompressed size on disk (at most 100 times the shard and
// 64 GiB) until Close.
//
// Only regular files are read (symbolic links resolved): a FIFO or a device is an error wrapping
// ErrNotRegular. A tar must end with its end-of-archive marker, so that a shard cut at a member
// boundary is an error, not a smaller dataset; and shards of a folder written by stoke pack are
// checked against its index.json (see OpenShards).
//
// Each sample needs one image member (.jpg .jpeg .png .webp .gif .bmp) or a .raw member of uint8
// pixels with a .json member {"shape": [H, W, C]}, and a label: a .cls (or .cls.txt, .label,
// .index) member with a decimal integer, or "label" in the .json member. Every Sample returns a
// new payload slice, read from the file.
type Shards struct {
	name    string
	shards  []*shardData
	starts  []int // first sample of each shard, then Len()
	remote  *remoteShards
	paths   []string
	classes int
}

// shardData is one opened shard: the samples a scan found (metas), or the runs its index gives.
type shardData struct {
	path  string
	metas []sampleMeta // a scanned shard's samples
	// ends is an indexed shard's: sample k's run is the bytes from ends[k-1] (0 for k = 0) to ends[k].
	ends []int64

	mu   sync.Mutex
	file shardFile
	// open opens an indexed shard on its first read (one read through a cache); nil once opened.
	open func(ctx context.Context) (shardFile, error)
	err  error // of open, returned to every later read
}

var (
	_ loaders.Dataset   = (*Shards)(nil)
	_ loaders.Describer = (*Shards)(nil)
)

// OpenShards opens the shards at paths, in that order (samples are numbered across them): local
// files, or URLs read as the zero Opener reads them, whatever split an index gives them. Errors name the shard. NumClasses is one more
// than the largest label seen (or, for indexed shards, that the index gives). Close the dataset
// when done.
//
// A shard in a folder that holds an index.json (written by ShardWriter and stoke pack) must be
// listed in it with the sample count and file size found; a folder whose pack is unfinished
// (its lock file is still there: the pack runs, failed or was killed) is refused. Both errors wrap
// ErrCorrupt.
func OpenShards(name string, paths []string) (*Shards, error) {
	return Opener{}.OpenShards(name, paths)
}

// openShards opens the shards of src of split ("": every shard, whatever its split).
func (o Opener) openShards(ctx context.Context, name string, src shardList, split string) (*Shards, error) {
	if len(src.paths) == 0 {
		return nil, fmt.Errorf("datasets: shards %s: no shard files: %w", name, loaders.ErrEmpty)
	}
	if err := src.findEntries(ctx); err != nil {
		return nil, fmt.Errorf("datasets: shards %s: %w", name, err)
	}
	if split != "" {
		var err error
		if src, err = src.only(name, split); err != nil {
			return nil, err
		}
	}
	paths := src.paths
	rs, err := o.newRemoteShards(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("datasets: shards %s: %w", name, err)
	}
	s := &Shards{name: name, paths: paths, remote: rs}
	n := 0
	for i, p := range paths {
		sh, err := s.openShard(ctx, i, p, src.entries[i])
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("datasets: shards %s: shard %s: %w", name, p, err)
		}
		s.shards = append(s.shards, sh)
		s.starts = append(s.starts, n)
		n += sh.len()
	}
	s.starts = append(s.starts, n)
	if n == 0 {
		s.Close()
		return nil, fmt.Errorf("datasets: shards %s: %d shard files (%s ...): %w", name, len(paths), paths[0], loaders.ErrEmpty)
	}
	return s, nil
}

// OpenShardIndex opens the shards that an index.json (WebDataset's "wids-shard-index-v1", as
// ShardWriter and stoke pack write it) lists, with their URLs relative to it, checking that each
// holds the samples and bytes the index promises. dir may be the index file or its folder. It
// opens every shard listed, whatever its split: Open("shards:DIR", split) opens one split's.
func OpenShardIndex(path string) (*Shards, error) {
	return OpenShardIndexContext(context.Background(), path)
}

// OpenShardIndexContext is OpenShardIndex with ctx bounding the index's download and the requests
// that opening the shards makes.
func OpenShardIndexContext(ctx context.Context, path string) (*Shards, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, IndexName)
	}
	src, err := listIndexShards(ctx, path)
	if err != nil {
		return nil, err
	}
	return Opener{}.openShards(ctx, filepath.Dir(path), src, "")
}

func (sh *shardData) len() int {
	if sh.ends != nil {
		return len(sh.ends)
	}
	return len(sh.metas)
}

// openShard opens shard i: through its index entry (nil without one) when it locates the samples,
// else by a scan.
func (s *Shards) openShard(ctx context.Context, i int, path string, entry *shardEntry) (*shardData, error) {
	sh := &shardData{path: path}
	if entry != nil && entry.indexed() {
		var end int64
		sh.ends = make([]int64, len(entry.Sizes))
		for k, n := range entry.Sizes {
			end += n
			sh.ends[k] = end
		}
		s.classes = max(s.classes, entry.Classes)
		if remote.IsURL(path) && s.remote.cached(i) {
			// The first read downloads the shard into the cache, and the next ones after it.
			sh.open = func(ctx context.Context) (shardFile, error) { return s.openIndexed(ctx, i, path, entry, end) }
			return sh, nil
		}
		var err error
		sh.file, err = s.openIndexed(ctx, i, path, entry, end)
		return sh, err
	}
	fh, err := s.openFile(ctx, i, path, entry)
	if err != nil {
		return nil, err
	}
	sh.file = fh
	if fh, err = decompressed(fh); err != nil {
		return nil, err
	}
	sh.file = fh
	// Plain tar: archive/tar skips member data by seeking, so the file position right after Next is
	// the member's data offset.
	pos := func() int64 { p, _ := fh.Seek(0, io.SeekCurrent); return p }
	err = scanTar(fh, fh.Size(), pos, func(m sampleMeta) error {
		sh.metas = append(sh.metas, m)
		if m.labelErr == nil && m.label >= s.classes {
			s.classes = m.label + 1
		}
		return nil
	})
	if err == nil && entry != nil && len(sh.metas) != entry.NSamples {
		err = fmt.Errorf("%d samples, %s says %d: %w", len(sh.metas), IndexName, entry.NSamples, loaders.ErrCorrupt)
	}
	return sh, err
}

// openIndexed opens an indexed shard, whose runs end at end, and checks that they fit in its tar: a
// remote compressed one without a cache is read through its frames when the index lists them;
// others are decompressed whole (see Shards).
func (s *Shards) openIndexed(ctx context.Context, i int, path string, entry *shardEntry, end int64) (shardFile, error) {
	fh, err := s.openFile(ctx, i, path, entry)
	if err != nil {
		return nil, err
	}
	if entry.Frames != nil && remote.IsURL(path) && !s.remote.cached(i) {
		// Read frame by frame. A local shard is decompressed once instead: a sample of a few KB
		// would cost the decompression of its whole frame (MNIST: 2.8 times the CPU of an epoch).
		fh = framedFile{fh, newFrameTable(entry.Frames)}
	} else if fh, err = decompressed(fh); err != nil {
		return nil, err
	}
	if end+tarEOFMarker > fh.Size() {
		fh.Close()
		return nil, fmt.Errorf("the samples' runs in %s end at byte %d, past the tar's %d bytes and its end marker: %w",
			IndexName, end, fh.Size(), loaders.ErrCorrupt)
	}
	// ShardWriter ends the tar with the marker right after the last run: bytes between them would
	// be members (samples) that the index does not list, a dataset quietly smaller than the shard.
	if end+tarEOFMarker < fh.Size() {
		fh.Close()
		return nil, fmt.Errorf("the samples' runs in %s end at byte %d, but the tar holds %d bytes: "+
			"%d bytes before its end marker that no listed sample covers: %w",
			IndexName, end, fh.Size(), fh.Size()-end-tarEOFMarker, loaders.ErrCorrupt)
	}
	return fh, nil
}

// decompressed returns a plain tar of fh: fh itself, or, when it is compressed (by its first
// bytes), its contents decompressed into an unnamed temporary file; fh is closed then, and on error.
// A remote shard named .tar is taken for a plain tar without asking for its first bytes.
func decompressed(fh shardFile) (shardFile, error) {
	if r, ok := fh.(*remote.File); ok && strings.HasSuffix(r.Object().URL, ".tar") {
		return fh, nil
	}
	var magic [4]byte
	n, _ := fh.ReadAt(magic[:], 0)
	if n == 4 && (magic[0] == 0x1f && magic[1] == 0x8b || bytes.Equal(magic[:], []byte{0x28, 0xb5, 0x2f, 0xfd})) {
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			fh.Close()
			return nil, err
		}
		tmp, n, err := spill(fh, expansionLimit(fh.Size()))
		fh.Close()
		if err != nil {
			return nil, err
		}
		return localShard{tmp, n}, nil
	}
	return fh, nil
}

// localEntry returns the index entry of a shard: the one it was listed through, or the one of the
// index.json in its folder, local or remote (nil when the folder has none, or a server answers 404
// for it; idx caches the folders' indexes). A shard missing from its folder's index, and a local
// folder whose pack is unfinished, are errors.
func localEntry(ctx context.Context, path string, listed *shardEntry, idx map[string]*shardIndex) (*shardEntry, error) {
	dir, base, index := shardFolder(path)
	if !remote.IsURL(path) {
		if _, err := os.Lstat(filepath.Join(dir, packdir.LockName)); err == nil {
			return nil, fmt.Errorf("%s holds %s: a pack into it is running, failed or was interrupted; pack again (stoke pack --overwrite): %w",
				dir, packdir.LockName, loaders.ErrCorrupt)
		}
	}
	if listed != nil {
		return listed, nil // the index that named this shard, wherever the shard lies
	}
	ix, seen := idx[dir]
	if !seen {
		var err error
		ix, err = readIndex(ctx, index)
		// S3 answers 403 for a missing key to a user who may not list the bucket.
		se, _ := errors.AsType[*remote.StatusError](err)
		if errors.Is(err, os.ErrNotExist) || remote.NotFound(err) || se != nil && se.Status == http.StatusForbidden {
			ix = nil
		} else if err != nil {
			return nil, err
		}
		idx[dir] = ix
	}
	if ix == nil {
		return nil, nil
	}
	var want *shardEntry
	for i := range ix.ShardList {
		// The entry of this file: "sub/NAME" names another file, in a subfolder.
		if filepath.Clean(filepath.FromSlash(ix.ShardList[i].URL)) == base {
			want = &ix.ShardList[i]
		}
	}
	if want == nil {
		if remote.IsURL(path) {
			// A brace list may name a file that does not exist: that is the error to give.
			if _, err := client.Stat(ctx, path); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("not listed in %s (a file of another pack?): %w", index, loaders.ErrCorrupt)
	}
	return want, nil
}

// openFile opens shard i, remote or local, checking a local one's size against its index entry.
func (s *Shards) openFile(ctx context.Context, i int, path string, entry *shardEntry) (shardFile, error) {
	if remote.IsURL(path) {
		return s.remote.open(ctx, i)
	}
	fh, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	if entry != nil && entry.FileSize != st.Size() {
		fh.Close()
		return nil, fmt.Errorf("%d bytes, %s says %d: %w", st.Size(), IndexName, entry.FileSize, loaders.ErrCorrupt)
	}
	return localShard{fh, st.Size()}, nil
}

// spill decompresses r into an unnamed temporary file, refusing more than limit bytes, and returns
// it with its size.
func spill(r io.Reader, limit int64) (*os.File, int64, error) {
	zr, closeFn, err := decompress(r)
	if err != nil {
		return nil, 0, err
	}
	defer closeFn()
	tmp, err := os.CreateTemp("", "stoke-shard-*.tar")
	if err != nil {
		return nil, 0, fmt.Errorf("decompressing: %w", err)
	}
	// Unnamed from now on: the space returns to the system when the file is closed, or the
	// process ends however it ends.
	os.Remove(tmp.Name())
	n, err := io.Copy(tmp, corruptReader{&boundedReader{r: zr, left: limit, limit: limit}})
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		tmp.Close()
		if errors.Is(err, loaders.ErrCorrupt) {
			return nil, 0, fmt.Errorf("compressed shard: %w", err)
		}
		return nil, 0, fmt.Errorf("decompressing into %s: %w", os.TempDir(), err)
	}
	return tmp, n, nil
}

// corruptReader marks the errors of a decompressor (other than its end) as corrupt data, so that
// they are told apart from the errors of writing.
type corruptReader struct{ r io.Reader }

func (c corruptReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	// The store's failures (a 412, 404 or 500 under the decompressor) are what the server said,
	// not bad data.
	if err != nil && err != io.EOF && !errors.Is(err, loaders.ErrCorrupt) && !remote.IsStorage(err) {
		err = fmt.Errorf("%w: %w", loaders.ErrCorrupt, err)
	}
	return n, err
}

// Close closes the shard files. Samples read before stay valid.
func (s *Shards) Close() error {
	var errs []error
	for _, sh := range s.shards {
		sh.mu.Lock()
		if sh.file != nil {
			errs = append(errs, sh.file.Close())
		}
		sh.file, sh.open, sh.err = nil, nil, os.ErrClosed
		sh.mu.Unlock()
	}
	if s.remote != nil {
		errs = append(errs, s.remote.Close())
	}
	return errors.Join(errs...)
}

// Len returns the number of samples in all shards.
func (s *Shards) Len() int { return s.starts[len(s.starts)-1] }

// Info names the dataset; NumClasses is one more than the largest label found.
func (s *Shards) Info() loaders.Info { return loaders.Info{Name: s.name, NumClasses: s.classes} }

// shardOf returns the shard that holds sample i and its place in it.
func (s *Shards) shardOf(i int) (*shardData, int) {
	k := sort.SearchInts(s.starts, i+1) - 1
	return s.shards[k], i - s.starts[k]
}

// fileOf returns the shard's file, opening it on the first read of an indexed shard (an open that
// ctx ended is tried again by the next read).
func (sh *shardData) fileOf(ctx context.Context) (shardFile, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.open != nil {
		fh, err := sh.open(ctx)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		sh.file, sh.err, sh.open = fh, err, nil
		if sh.err != nil {
			sh.err = fmt.Errorf("shard %s: %w", sh.path, sh.err)
		}
	}
	return sh.file, sh.err
}

// readAtContext reads a shard's bytes like fh.ReadAt, ending with ctx when fh is remote (a remote
// file, or a remote one read through its frames).
func readAtContext(ctx context.Context, fh shardFile, p []byte, off int64) (int, error) {
	switch f := fh.(type) {
	case *remote.File:
		return f.ReadAtContext(ctx, p, off)
	case framedFile:
		if rf, ok := f.shardFile.(*remote.File); ok {
			if err := f.frames.readAt(remoteAt{ctx, rf}, p, off); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return fh.ReadAt(p, off)
}

// remoteAt is a remote file's ReadAt under a context.
type remoteAt struct {
	ctx context.Context
	f   *remote.File
}

func (r remoteAt) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAtContext(r.ctx, p, off) }

// readErr marks a failure of the store (see remote.IsStorage) with ErrStorage, so that the Skip
// policy does not take an outage for bad samples; ctx's end is returned as it is.
func readErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ctx.Err()
	}
	if remote.IsStorage(err) && !errors.Is(err, loaders.ErrStorage) {
		return fmt.Errorf("%w: %w", loaders.ErrStorage, err)
	}
	return err
}

// Sample returns sample i, whose Key is "SHARD:KEY"; its payload is a new slice read from the
// shard. A remote read ends when ctx does; a failure of the store (an HTTP status, retries run
// out, an object replaced meanwhile) wraps ErrStorage.
func (s *Shards) Sample(ctx context.Context, i int) (loaders.Sample, error) {
	if err := loaders.CheckIndex(s.name, i, s.Len()); err != nil {
		return loaders.Sample{}, err
	}
	sh, j := s.shardOf(i)
	if sh.ends != nil {
		return s.indexedSample(ctx, sh, i, j)
	}
	m := sh.metas[j]
	key := sh.path + ":" + m.key
	if m.labelErr != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key, Err: m.labelErr}
	}
	if err := loaders.CheckLabel(s.name, i, key, m.label, s.classes); err != nil {
		return loaders.Sample{}, err
	}
	if m.n > maxFileBytes {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key,
			Err: fmt.Errorf(".%s member of %d bytes exceeds %d: %w", m.payload, m.n, maxFileBytes, loaders.ErrCorrupt)}
	}
	b := make([]byte, m.n)
	fh, err := sh.fileOf(ctx)
	if err == nil {
		_, err = readAtContext(ctx, fh, b, m.off)
	}
	if err != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key, Err: readErr(ctx, err)}
	}
	return sampleOf(m, b, key), nil
}

// indexedSample reads sample i, the j-th of an indexed shard: one read of its run of members.
func (s *Shards) indexedSample(ctx context.Context, sh *shardData, i, j int) (loaders.Sample, error) {
	var start int64
	if j > 0 {
		start = sh.ends[j-1]
	}
	n := sh.ends[j] - start
	key := fmt.Sprintf("%s:#%d", sh.path, j) // until the run names the sample
	if n > maxFileBytes {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key,
			Err: fmt.Errorf("run of %d bytes at offset %d exceeds %d: %w", n, start, maxFileBytes, loaders.ErrCorrupt)}
	}
	fh, err := sh.fileOf(ctx)
	if err != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key, Err: readErr(ctx, err)}
	}
	b := make([]byte, n)
	if _, err := readAtContext(ctx, fh, b, start); err != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key, Err: readErr(ctx, err)}
	}
	m, err := parseRun(b)
	if err != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key,
			Err: fmt.Errorf("bytes %d-%d (its run in %s): %w", start, start+n-1, IndexName, err)}
	}
	key = sh.path + ":" + m.key
	if m.labelErr != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: s.name, Index: i, Key: key, Err: m.labelErr}
	}
	if err := loaders.CheckLabel(s.name, i, key, m.label, s.classes); err != nil {
		return loaders.Sample{}, err
	}
	return sampleOf(m, b[m.off:m.off+m.n:m.off+m.n], key), nil
}

// sampleOf makes the sample of m with payload b.
func sampleOf(m sampleMeta, b []byte, key string) loaders.Sample {
	out := loaders.Sample{Label: m.label, Key: key}
	if m.payload == "raw" {
		out.Input = transforms.Input{Pixels: b, H: m.shape[0], W: m.shape[1], C: m.shape[2]}
	} else {
		out.Input.Encoded = b
	}
	return out
}
