package collective

import (
	"context"
	"encoding/binary"
	"fmt"
)

// collective runs p on the ring under the group's lock.
func (g *Group) collective(ctx context.Context, kind int, op Op, root int, buf []byte, es, n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errf(ErrClosed, "collective: %s: rank %d: group closed", kindNames[kind], g.rank)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("collective: %s: rank %d: %w", kindNames[kind], g.rank, err)
	}
	if g.ring == nil {
		return nil
	}
	g.plan = plan{kind: kind, op: op, root: root, buf: buf, es: es, n: n}
	err := g.ring.run(ctx, &g.plan)
	g.plan.buf = nil
	return err
}

func checkOp(what string, op Op) error {
	if op > Avg {
		return fmt.Errorf("collective: %s: unknown %v", what, op)
	}
	return nil
}

// AllReduce reduces buf in place across ranks: every rank ends with the same
// bits. The ring adds segment k in a fixed order (rank k's value, then k+1's,
// and so on round the ring), whatever the timing, so the result is also the
// same from run to run; Avg divides once, at the rank that completes each
// segment. An empty buf still synchronises with the other ranks' call.
func (g *Group) AllReduce(ctx context.Context, buf []float32, op Op) error {
	if err := checkOp("all-reduce", op); err != nil {
		return err
	}
	return g.collective(ctx, kindAllReduceF32, op, 0, f32Bytes(buf), 4, len(buf))
}

// AllReduceBF16 is AllReduce on bfloat16 bits. The wire carries bf16; each
// hop adds in float32 and rounds to bf16 (round to nearest even) once, so a
// sum over n ranks is rounded n-1 times (as NCCL does); Avg divides the
// total in float32 and rounds once more.
func (g *Group) AllReduceBF16(ctx context.Context, buf []uint16, op Op) error {
	if err := checkOp("all-reduce bf16", op); err != nil {
		return err
	}
	return g.collective(ctx, kindAllReduceBF16, op, 0, u16Bytes(buf), 2, len(buf))
}

// AllReduceFP16 is AllReduce on IEEE half-precision (fp16) bits, as
// AllReduceBF16 is on bfloat16: the wire carries fp16; each hop adds in
// float32 and rounds to fp16 (nearest even) once, a sum past 65504 becoming
// ±Inf; Avg divides the total in float32 and rounds once more. (A
// data-parallel fp16 run divides its gradients by the world size before it
// rounds them, and sums: like DDP's fp16_compress_hook, see train.)
func (g *Group) AllReduceFP16(ctx context.Context, buf []uint16, op Op) error {
	if err := checkOp("all-reduce fp16", op); err != nil {
		return err
	}
	return g.collective(ctx, kindAllReduceFP16, op, 0, u16Bytes(buf), 2, len(buf))
}

// Broadcast copies root's buf to every rank's buf (each rank passes a buffer
// of the same length), chunked and pipelined round the ring.
func (g *Group) Broadcast(ctx context.Context, buf []byte, root int) error {
	if root < 0 || root >= g.size {
		return fmt.Errorf("collective: broadcast: root %d is outside 0..%d", root, g.size-1)
	}
	return g.collective(ctx, kindBroadcast, Sum, root, buf, 1, len(buf))
}

// Barrier returns once every rank has called it.
func (g *Group) Barrier(ctx context.Context) error {
	buf := make([]byte, g.size)
	return g.collective(ctx, kindAllGather, Sum, 0, buf, 1, len(buf))
}

// agreeSlot is the bytes each rank contributes to Agree.
const agreeSlot = 512

// MaxAgree is the most bytes of what plus value that Agree takes.
const MaxAgree = agreeSlot - 4

// Agree checks that every rank passes the same value for what (a short name:
// "model", "batch", "seed"). On a mismatch every rank returns the same error,
// wrapping ErrMismatch, naming the first rank whose value differs from rank
// 0's and both values: "collective: ranks disagree on batch: rank 0 has 64, rank 1
// has 32". len(what)+len(value) is at most MaxAgree.
func (g *Group) Agree(ctx context.Context, what, value string) error {
	if len(what)+len(value) > MaxAgree {
		return fmt.Errorf("collective: agree on %s: %d bytes of name and value, at most %d", what, len(what)+len(value), MaxAgree)
	}
	buf := make([]byte, g.size*agreeSlot)
	mine := buf[g.rank*agreeSlot:]
	binary.LittleEndian.PutUint16(mine, uint16(len(what)))
	binary.LittleEndian.PutUint16(mine[2:], uint16(len(value)))
	copy(mine[4:], what)
	copy(mine[4+len(what):], value)
	if err := g.collective(ctx, kindAllGather, Sum, 0, buf, 1, len(buf)); err != nil {
		return fmt.Errorf("collective: agree on %s: %w", what, err)
	}
	slot := func(r int) (string, string, error) {
		b := buf[r*agreeSlot : (r+1)*agreeSlot]
		lw, lv := int(binary.LittleEndian.Uint16(b)), int(binary.LittleEndian.Uint16(b[2:]))
		if 4+lw+lv > agreeSlot {
			return "", "", errf(ErrPeer, "collective: agree on %s: rank %d: a slot of %d bytes", what, r, 4+lw+lv)
		}
		return string(b[4 : 4+lw]), string(b[4+lw : 4+lw+lv]), nil
	}
	w0, v0, err := slot(0)
	if err != nil {
		return err
	}
	for r := 1; r < g.size; r++ {
		w, v, err := slot(r)
		if err != nil {
			return err
		}
		if w != w0 {
			return errf(ErrMismatch, "collective: ranks agree on different things: rank 0 on %s, rank %d on %s", w0, r, w)
		}
		if v != v0 {
			return errf(ErrMismatch, "collective: ranks disagree on %s: rank 0 has %s, rank %d has %s", what, v0, r, v)
		}
	}
	return nil
}

// Close ends the group: a collective in flight on another goroutine fails
// with ErrClosed, the connections close (the other ranks' collectives then
// fail with ErrPeer), the sender goroutine and rank 0's store are joined.
// Close is idempotent.
func (g *Group) Close() error {
	if g.ring != nil {
		g.ring.fail(errf(ErrClosed, "collective: rank %d: group closed", g.rank))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	if g.ring != nil {
		g.ring.close()
	}
	if g.server != nil {
		return g.server.Close()
	}
	return nil
}
