package loaders

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/loaders/internal/remote"
	"github.com/stoke-ml/stoke/transforms"
)

// Shard members are grouped into samples the way Python's WebDataset does it: the key of a member
// is its path up to the first dot of its base name, the extension the rest (lower-cased);
// consecutive members with the same key form one sample.
var (
	// imageMemberExts lists the members that hold an encoded image, in order of preference.
	imageMemberExts = []string{"jpg", "jpeg", "png", "webp", "gif", "bmp"}
	// labelMemberExts lists the members that hold a decimal class label, in order of preference.
	labelMemberExts = []string{"cls", "cls.txt", "label", "index"}
)

// A compressed shard may expand to at most maxExpansion times its file size (encoded images
// barely compress; raw pixels a few times), and never past maxCompressedShard (WebDataset shards
// are usually well under 1 GB), so that a compression bomb fails cleanly before it takes the disk;
// minCompressedLimit keeps tiny shards usable.
const (
	maxExpansion       = 100
	minCompressedLimit = 16 << 20
	maxCompressedShard = 64 << 30
)

// expansionLimit returns the most bytes a compressed shard of size bytes may expand to.
func expansionLimit(size int64) int64 {
	return min(max(maxExpansion*size, minCompressedLimit), maxCompressedShard)
}

// tarEOFMarker is the end-of-archive marker: two zero blocks. A tar without it was cut.
const tarEOFMarker = 1024

// maxSmallMember bounds the label and metadata members (.cls, .json) read into the shard index.
const maxSmallMember = 1 << 20

// splitMemberName splits a tar member name into WebDataset key and extension; ok is false for
// names without a dot in their base name and for WebDataset's "__...__" metadata members.
func splitMemberName(name string) (key, ext string, ok bool) {
	dir, base := "", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		dir, base = name[:i+1], name[i+1:]
	}
	dot := strings.IndexByte(base, '.')
	if dot <= 0 {
		return "", "", false
	}
	if dir == "" && strings.HasPrefix(base, "__") && strings.HasSuffix(base, "__") {
		return "", "", false
	}
	return dir + base[:dot], strings.ToLower(base[dot+1:]), true
}

// sampleMeta is what a shard scan learns about one sample: where its payload is, and its label.
type sampleMeta struct {
	key      string
	payload  string // extension of the image or raw member
	off, n   int64  // payload position in the (decompressed) shard
	shape    [3]int // H, W, C for a raw payload
	label    int
	labelErr error
}

// group accumulates the members of one key while a shard is read in order.
type group struct {
	key   string
	exts  []string
	offs  []int64
	sizes []int64
	small map[string][]byte
}

func (g *group) reset(key string) {
	g.key = key
	g.exts, g.offs, g.sizes = g.exts[:0], g.offs[:0], g.sizes[:0]
	clear(g.small)
}

func (g *group) find(exts []string) int {
	for _, e := range exts {
		if i := slices.Index(g.exts, e); i >= 0 {
			return i
		}
	}
	return -1
}

// meta turns a finished group into the sample's description. Errors concerning the label are kept
// in labelErr so that they surface when the sample is read (and can be skipped); a group without
// any image payload is an error of the whole shard.
func (g *group) meta() (sampleMeta, error) {
	m := sampleMeta{key: g.key}
	if i := g.find(imageMemberExts); i >= 0 {
		m.payload, m.off, m.n = g.exts[i], g.offs[i], g.sizes[i]
	} else if i := g.find([]string{"raw"}); i >= 0 {
		m.payload, m.off, m.n = "raw", g.offs[i], g.sizes[i]
		shape, err := rawShape(g.small["json"])
		if err != nil {
			m.labelErr = err
		} else if int64(shape[0])*int64(shape[1])*int64(shape[2]) != m.n {
			m.labelErr = fmt.Errorf(".raw of %d bytes but shape %v: %w", m.n, shape, ErrCorrupt)
		}
		m.shape = shape
	} else {
		return m, fmt.Errorf("sample %q has no image member (members %v): %w", g.key, g.exts, ErrCorrupt)
	}
	if m.labelErr == nil {
		m.label, m.labelErr = g.label()
	}
	return m, nil
}

func (g *group) label() (int, error) {
	for _, e := range labelMemberExts {
		if b, ok := g.small[e]; ok {
			v, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				return 0, fmt.Errorf("label member .%s %q: %w", e, truncate(b, 20), ErrCorrupt)
			}
			return v, nil
		}
	}
	if b, ok := g.small["json"]; ok {
		var v struct{ Label *int }
		if err := json.Unmarshal(b, &v); err != nil {
			return 0, fmt.Errorf("member .json: %w: %w", ErrCorrupt, err)
		}
		if v.Label != nil {
			return *v.Label, nil
		}
	}
	return 0, fmt.Errorf("no label member (.cls, .label or .json with \"label\"): %w", ErrCorrupt)
}

func rawShape(js []byte) ([3]int, error) {
	var v struct{ Shape []int }
	if js == nil {
		return [3]int{}, fmt.Errorf(".raw without a .json giving its shape: %w", ErrCorrupt)
	}
	if err := json.Unmarshal(js, &v); err != nil {
		return [3]int{}, fmt.Errorf("member .json: %w: %w", ErrCorrupt, err)
	}
	if len(v.Shape) == 2 {
		v.Shape = append(v.Shape, 1)
	}
	if len(v.Shape) != 3 || v.Shape[0] <= 0 || v.Shape[1] <= 0 || v.Shape[2] <= 0 || v.Shape[2] > 4 ||
		int64(v.Shape[0])*int64(v.Shape[1]) > 1<<32 {
		return [3]int{}, fmt.Errorf(".json shape %v, want [H, W] or [H, W, C] with C in 1..4: %w", v.Shape, ErrCorrupt)
	}
	return [3]int{v.Shape[0], v.Shape[1], v.Shape[2]}, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// scanTar reads a tar archive in order and calls emit for each complete sample. r must report its
// position through pos (the offset of the current member's data is pos() right after Next) and hold
// size bytes: a member reaching past them is truncated (skipping by seeking would not notice). Small
// members are read; the others are skipped.
func scanTar(r io.Reader, size int64, pos func() int64, emit func(sampleMeta) error) error {
	tr := tar.NewReader(r)
	g := &group{small: map[string][]byte{}}
	flush := func() error {
		if g.key == "" {
			return nil
		}
		m, err := g.meta()
		if err != nil {
			return err
		}
		return emit(m)
	}
	end := int64(0) // end of the last member's padded data
	for {
		h, err := tr.Next()
		if err == io.EOF {
			// archive/tar reports a clean end also when the archive stops at a member boundary
			// without its marker: the position tells the two apart.
			if p := pos(); p-end < tarEOFMarker {
				return fmt.Errorf("tar: no end-of-archive marker after %d bytes (the shard was cut): %w", end, ErrCorrupt)
			}
			return flush()
		}
		if err != nil {
			return fmt.Errorf("tar: %w: %w", ErrCorrupt, err)
		}
		if h.Size < 0 || h.Size > size-pos() {
			return fmt.Errorf("tar: member %q of %d bytes at offset %d reaches past the archive's %d bytes: %w", h.Name, h.Size, pos(), size, ErrCorrupt)
		}
		end = pos() + (h.Size+511)/512*512
		if h.Typeflag != tar.TypeReg {
			continue
		}
		key, ext, ok := splitMemberName(h.Name)
		if !ok {
			continue
		}
		if key != g.key {
			if err := flush(); err != nil {
				return err
			}
			g.reset(key)
		}
		if slices.Contains(g.exts, ext) {
			return fmt.Errorf("sample %q has two .%s members: %w", key, ext, ErrCorrupt)
		}
		off := pos()
		// Members are padded to 512-byte blocks: a missing padding means the archive was cut.
		if h.Size < 0 || off+(h.Size+511)/512*512 > size {
			return fmt.Errorf("sample %q: .%s member of %d bytes at offset %d truncated (archive of %d bytes): %w", key, ext, h.Size, off, size, ErrCorrupt)
		}
		g.exts = append(g.exts, ext)
		g.offs = append(g.offs, off)
		g.sizes = append(g.sizes, h.Size)
		if ext == "json" || slices.Contains(labelMemberExts, ext) {
			if h.Size > maxSmallMember {
				return fmt.Errorf("sample %q: .%s member of %d bytes: %w", key, ext, h.Size, ErrCorrupt)
			}
			b := make([]byte, h.Size)
			if _, err := io.ReadFull(tr, b); err != nil {
				return fmt.Errorf("sample %q: .%s member: %w: %w", key, ext, ErrCorrupt, err)
			}
			g.small[ext] = b
		}
	}
}

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

// ShardStream reads WebDataset tar shards in order, one sample at a time, without seeking: the way
// to read shards from pipes or compressed shards too large to hold in memory. A compressed shard
// may expand to 100 times its size (at least 16 MiB) before it is refused. It accepts the same
// members as Shards; labels are checked to be non-negative only (the number of classes is not
// known before the end).
type ShardStream struct {
	paths []string
	next  int
	fh    shardFile
	close func()
	in    *boundedReader // counts what the tar reader consumed
	end   int64          // end of the last member's padded data in the shard
	tr    *tar.Reader
	// pending is the first member of the next sample, read while finding the end of this one.
	pending *tar.Header
	g       *group
	data    map[string][]byte
}

var _ SampleStream = (*ShardStream)(nil)

// NewShardStream returns a stream over the shard files in paths (local paths or URLs, each read
// by one streaming request), read in that order. Nothing is opened before the first Next.
func NewShardStream(paths []string) *ShardStream {
	return &ShardStream{paths: paths, g: &group{small: map[string][]byte{}}, data: map[string][]byte{}}
}

// Next returns the next sample, whose Key is "SHARD:KEY", or an error wrapping io.EOF after the
// last. Errors in a shard name it; the stream cannot continue past a corrupt tar.
func (st *ShardStream) Next(ctx context.Context) (Sample, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Sample{}, err
		}
		if st.tr == nil {
			if st.next >= len(st.paths) {
				return Sample{}, fmt.Errorf("loaders: shard stream: %w", io.EOF)
			}
			if err := st.open(st.paths[st.next]); err != nil {
				return Sample{}, fmt.Errorf("loaders: shard stream: shard %s: %w", st.paths[st.next], err)
			}
			st.next++
		}
		path := st.paths[st.next-1]
		s, ok, err := st.read()
		if err != nil {
			return Sample{}, fmt.Errorf("loaders: shard stream: shard %s: %w", path, err)
		}
		if ok {
			return s, nil
		}
		st.closeShard()
	}
}

func (st *ShardStream) open(path string) error {
	fh, err := openShardPath(path)
	if err != nil {
		return err
	}
	r, closeFn, err := decompress(fh)
	if err != nil {
		fh.Close()
		return err
	}
	// Memory is bounded per member; the ratio alone catches compression bombs here.
	limit := max(maxExpansion*fh.Size(), minCompressedLimit)
	st.in = &boundedReader{r: r, left: limit, limit: limit}
	st.fh, st.close, st.tr, st.pending, st.end = fh, closeFn, tar.NewReader(st.in), nil, 0
	return nil
}

// boundedReader fails, rather than reporting the end, once a shard has expanded past its limit.
type boundedReader struct {
	r           io.Reader
	left, limit int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("shard expands past %d bytes: %w", b.limit, ErrCorrupt)
	}
	p = p[:min(int64(len(p)), b.left)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// read collects the members of one key; ok is false at the end of the shard.
func (st *ShardStream) read() (Sample, bool, error) {
	g := st.g
	g.reset("")
	clear(st.data)
	for {
		h := st.pending
		st.pending = nil
		if h == nil {
			var err error
			h, err = st.tr.Next()
			if err == io.EOF {
				if st.in.limit-st.in.left-st.end < tarEOFMarker {
					return Sample{}, false, fmt.Errorf("tar: no end-of-archive marker after %d bytes (the shard was cut): %w", st.end, ErrCorrupt)
				}
				break
			}
			if err != nil {
				return Sample{}, false, fmt.Errorf("tar: %w: %w", ErrCorrupt, err)
			}
			if h.Size < 0 || h.Size > st.in.left {
				return Sample{}, false, fmt.Errorf("tar: member %q of %d bytes reaches past the %d bytes the shard may expand to: %w", h.Name, h.Size, st.in.limit, ErrCorrupt)
			}
			st.end = st.in.limit - st.in.left + (h.Size+511)/512*512
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		key, ext, ok := splitMemberName(h.Name)
		if !ok {
			continue
		}
		if g.key != "" && key != g.key {
			st.pending = h
			break
		}
		g.key = key
		if slices.Contains(g.exts, ext) {
			return Sample{}, false, fmt.Errorf("sample %q has two .%s members: %w", key, ext, ErrCorrupt)
		}
		g.exts = append(g.exts, ext)
		g.offs = append(g.offs, 0)
		g.sizes = append(g.sizes, h.Size)
		if ext != "raw" && ext != "json" && !slices.Contains(imageMemberExts, ext) && !slices.Contains(labelMemberExts, ext) {
			continue // not read: a sample's other members (.txt, .npy, ...) take no memory
		}
		if h.Size > maxFileBytes {
			return Sample{}, false, fmt.Errorf("sample %q: .%s member of %d bytes: %w", key, ext, h.Size, ErrCorrupt)
		}
		// Memory grows with the bytes really read, not with what the header claims.
		b, err := readAtMost(st.tr, h.Size)
		if err == nil && int64(len(b)) != h.Size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return Sample{}, false, fmt.Errorf("sample %q: .%s member: %w: %w", key, ext, ErrCorrupt, err)
		}
		st.data[ext] = b
		if ext == "json" || slices.Contains(labelMemberExts, ext) {
			g.small[ext] = b
		}
	}
	if g.key == "" {
		return Sample{}, false, nil
	}
	m, err := g.meta()
	if err != nil {
		return Sample{}, false, err
	}
	key := st.paths[st.next-1] + ":" + m.key
	if m.labelErr != nil {
		return Sample{}, false, fmt.Errorf("sample %s: %w", key, m.labelErr)
	}
	if m.label < 0 {
		return Sample{}, false, fmt.Errorf("sample %s: label %d: %w", key, m.label, ErrLabel)
	}
	s := Sample{Label: m.label, Key: key}
	if m.payload == "raw" {
		s.Input = transforms.Input{Pixels: st.data["raw"], H: m.shape[0], W: m.shape[1], C: m.shape[2]}
	} else {
		s.Input.Encoded = st.data[m.payload]
	}
	return s, true, nil
}

func (st *ShardStream) closeShard() {
	if st.fh != nil {
		st.close()
		st.fh.Close()
	}
	st.fh, st.tr, st.pending = nil, nil, nil
}

// Close closes the current shard; later calls to Next return io.EOF.
func (st *ShardStream) Close() error {
	st.closeShard()
	st.next = len(st.paths)
	return nil
}
