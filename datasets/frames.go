package datasets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/stoke-ml/stoke/loaders"
)

// A compressed shard is written as independent frames (zstd frames, or gzip members) of about
// frameBytes of tar each, cut between samples, and the index lists them, so that a sample of a
// remote shard read without a cache is one ranged GET of the frames that hold its run, about as
// many bytes as the sample itself. (A local shard, or a cached copy, is decompressed once instead:
// decompressing a whole frame for each sample of a few KB costs more CPU than that.) The frames
// follow one another as a valid stream, which zstd, gzip and Python's webdataset read as one. At
// 64 KiB, MNIST's raw shards are 1% larger than compressed as one stream (1.14 times at 16 KiB,
// 1.78 times with a frame per sample); a sample larger than a frame (most JPEGs) is a frame of its
// own.
const frameBytes = 64 << 10

// maxFrameBytes bounds the tar bytes of one frame that an index may claim: a frame holds at most
// frameBytes and one sample.
const maxFrameBytes = maxFileBytes + frameBytes

// frameWriter collects a compressed shard's tar and writes it as frames when cut.
type frameWriter struct {
	out    io.Writer
	comp   string // "gz" or "zst"
	zstd   *zstd.Encoder
	gzip   *gzip.Writer
	tar    []byte     // the current frame's tar bytes
	frames [][2]int64 // compressed and tar bytes of the frames written
	enc    bytes.Buffer
}

func newFrameWriter(out io.Writer, comp string) (*frameWriter, error) {
	f := &frameWriter{out: out, comp: comp}
	if comp == "zst" {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		f.zstd = enc
	} else {
		f.gzip = gzip.NewWriter(nil)
	}
	return f, nil
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.tar = append(f.tar, p...)
	return len(p), nil
}

// cut writes the bytes collected so far as one frame (none when there are none).
func (f *frameWriter) cut() error {
	if len(f.tar) == 0 {
		return nil
	}
	f.enc.Reset()
	if f.zstd != nil {
		f.enc.Write(f.zstd.EncodeAll(f.tar, f.enc.AvailableBuffer()))
	} else {
		f.gzip.Reset(&f.enc)
		f.gzip.Write(f.tar)
		if err := f.gzip.Close(); err != nil {
			return err
		}
	}
	if _, err := f.out.Write(f.enc.Bytes()); err != nil {
		return err
	}
	f.frames = append(f.frames, [2]int64{int64(f.enc.Len()), int64(len(f.tar))})
	f.tar = f.tar[:0]
	return nil
}

// Close releases the encoder; the frames must have been cut.
func (f *frameWriter) Close() error {
	if f.zstd != nil {
		return f.zstd.Close()
	}
	return nil
}

// checkFrames checks the frames an index entry lists: they make up the file, each holds tar bytes
// and a compressed size that such tar bytes could have.
func (e *shardEntry) checkFrames() error {
	if e.Frames == nil {
		return nil
	}
	if !e.indexed() {
		return fmt.Errorf("frames without sample sizes: %w", loaders.ErrCorrupt)
	}
	var c, t int64
	for k, fr := range e.Frames {
		if fr[0] <= 0 || fr[1] <= 0 || fr[1] > maxFrameBytes || fr[0] > 2*fr[1]+1024 {
			return fmt.Errorf("frame %d of %d bytes holding %d bytes of tar: %w", k, fr[0], fr[1], loaders.ErrCorrupt)
		}
		c += fr[0]
		t += fr[1]
	}
	if c != e.FileSize {
		return fmt.Errorf("frames of %d bytes in a file of %d: %w", c, e.FileSize, loaders.ErrCorrupt)
	}
	// The bound of a compressed shard decompressed whole, so that the runs read through the frames
	// (each allocated as the index says) stay within what the file can hold.
	if t > expansionLimit(e.FileSize) {
		return fmt.Errorf("frames holding %d bytes of tar in a file of %d (at most %d): %w", t, e.FileSize, expansionLimit(e.FileSize), loaders.ErrCorrupt)
	}
	return nil
}

// frameTable locates a compressed shard's frames: frame k is the bytes from comp[k] to comp[k+1]
// of the file and holds the bytes from tar[k] to tar[k+1] of the tar.
type frameTable struct {
	comp, tar []int64
}

func newFrameTable(frames [][2]int64) *frameTable {
	t := &frameTable{comp: make([]int64, len(frames)+1), tar: make([]int64, len(frames)+1)}
	for k, fr := range frames {
		t.comp[k+1] = t.comp[k] + fr[0]
		t.tar[k+1] = t.tar[k] + fr[1]
	}
	return t
}

// size returns the size of the tar.
func (t *frameTable) size() int64 { return t.tar[len(t.tar)-1] }

// readAt reads the tar bytes [off, off+len(p)) into p: the frames that hold them, read from f in one
// call and decompressed.
func (t *frameTable) readAt(f io.ReaderAt, p []byte, off int64) error {
	end := off + int64(len(p))
	if off < 0 || end > t.size() {
		return fmt.Errorf("tar bytes %d-%d past the frames' %d: %w", off, end-1, t.size(), loaders.ErrCorrupt)
	}
	// Frames first..last-1 hold the bytes.
	first := sort.Search(len(t.tar)-1, func(k int) bool { return t.tar[k+1] > off })
	last := sort.Search(len(t.tar)-1, func(k int) bool { return t.tar[k+1] >= end }) + 1
	comp := make([]byte, t.comp[last]-t.comp[first])
	if _, err := f.ReadAt(comp, t.comp[first]); err != nil {
		return err
	}
	if err := decodeFrames(p, off-t.tar[first], t.tar[last]-t.tar[first], comp); err != nil {
		return fmt.Errorf("frames %d-%d (file bytes %d-%d): %w", first, last-1, t.comp[first], t.comp[last]-1, err)
	}
	return nil
}

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
	if err != nil {
		return err
	}
	return d
}}

// errFrameSize marks frames that decompress to another size than the index says.
var errFrameSize = errors.New("the frames decompress to another size than the index says")

// decodeFrames decompresses comp, whole frames of zstd or gzip that hold exactly size bytes, and
// reads the len(dst) bytes from skip into dst. Memory grows with what the frames hold, not with
// what the index says they hold: the bytes around dst are decompressed and dropped.
func decodeFrames(dst []byte, skip, size int64, comp []byte) error {
	var r io.Reader
	switch {
	case bytes.HasPrefix(comp, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		v := zstdDecoders.Get()
		d, ok := v.(*zstd.Decoder)
		if !ok {
			return v.(error)
		}
		defer zstdDecoders.Put(d)
		if err := d.Reset(bytes.NewReader(comp)); err != nil {
			return fmt.Errorf("zstd: %w: %w", loaders.ErrCorrupt, err)
		}
		r = d
	case bytes.HasPrefix(comp, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(bytes.NewReader(comp))
		if err != nil {
			return fmt.Errorf("gzip: %w: %w", loaders.ErrCorrupt, err)
		}
		r = z
	default:
		return fmt.Errorf("a frame that is neither zstd nor gzip: %w", loaders.ErrCorrupt)
	}
	_, err := io.CopyN(io.Discard, r, skip)
	if err == nil {
		_, err = io.ReadFull(r, dst)
	}
	if err == nil {
		_, err = io.CopyN(io.Discard, r, size-skip-int64(len(dst)))
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = errFrameSize
		}
		return fmt.Errorf("%w: %w", loaders.ErrCorrupt, err)
	}
	if n, err := r.Read(make([]byte, 1)); n > 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errFrameSize
		}
		return fmt.Errorf("%w: %w", loaders.ErrCorrupt, err)
	}
	return nil
}

// framedFile reads a compressed shard's tar through its frames.
type framedFile struct {
	shardFile // the compressed file, closed by Close
	frames    *frameTable
}

func (f framedFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.frames.readAt(f.shardFile, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Size is the size of the tar.
func (f framedFile) Size() int64 { return f.frames.size() }
