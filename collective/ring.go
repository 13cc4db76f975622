package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The kinds of collective, sent in each operation's header.
const (
	kindAllReduceF32 = 1 + iota
	kindAllReduceBF16
	kindBroadcast
	kindAllGather
	kindAllReduceFP16
)

var kindNames = [...]string{"", "all-reduce", "all-reduce bf16", "broadcast", "all-gather", "all-reduce fp16"}

// format is the 16-bit format a kind of all-reduce adds in (nil for fp32).
func format(kind int) *format16 {
	switch kind {
	case kindAllReduceBF16:
		return &bf16Format
	case kindAllReduceFP16:
		return &fp16Format
	}
	return nil
}

// headerSize is the bytes each rank sends its next neighbour before an
// operation's data: kind, op, seq, element count, root.
const headerSize = 24

const (
	// defaultChunk is the bytes of one pipelined chunk of a segment.
	defaultChunk = 512 << 10
	// subChunk is the bytes read into scratch before they are reduced.
	subChunk = 128 << 10
)

// plan is one collective as the ring moves it: the buffer cut into world-size
// segments, each into chunks; send j and receive i walk the same schedule.
type plan struct {
	kind        int
	op          Op
	root        int
	buf         []byte // the caller's buffer, as bytes
	es          int    // element size in bytes
	n           int    // elements
	w, rank     int
	chunks      int // chunks per segment
	steps       int
	nSend       int
	nRecv       int
	readyBase   int // sends ready before any receipt
	dist        int // broadcast: distance from root
	header      [headerSize]byte
	reduceSteps int // the first reduceSteps steps reduce; later ones copy
}

func mod(a, m int) int { return ((a % m) + m) % m }

// region returns the bytes of chunk c of segment k.
func (p *plan) region(k, c int) []byte {
	if p.kind == kindBroadcast {
		lo, hi := c*p.n/p.chunks, (c+1)*p.n/p.chunks
		return p.buf[lo*p.es : hi*p.es]
	}
	lo, hi := k*p.n/p.w, (k+1)*p.n/p.w
	l := hi - lo
	a, b := lo+c*l/p.chunks, lo+(c+1)*l/p.chunks
	return p.buf[a*p.es : b*p.es]
}

func (p *plan) sendRegion(j int) []byte {
	return p.region(mod(p.rank-j/p.chunks, p.w), j%p.chunks)
}

func (p *plan) recvRegion(i int) []byte {
	return p.region(mod(p.rank-i/p.chunks-1, p.w), i%p.chunks)
}

// setup fills the schedule of a plan whose kind, op, root, buf, es and n are set.
func (p *plan) setup(w, rank, chunkBytes int, seq uint32) {
	p.w, p.rank = w, rank
	segBytes := (p.n + w - 1) / w * p.es
	if p.kind == kindBroadcast {
		segBytes = p.n * p.es
	}
	p.chunks = max(1, (segBytes+chunkBytes-1)/chunkBytes)
	switch p.kind {
	case kindAllReduceF32, kindAllReduceBF16, kindAllReduceFP16:
		p.steps, p.reduceSteps = 2*(w-1), w-1
		p.nSend, p.nRecv, p.readyBase = p.steps*p.chunks, p.steps*p.chunks, p.chunks
	case kindAllGather:
		p.steps, p.reduceSteps = w-1, 0
		p.nSend, p.nRecv, p.readyBase = p.steps*p.chunks, p.steps*p.chunks, p.chunks
	case kindBroadcast:
		p.steps, p.reduceSteps = 1, 0
		p.dist = mod(rank-p.root, w)
		p.nSend, p.nRecv, p.readyBase = p.chunks, p.chunks, 0
		if p.dist == 0 {
			p.nRecv, p.readyBase = 0, p.chunks
		}
		if p.dist == w-1 {
			p.nSend = 0
		}
	}
	h := p.header[:]
	h[0], h[1] = byte(p.kind), byte(p.op)
	binary.LittleEndian.PutUint32(h[4:], seq)
	binary.LittleEndian.PutUint64(h[8:], uint64(p.n))
	binary.LittleEndian.PutUint32(h[16:], uint32(p.root))
}

// describe names what a header asks for, for a mismatch error.
func describe(h []byte) string {
	k := int(h[0])
	name := fmt.Sprintf("kind %d", k)
	if k < len(kindNames) && k > 0 {
		name = kindNames[k]
	}
	s := fmt.Sprintf("%s #%d of %d elements", name, binary.LittleEndian.Uint32(h[4:]), binary.LittleEndian.Uint64(h[8:]))
	switch k {
	case kindAllReduceF32, kindAllReduceBF16, kindAllReduceFP16:
		s += " (" + Op(h[1]).String() + ")"
	case kindBroadcast:
		s += fmt.Sprintf(" from root %d", binary.LittleEndian.Uint32(h[16:]))
	}
	return s
}

// ring is the two connections of a rank and the sender goroutine that owns
// writes to next. run is called by one goroutine at a time (Group.mu).
type ring struct {
	rank, w    int
	next, prev *net.TCPConn
	timeout    time.Duration
	chunkBytes int

	work    chan *plan // to the sender; closed by close
	sent    chan error // from the sender, one per plan
	wake    chan struct{}
	ready   int64 // sends allowed; guarded by readyMu
	readyMu sync.Mutex
	scratch []float32
	hdr     [headerSize]byte // the header received, reused
	seq     uint32
	// sentN counts the sends the sender has finished in this plan; the
	// all-gather half waits on it before it overwrites a region sent
	// earlier (the data dependency round the ring already orders the two;
	// this makes the order visible to the race detector, across processes too).
	sentN    atomic.Int64
	sentWake chan struct{}

	failMu  sync.Mutex
	failErr error // the first failure; once set the ring is unusable
	aborted chan struct{}

	senderDone chan struct{}
	closeOnce  sync.Once
}

func newRing(rank, w int, next, prev *net.TCPConn, timeout time.Duration) *ring {
	r := &ring{rank: rank, w: w, next: next, prev: prev, timeout: timeout, chunkBytes: defaultChunk,
		work: make(chan *plan, 1), sent: make(chan error, 1), wake: make(chan struct{}, 1), sentWake: make(chan struct{}, 1),
		aborted: make(chan struct{}), senderDone: make(chan struct{}),
		scratch: make([]float32, subChunk/4)}
	go r.sender()
	return r
}

func (r *ring) nextRank() int { return (r.rank + 1) % r.w }
func (r *ring) prevRank() int { return (r.rank + r.w - 1) % r.w }

// fail records the first failure and closes both connections, which ends the
// other side's reads and writes at once.
func (r *ring) fail(err error) error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	if r.failErr == nil {
		r.failErr = err
		close(r.aborted)
		r.next.Close()
		r.prev.Close()
	}
	return r.failErr
}

func (r *ring) failed() error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	return r.failErr
}

func (r *ring) setReady(v int64) {
	r.readyMu.Lock()
	r.ready = v
	r.readyMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *ring) readyCount() int64 {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	return r.ready
}

// sender owns writes to next: the header, then each send as it becomes ready.
// It runs until close closes work; close joins it.
func (r *ring) sender() {
	defer close(r.senderDone)
	for p := range r.work {
		r.sent <- r.sendPlan(p)
	}
}

func (r *ring) sendPlan(p *plan) error {
	if _, err := r.next.Write(p.header[:]); err != nil {
		return r.ioErr(p, err, r.nextRank(), "sending to")
	}
	for j := 0; j < p.nSend; j++ {
		for r.readyCount() <= int64(j) {
			select {
			case <-r.wake:
			case <-r.aborted:
				return r.failed()
			}
		}
		if b := p.sendRegion(j); len(b) > 0 {
			if _, err := r.next.Write(b); err != nil {
				return r.ioErr(p, err, r.nextRank(), "sending to")
			}
		}
		r.sentN.Store(int64(j + 1))
		select {
		case r.sentWake <- struct{}{}:
		default:
		}
	}
	return nil
}

// ioErr turns a connection error into the operation's error and fails the ring.
func (r *ring) ioErr(p *plan, err error, peer int, doing string) error {
	name := kindNames[p.kind]
	var e error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		e = errf(ErrTimeout, "collective: %s: timed out after %v %s rank %d", name, r.timeout, doing, peer)
		if doing == "receiving from" {
			e = errf(ErrTimeout, "collective: %s: timed out after %v waiting for rank %d", name, r.timeout, peer)
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		e = errf(ErrPeer, "collective: %s: rank %d: connection closed by peer", name, peer)
	case errors.Is(err, net.ErrClosed):
		// Our own close: the first failure says why.
		if f := r.failed(); f != nil {
			return f
		}
		e = errf(ErrPeer, "collective: %s: rank %d: %w", name, peer, err)
	default:
		e = errf(ErrPeer, "collective: %s: rank %d: %w", name, peer, unwrapOp(err))
	}
	return r.fail(e)
}

// unwrapOp drops net.OpError's addresses, keeping the cause ("connection reset by peer").
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			return se.Err
		}
		return oe.Err
	}
	return err
}

// run performs p: hands the sends to the sender and does the receives (and
// reductions) here, then waits for the sender.
func (r *ring) run(ctx context.Context, p *plan) error {
	if err := r.failed(); err != nil {
		return fmt.Errorf("collective: %s: group unusable after an earlier failure: %w", kindNames[p.kind], err)
	}
	r.seq++
	p.setup(r.w, r.rank, r.chunkBytes, r.seq)
	deadline := time.Now().Add(r.timeout)
	r.next.SetDeadline(deadline)
	r.prev.SetDeadline(deadline)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			r.fail(fmt.Errorf("collective: %s: rank %d: %w", kindNames[p.kind], r.rank, context.Cause(ctx)))
		})
		defer stop()
	}
	r.setReady(int64(p.readyBase))
	r.sentN.Store(0)
	r.work <- p
	rerr := r.receive(p)
	serr := <-r.sent
	if rerr == nil {
		rerr = serr
	}
	if rerr != nil {
		if f := r.failed(); f != nil {
			return f
		}
	}
	return rerr
}

func (r *ring) receive(p *plan) error {
	h := &r.hdr
	if _, err := io.ReadFull(r.prev, h[:]); err != nil {
		return r.ioErr(p, err, r.prevRank(), "receiving from")
	}
	if *h != p.header {
		return r.fail(errf(ErrMismatch, "collective: %s: ranks disagree: rank %d calls %s, rank %d calls %s", kindNames[p.kind],
			r.rank, describe(p.header[:]), r.prevRank(), describe(h[:])))
	}
	scratch := f32Bytes(r.scratch)
	for i := 0; i < p.nRecv; i++ {
		dst := p.recvRegion(i)
		step := i / p.chunks
		if step < p.reduceSteps {
			for off := 0; off < len(dst); off += len(scratch) {
				d := dst[off:min(off+len(scratch), len(dst))]
				s := scratch[:len(d)]
				if _, err := io.ReadFull(r.prev, s); err != nil {
					return r.ioErr(p, err, r.prevRank(), "receiving from")
				}
				if f := format(p.kind); f == nil {
					addF32(asF32(d), asF32(s))
				} else {
					f.add(asU16(d), asU16(s))
				}
			}
			if step == p.reduceSteps-1 && p.op == Avg {
				// This rank owns the chunk's total: divide once, here.
				if f := format(p.kind); f == nil {
					divF32(asF32(dst), float32(p.w))
				} else {
					f.div(asU16(dst), float32(p.w))
				}
			}
		} else if len(dst) > 0 {
			if p.reduceSteps > 0 {
				// dst was sent reduceSteps steps ago: wait for that send.
				for need := int64(i - p.reduceSteps*p.chunks + 1); r.sentN.Load() < need; {
					select {
					case <-r.sentWake:
					case <-r.aborted:
						return r.failed()
					}
				}
			}
			if _, err := io.ReadFull(r.prev, dst); err != nil {
				return r.ioErr(p, err, r.prevRank(), "receiving from")
			}
		}
		r.setReady(int64(p.readyBase + i + 1))
	}
	return nil
}

// close fails the ring (if it has not failed), closes the connections and
// joins the sender.
func (r *ring) close() {
	r.closeOnce.Do(func() {
		r.fail(ErrClosed)
		close(r.work)
		<-r.senderDone
	})
}
