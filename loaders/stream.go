package loaders

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"

	"github.com/stoke-ml/stoke/internal/rng"
)

// StreamSource is a dataset read front to back (PyTorch's IterableDataset, tf.data's file-based
// datasets): a sequence of parts (shard files, a socket, the files of a day) that can each be
// opened independently, from their beginning, once per epoch. NewStream makes a Loader over one.
//
// The Streams it opens must return samples whose memory they do not reuse: the Loader keeps
// samples across Next calls in its shuffle buffer.
type StreamSource interface {
	// Parts is the number of parts (at least 1).
	Parts() int
	// Open returns a SampleStream over part i, 0 <= i < Parts(), from its beginning. The Loader closes it.
	Open(ctx context.Context, part int) (SampleStream, error)
}

// SizedSource is implemented by a StreamSource that knows how many samples each part holds
// before reading it (shards listed in the index that stoke pack writes). A stream loader over one
// knows the length of its epochs (BatchesPerEpoch), checks every part against its count (a part
// that holds another number of samples fails the epoch with ErrCorrupt), and splits whole parts
// across ranks when they balance, as for a Sharded dataset: each rank then reads only its own
// parts, and pads to the largest rank's count by reading its first parts again.
type SizedSource interface {
	StreamSource
	// PartLens returns the number of samples of each part, or nil when it does not know them.
	PartLens() []int
}

// DefaultShuffleBuffer is the size of a stream loader's shuffle buffer when Config.Shuffle is set
// and Config.ShuffleBuffer is 0, as in WebDataset's examples: the buffer holds this many encoded
// samples (about 100 MB of typical JPEGs).
const DefaultShuffleBuffer = 1000

// PartPrefetcher is implemented by a StreamSource that can fetch parts ahead of their use (shards
// read through a cache): each time the stream Loader opens a part, it calls PrefetchParts with the
// parts that follow, in the epoch's order (this rank's, the padding included). PrefetchParts must
// not block on the downloads it starts; calls come from the epoch's source goroutine, one at a
// time, and a later call supersedes the earlier ones.
type PartPrefetcher interface {
	PrefetchParts(next []int)
}

// ReadPlanner is implemented by a Dataset that fetches ahead of its reads (remote shards through a
// cache, or a dataset of your own over slow storage): when an epoch starts, and again when a
// resumed epoch starts mid-way, the Loader calls PlanReads with the indices that this rank will
// read from then on, in order. The hint is advisory: Sample must still work for any index, in any
// order. PlanReads is called from the goroutine that iterates the epoch before its workers start,
// and must not block on the reads it plans; it must not keep indices, which the Loader owns.
type ReadPlanner interface {
	PlanReads(indices []int)
}

// streamItem is a sample read from a stream and its position (ordinal) in the epoch's stream.
type streamItem struct {
	s   Sample
	ord int
}

// streamReader reads one epoch of a StreamSource for one rank: parts in order (shuffled by
// (seed, epoch) with shuffle), every world-th sample from position rank, a DistributedSampler-style
// padding sample at the end, then the shuffle buffer. It runs on one goroutine, so its output
// depends on (seed, epoch) only.
type streamReader struct {
	src         StreamSource
	name        string
	seed        uint64
	epoch       int
	rank, world int

	parts []int // the epoch's part order
	next  int   // next entry of parts to open
	cur   SampleStream
	read  int // samples read from the stream: the next one's position
	ended bool
	// lens are the parts' sample counts when the source knows them (inPart counts the current
	// part's); limit, when above 0, is this rank's count in a split by parts: the stream wraps
	// around its parts until it has read that many.
	lens   []int
	inPart int
	limit  int

	head   []streamItem // the first world samples, the padding candidates (world > 1)
	kept   int          // samples of this rank read
	padded bool         // the padding sample (if this rank needs one) was taken

	size    int // shuffle buffer capacity; <= 1 means no buffer
	buf     []streamItem
	drained bool // the buffer gets no more samples
	emitted int

	la   streamItem // lookahead: the next emission, when laOK
	laOK bool
	done bool // no emission left
}

func (l *Loader) newStreamReader(epoch int) *streamReader {
	r := &streamReader{src: l.src, name: l.info.Name, seed: l.cfg.Seed, epoch: epoch,
		rank: l.cfg.Rank, world: max(l.cfg.WorldSize, 1), size: l.cfg.ShuffleBuffer}
	if s, ok := l.src.(SizedSource); ok {
		r.lens = s.PartLens()
	}
	r.parts = sequential(l.src.Parts()).Indices(0, 0)
	if l.split.ranks != nil {
		// This rank reads its own parts only, all of whose samples are its own.
		r.parts, r.limit, r.rank, r.world = slices.Clone(l.split.ranks[l.cfg.Rank]), l.split.per, 0, 1
	}
	if l.cfg.Shuffle {
		order := shuffled(len(r.parts)).Indices(rng.Mix(l.cfg.Seed, 8), epoch)
		parts := make([]int, len(order))
		for k, o := range order {
			parts[k] = r.parts[o]
		}
		r.parts = parts
	}
	return r
}

// readOne returns the next sample of the stream; ok is false at its end.
func (r *streamReader) readOne(ctx context.Context) (Sample, bool, error) {
	for {
		if r.limit > 0 && r.read >= r.limit {
			return Sample{}, false, nil
		}
		if r.cur == nil {
			if r.next >= len(r.parts) && r.limit > 0 {
				r.next = 0 // padding: the rank's first parts again
			}
			if r.next >= len(r.parts) {
				return Sample{}, false, nil
			}
			if p, ok := r.src.(PartPrefetcher); ok {
				p.PrefetchParts(r.parts[r.next+1:])
			}
			st, err := r.src.Open(ctx, r.parts[r.next])
			if err != nil {
				return Sample{}, false, fmt.Errorf("loaders: %s: open part %d: %w", r.name, r.parts[r.next], err)
			}
			r.cur, r.inPart = st, 0
			r.next++
		}
		s, err := r.cur.Next(ctx)
		part := r.parts[r.next-1]
		if err == nil {
			if r.inPart++; r.lens != nil && r.inPart > r.lens[part] {
				err = fmt.Errorf("more samples than the %d its size says: %w", r.lens[part], ErrCorrupt)
			} else {
				return s, true, nil
			}
		} else if errors.Is(err, io.EOF) && r.lens != nil && r.inPart != r.lens[part] {
			err = fmt.Errorf("%d samples, but its size says %d: %w", r.inPart, r.lens[part], ErrCorrupt)
		}
		cerr := r.cur.Close()
		r.cur = nil
		if !errors.Is(err, io.EOF) {
			return Sample{}, false, fmt.Errorf("loaders: %s: part %d, stream position %d: %w", r.name, part, r.read, err)
		}
		if cerr != nil {
			return Sample{}, false, fmt.Errorf("loaders: %s: part %d: close: %w", r.name, part, cerr)
		}
	}
}

// padOrd is the position of the padding sample of rank after n samples (when the rank needs one,
// see needsPad): DistributedSampler pads the order by wrapping around to its beginning.
func padOrd(n, rank, world int) int { return (world*(n/world) + rank) % n }

func needsPad(n, rank, world int) bool { return n%world != 0 && rank >= n%world }

// advance reads the stream's next sample, keeps it aside when it may serve as padding, and reports
// whether it belongs to this rank; ok is false at the end of the stream.
func (r *streamReader) advance(ctx context.Context) (it streamItem, mine, ok bool, err error) {
	s, ok, err := r.readOne(ctx)
	if !ok || err != nil {
		return streamItem{}, false, false, err
	}
	it = streamItem{s: s, ord: r.read}
	r.read++
	if r.world > 1 && it.ord < r.world {
		r.head = append(r.head, it)
	}
	if it.ord%r.world == r.rank {
		r.kept++
		return it, true, true, nil
	}
	return it, false, true, nil
}

// pull returns this rank's next sample in stream order, then its padding sample; ok is false after
// the last.
func (r *streamReader) pull(ctx context.Context) (streamItem, bool, error) {
	for !r.ended {
		it, mine, ok, err := r.advance(ctx)
		if err != nil {
			return streamItem{}, false, err
		}
		if !ok {
			r.ended = true
			break
		}
		if mine {
			return it, true, nil
		}
	}
	if r.read == 0 {
		return streamItem{}, false, fmt.Errorf("loaders: %s: epoch %d: the stream has no samples: %w", r.name, r.epoch, ErrEmpty)
	}
	if !r.padded {
		r.padded = true
		if needsPad(r.read, r.rank, r.world) {
			return r.head[padOrd(r.read, r.rank, r.world)], true, nil
		}
	}
	return streamItem{}, false, nil
}

// emit returns the next sample out of the shuffle buffer: once it is full, a slot chosen by
// (seed, epoch, emission) is emitted and refilled from the stream; at the end the buffer drains.
func (r *streamReader) emit(ctx context.Context) (streamItem, bool, error) {
	if r.size <= 1 {
		return r.pull(ctx)
	}
	for len(r.buf) < r.size && !r.drained {
		it, ok, err := r.pull(ctx)
		if err != nil {
			return streamItem{}, false, err
		}
		if !ok {
			r.drained = true
			break
		}
		r.buf = append(r.buf, it)
	}
	if len(r.buf) == 0 {
		return streamItem{}, false, nil
	}
	j, _ := bits.Mul64(rng.Mix(r.seed, uint64(r.epoch), uint64(r.emitted), 5), uint64(len(r.buf)))
	out := r.buf[j]
	r.emitted++
	if !r.drained {
		it, ok, err := r.pull(ctx)
		if err != nil {
			return streamItem{}, false, err
		}
		if ok {
			r.buf[j] = it
			return out, true, nil
		}
		r.drained = true
	}
	last := len(r.buf) - 1
	r.buf[j] = r.buf[last]
	r.buf[last] = streamItem{}
	r.buf = r.buf[:last]
	return out, true, nil
}

// peek makes the next emission ready; ok is false when the epoch has none left.
func (r *streamReader) peek(ctx context.Context) (bool, error) {
	if r.laOK || r.done {
		return r.laOK, nil
	}
	it, ok, err := r.emit(ctx)
	if err != nil {
		return false, err
	}
	r.la, r.laOK, r.done = it, ok, !ok
	return ok, nil
}

// take returns the emission peek made ready.
func (r *streamReader) take() streamItem {
	it := r.la
	r.la, r.laOK = streamItem{}, false
	return it
}

// snapshot returns the reader's position: samples read and the positions in the shuffle buffer.
// It is called with no lookahead pending, between two emissions.
func (r *streamReader) snapshot() (read int, buffer []int) {
	buffer = make([]int, len(r.buf))
	for k, it := range r.buf {
		buffer[k] = it.ord
	}
	return r.read, buffer
}

// restore brings a fresh reader to the position of s, taken after s.Batch full batches: it reads
// the stream's first s.Read samples again (without decoding them), keeping those s.Buffer names.
func (r *streamReader) restore(ctx context.Context, s State) error {
	bad := func(why string, a ...any) error {
		return fmt.Errorf("loaders: %s: restore epoch %d batch %d: %s: %w", r.name, s.Epoch, s.Batch, fmt.Sprintf(why, a...), ErrStateMismatch)
	}
	slot := make(map[int]int, len(s.Buffer))
	for k, o := range s.Buffer {
		if _, dup := slot[o]; dup {
			return bad("buffer position %d named twice", o)
		}
		slot[o] = k
	}
	r.buf = make([]streamItem, len(s.Buffer))
	for r.read < s.Read {
		it, mine, ok, err := r.advance(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return bad("the stream ended after %d samples, before position %d", r.read, s.Read)
		}
		if !mine {
			continue
		}
		if k, ok := slot[it.ord]; ok {
			r.buf[k] = it
			delete(slot, it.ord)
		}
	}
	r.emitted = s.Batch * s.BatchSize
	switch r.emitted + len(s.Buffer) {
	case r.kept:
	case r.kept + 1: // the padding sample was taken: the stream had ended
		if r.read == 0 || !needsPad(r.read, r.rank, r.world) {
			return bad("%d samples emitted and %d buffered, but rank %d read %d and needs no padding", r.emitted, len(s.Buffer), r.rank, r.kept)
		}
		r.padded, r.ended = true, true
		o := padOrd(r.read, r.rank, r.world)
		if k, ok := slot[o]; ok {
			r.buf[k] = r.head[o]
			delete(slot, o)
		}
	default:
		return bad("%d samples emitted and %d buffered, but rank %d read %d", r.emitted, len(s.Buffer), r.rank, r.kept)
	}
	if len(slot) > 0 {
		return bad("buffer positions %v are not this rank's samples before position %d", s.Buffer, s.Read)
	}
	if r.size <= 1 {
		r.buf = nil
	}
	return nil
}

func (r *streamReader) close() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.cur = nil
	return err
}
