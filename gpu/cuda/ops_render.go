//go:build cuda

package cuda

import (
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/transforms"
)

// renderBlocks is REC_BLOCKS of ops.cu: the blocks of each sample in the render launches;
// maxRenderSamples the most samples a call takes (the status word numbers them in 24 bits).
const (
	renderBlocks     = 16
	maxRenderSamples = 1 << 24
)

// The reasons render_check gives for a bad sample (REC_* of ops.cu), in the order of its checks.
const (
	recKind = 1 + iota
	recSrc
	recShort
	recMagic
	recFields
	recSize
	recDims
	recAxis
	recOrient
	recGrids
	recBlocksN
	recPixels
	recBlock
	recPair
	recScratch
)

// RenderRecords is four launches (ops.cu: render_check, render_idct, render_hpass, render_vpass)
// over the batch, render_check leaving the first bad sample in a mapped host word that the other
// three read (they do nothing after a bad one) and a host function after them turns into the
// stream's error.
func (o *cudaOps) RenderRecords(gs gpu.Stream, dst, src kernels.U8, offsets kernels.I32, ws kernels.U8, n, channels, h, w int) error {
	const op = "render records"
	s, e0 := o.stream(op, gs)
	dp, e1 := o.u8(op, "dst", dst)
	sp, e2 := o.u8(op, "src", src)
	offp, e3 := o.i32(op, "offsets", offsets)
	wsp, e4 := o.u8(op, "workspace", ws)
	if err := firstErr(e0, e1, e2, e3, e4); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if n > maxRenderSamples {
		return fmt.Errorf("cuda: %w: %s: %d samples; the cuda op set takes at most %d", kernels.ErrArgument, op, n, maxRenderSamples)
	}
	slot, err := o.host.get()
	if err != nil {
		return err
	}
	status := (*uint64)(slot.host)
	*status = ^uint64(0)
	pixels, slotLen := channels*h*w, ws.Len/n
	grid := renderBlocks * min(n, maxBlocks/renderBlocks)
	for _, l := range []struct {
		name string
		grid int
		args []uint64
	}{
		{"render_check", min(n, maxBlocks), []uint64{parg(sp), iarg(src.Len), parg(offp), iarg(n), iarg(pixels), iarg(slotLen), parg(slot.dev)}},
		{"render_idct", grid, []uint64{parg(sp), parg(offp), iarg(n), parg(wsp), iarg(slotLen), parg(slot.dev)}},
		{"render_hpass", grid, []uint64{parg(sp), parg(offp), iarg(n), parg(wsp), iarg(slotLen), parg(slot.dev)}},
		{"render_vpass", grid, []uint64{parg(dp), parg(sp), parg(offp), iarg(n), iarg(pixels), parg(wsp), iarg(slotLen), parg(slot.dev)}},
	} {
		// None after a failed one: it would read records render_check did not check. Those before
		// it may still run: the slot is not reused.
		if err := o.launch(s, l.name, l.grid, blockSize, l.args...); err != nil {
			return err
		}
	}
	return gs.Host(func() error {
		key := *status
		o.host.put(slot)
		if key == ^uint64(0) {
			return nil
		}
		return fmt.Errorf("cuda: %s: sample %d: %w", op, key>>40, renderError(int(key>>32&0xff), int64(uint32(key))))
	})
}

// renderError is the error of a bad sample of reason and detail (render_check's), wrapping the
// sentinel the CPU op set's error for it wraps.
func renderError(reason int, detail int64) error {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("record: %s: %w", fmt.Sprintf(format, args...), transforms.ErrCorrupt)
	}
	switch reason {
	case recKind:
		return fmt.Errorf("kind %d; want 0 (pixels) or 1 (a record): %w", int32(detail), kernels.ErrArgument)
	case recSrc:
		return fmt.Errorf("its offset is outside src, or its pixels run past its end: %w", kernels.ErrShape)
	case recShort:
		return corrupt("shorter than its header")
	case recMagic:
		return corrupt("magic or version")
	case recFields:
		return corrupt("channels, components, scale, flags or filter")
	case recSize:
		return corrupt("size against its counts or the bytes of src after it")
	case recDims:
		return corrupt("output or image size")
	case recAxis:
		return corrupt("axis %d", detail)
	case recOrient:
		return corrupt("base and steps")
	case recGrids:
		return corrupt("component %d", detail)
	case recBlocksN:
		return corrupt("the grids' blocks and the record's differ")
	case recBlock:
		return corrupt("block %d: pairs outside the record", detail)
	case recPair:
		return corrupt("pair %d: index >= 64", detail)
	case recPixels:
		return fmt.Errorf("a record of another number of pixels than the sample's: %w", transforms.ErrShape)
	case recScratch:
		return fmt.Errorf("the record needs %d bytes of scratch (at least), more than its slot of the workspace: %w", detail, kernels.ErrShape)
	}
	return fmt.Errorf("render_check reason %d", reason)
}
