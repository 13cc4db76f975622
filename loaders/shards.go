package loaders

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/loaders/internal/remote"
	"github.com/stoke-ml/stoke/transforms"
)

// Shards is a dataset of WebDataset tar shards (plain, gzip or zstd compressed, recognised by their
// first bytes), for random access. Opening scans every shard once: the headers of a plain tar
// (skipping member data) and its small label members. A compressed shard is decompressed once, as
// a stream, into an unnamed temporary file (in os.TempDir, removed from the folder at once, so
// that even a killed process leaves nothing behind) and then read like a plain tar: memory stays
// bounded whatever the shard's size, random access costs one read per sample, and every shard
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
	files   []shardFile
	remote  *remoteShards
	paths   []string
	shard   []int32 // shard of each sample
	metas   []sampleMeta
	classes int
}

var (
	_ Dataset   = (*Shards)(nil)
	_ Describer = (*Shards)(nil)
)

// OpenShards opens the shards at paths, in that order (samples are numbered across them): local
// files, or URLs read as the zero Opener reads them. Errors name the shard. NumClasses is one more
// than the largest label seen. Close the dataset when done.
//
// A shard in a folder that holds an index.json (written by ShardWriter and stoke pack) must be
// listed in it with the sample count and file size found; a folder whose pack is unfinished
// (its lock file is still there: the pack runs, failed or was killed) is refused. Both errors wrap
// ErrCorrupt.
func OpenShards(name string, paths []string) (*Shards, error) {
	return Opener{}.OpenShards(name, paths)
}

func (o Opener) openShards(ctx context.Context, name string, src shardList) (*Shards, error) {
	paths := src.paths
	if len(paths) == 0 {
		return nil, fmt.Errorf("loaders: shards %s: no shard files: %w", name, ErrEmpty)
	}
	rs, err := o.newRemoteShards(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("loaders: shards %s: %w", name, err)
	}
	s := &Shards{name: name, paths: paths, remote: rs}
	idx := map[string]*shardIndex{} // by folder; nil when it has none
	for i, p := range paths {
		if err := s.scan(ctx, i, p, src.nsamples[i], idx); err != nil {
			s.Close()
			return nil, fmt.Errorf("loaders: shards %s: shard %s: %w", name, p, err)
		}
	}
	if len(s.metas) == 0 {
		s.Close()
		return nil, fmt.Errorf("loaders: shards %s: %d shard files (%s ...): %w", name, len(paths), paths[0], ErrEmpty)
	}
	for _, m := range s.metas {
		if m.labelErr == nil && m.label >= s.classes {
			s.classes = m.label + 1
		}
	}
	return s, nil
}

// OpenShardIndex opens the shards that an index.json (WebDataset's "wids-shard-index-v1", as
// ShardWriter and stoke pack write it) lists, with their URLs relative to it, checking that each
// holds the samples and bytes the index promises. dir may be the index file or its folder.
func OpenShardIndex(path string) (*Shards, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, IndexName)
	}
	ctx := context.Background()
	src, err := listIndexShards(ctx, path)
	if err != nil {
		return nil, err
	}
	return Opener{}.openShards(ctx, filepath.Dir(path), src)
}

func (s *Shards) scan(ctx context.Context, shard int, path string, listed int, idx map[string]*shardIndex) error {
	fh, want, err := s.open(ctx, shard, path, idx)
	if err != nil {
		return err
	}
	if listed >= 0 {
		want = listed // the index that named this shard, wherever the shard lies
	}
	var magic [4]byte
	n, _ := io.ReadFull(fh, magic[:])
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		fh.Close()
		return err
	}
	size := fh.Size()
	if n == 4 && (magic[0] == 0x1f && magic[1] == 0x8b || bytes.Equal(magic[:], []byte{0x28, 0xb5, 0x2f, 0xfd})) {
		tmp, n, err := spill(fh, expansionLimit(size))
		fh.Close()
		if err != nil {
			return err
		}
		fh, size = localShard{tmp, n}, n
	}
	s.files = append(s.files, fh)
	before := len(s.metas)
	// Plain tar: archive/tar skips member data by seeking, so the file position right after Next is
	// the member's data offset.
	pos := func() int64 { p, _ := fh.Seek(0, io.SeekCurrent); return p }
	err = scanTar(fh, size, pos, func(m sampleMeta) error {
		s.shard = append(s.shard, int32(shard))
		s.metas = append(s.metas, m)
		return nil
	})
	if err == nil && want >= 0 && len(s.metas)-before != want {
		err = fmt.Errorf("%d samples, %s says %d: %w", len(s.metas)-before, IndexName, want, ErrCorrupt)
	}
	return err
}

// open opens shard i, remote or local, with the sample count its index promises (-1: no index).
func (s *Shards) open(ctx context.Context, shard int, path string, idx map[string]*shardIndex) (shardFile, int, error) {
	if remote.IsURL(path) {
		return s.remote.open(ctx, shard)
	}
	dir := filepath.Dir(path)
	if _, err := os.Lstat(filepath.Join(dir, PackLockName)); err == nil {
		return nil, 0, fmt.Errorf("%s holds %s: a pack into it is running, failed or was interrupted; pack again (stoke pack --overwrite): %w", dir, PackLockName, ErrCorrupt)
	}
	ix, seen := idx[dir]
	if !seen {
		var err error
		if ix, err = readShardIndex(filepath.Join(dir, IndexName)); errors.Is(err, os.ErrNotExist) {
			ix = nil
		} else if err != nil {
			return nil, 0, err
		}
		idx[dir] = ix
	}
	var want *shardEntry
	if ix != nil {
		base := filepath.Base(path)
		for i := range ix.ShardList {
			if filepath.Base(filepath.FromSlash(ix.ShardList[i].URL)) == base {
				want = &ix.ShardList[i]
			}
		}
		if want == nil {
			return nil, 0, fmt.Errorf("not listed in %s (a file of another pack?): %w", filepath.Join(dir, IndexName), ErrCorrupt)
		}
	}
	fh, st, err := openRegular(path)
	if err != nil {
		return nil, 0, err
	}
	if want == nil {
		return localShard{fh, st.Size()}, -1, nil
	}
	if want.FileSize != st.Size() {
		fh.Close()
		return nil, 0, fmt.Errorf("%d bytes, %s says %d: %w", st.Size(), IndexName, want.FileSize, ErrCorrupt)
	}
	return localShard{fh, st.Size()}, want.NSamples, nil
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
		if errors.Is(err, ErrCorrupt) {
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
	if err != nil && err != io.EOF && !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return n, err
}

// Close closes the shard files. Samples read before stay valid.
func (s *Shards) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	if s.remote != nil {
		errs = append(errs, s.remote.Close())
	}
	return errors.Join(errs...)
}

// Len returns the number of samples in all shards.
func (s *Shards) Len() int { return len(s.metas) }

// Info names the dataset; NumClasses is one more than the largest label found.
func (s *Shards) Info() Info { return Info{Name: s.name, NumClasses: s.classes} }

// Sample returns sample i, whose Key is "SHARD:KEY"; its payload is a new slice read from the
// shard.
func (s *Shards) Sample(_ context.Context, i int) (Sample, error) {
	if err := checkIndex(s.name, i, len(s.metas)); err != nil {
		return Sample{}, err
	}
	m := s.metas[i]
	sh := s.shard[i]
	key := s.paths[sh] + ":" + m.key
	if m.labelErr != nil {
		return Sample{}, &SampleError{s.name, i, key, m.labelErr}
	}
	if err := checkLabel(s.name, i, key, m.label, s.classes); err != nil {
		return Sample{}, err
	}
	if m.n > maxFileBytes {
		return Sample{}, &SampleError{s.name, i, key, fmt.Errorf(".%s member of %d bytes exceeds %d: %w", m.payload, m.n, maxFileBytes, ErrCorrupt)}
	}
	b := make([]byte, m.n)
	if _, err := s.files[sh].ReadAt(b, m.off); err != nil {
		return Sample{}, &SampleError{s.name, i, key, err}
	}
	out := Sample{Label: m.label, Key: key}
	if m.payload == "raw" {
		out.Input = transforms.Input{Pixels: b, H: m.shape[0], W: m.shape[1], C: m.shape[2]}
	} else {
		out.Input.Encoded = b
	}
	return out, nil
}
