package datasets

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

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
	// openFile opens a shard (default openShardPath; a stream source reads cached copies).
	openFile func(ctx context.Context, path string) (shardFile, error)
}

var _ loaders.SampleStream = (*ShardStream)(nil)

// NewShardStream returns a stream over the shard files in paths (local paths or URLs, each read
// by one streaming request), read in that order. Nothing is opened before the first Next.
func NewShardStream(paths []string) *ShardStream {
	return &ShardStream{paths: paths, g: &group{small: map[string][]byte{}}, data: map[string][]byte{}}
}

// Next returns the next sample, whose Key is "SHARD:KEY", or an error wrapping io.EOF after the
// last. Errors in a shard name it; the stream cannot continue past a corrupt tar.
func (st *ShardStream) Next(ctx context.Context) (loaders.Sample, error) {
	for {
		if err := ctx.Err(); err != nil {
			return loaders.Sample{}, err
		}
		if st.tr == nil {
			if st.next >= len(st.paths) {
				return loaders.Sample{}, fmt.Errorf("datasets: shard stream: %w", io.EOF)
			}
			if err := st.open(ctx, st.paths[st.next]); err != nil {
				return loaders.Sample{}, fmt.Errorf("datasets: shard stream: shard %s: %w", st.paths[st.next], err)
			}
			st.next++
		}
		path := st.paths[st.next-1]
		s, ok, err := st.read()
		if err != nil {
			return loaders.Sample{}, fmt.Errorf("datasets: shard stream: shard %s: %w", path, err)
		}
		if ok {
			return s, nil
		}
		st.closeShard()
	}
}

func (st *ShardStream) open(ctx context.Context, path string) error {
	open := st.openFile
	if open == nil {
		open = openShardPath
	}
	fh, err := open(ctx, path)
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
		return 0, fmt.Errorf("shard expands past %d bytes: %w", b.limit, loaders.ErrCorrupt)
	}
	p = p[:min(int64(len(p)), b.left)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// read collects the members of one key; ok is false at the end of the shard.
func (st *ShardStream) read() (loaders.Sample, bool, error) {
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
					return loaders.Sample{}, false, fmt.Errorf("tar: no end-of-archive marker after %d bytes (the shard was cut): %w", st.end,
						loaders.ErrCorrupt)
				}
				break
			}
			if err != nil {
				return loaders.Sample{}, false, fmt.Errorf("tar: %w: %w", loaders.ErrCorrupt, err)
			}
			if h.Size < 0 || h.Size > st.in.left {
				return loaders.Sample{}, false, fmt.Errorf("tar: member %q of %d bytes reaches past the %d bytes the shard may expand to: %w", h.Name, h.Size,
					st.in.limit, loaders.ErrCorrupt)
			}
			st.end = st.in.limit - st.in.left + (h.Size+511)/512*512
		}
		key, ext, ok := sampleMember(h)
		if !ok {
			continue
		}
		if g.key != "" && key != g.key {
			st.pending = h
			break
		}
		g.key = key
		if err := g.add(ext, 0, h.Size); err != nil {
			return loaders.Sample{}, false, err
		}
		if ext != "raw" && ext != "json" && !slices.Contains(imageMemberExts, ext) && !slices.Contains(labelMemberExts, ext) {
			continue // not read: a sample's other members (.txt, .npy, ...) take no memory
		}
		if h.Size > maxFileBytes {
			return loaders.Sample{}, false, fmt.Errorf("sample %q: .%s member of %d bytes: %w", key, ext, h.Size, loaders.ErrCorrupt)
		}
		// Memory grows with the bytes really read, not with what the header claims.
		b, err := readAtMost(st.tr, h.Size)
		if err == nil && int64(len(b)) != h.Size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return loaders.Sample{}, false, fmt.Errorf("sample %q: .%s member: %w: %w", key, ext, loaders.ErrCorrupt, err)
		}
		st.data[ext] = b
		if ext == "json" || slices.Contains(labelMemberExts, ext) {
			g.small[ext] = b
		}
	}
	if g.key == "" {
		return loaders.Sample{}, false, nil
	}
	m, err := g.meta()
	if err != nil {
		return loaders.Sample{}, false, err
	}
	key := st.paths[st.next-1] + ":" + m.key
	if m.labelErr != nil {
		return loaders.Sample{}, false, fmt.Errorf("sample %s: %w", key, m.labelErr)
	}
	if m.label < 0 {
		return loaders.Sample{}, false, fmt.Errorf("sample %s: label %d: %w", key, m.label, loaders.ErrLabel)
	}
	s := loaders.Sample{Label: m.label, Key: key}
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
