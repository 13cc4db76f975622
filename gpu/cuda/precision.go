//go:build cuda

package cuda

import (
	"context"
	"slices"
	"sync"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// WithPrecision is the op set of the same device computing its products in p (see
// kernels.ForPrecision): it shares the module, the cuBLAS handle, the mapped host slots and the
// staging memory.
func (o *cudaOps) WithPrecision(p kernels.Precision) (kernels.Ops, error) {
	c := *o
	c.prec = p
	return &c, nil
}

var _ kernels.MixedPrecision = (*cudaOps)(nil)

// reduced reports whether the products' operands are converted to 16 bits.
func (o *cudaOps) reduced() bool { return o.prec == kernels.BF16 || o.prec == kernels.FP16 }

// The fp16 argument of the conversion kernels (to_x16, x16_to_f32, im2col_x16): which 16 bits.
const (
	x16BF16 uint64 = 0
	x16FP16 uint64 = 1
)

// fp16Arg is the fp16 argument of the conversion kernels for the op set's precision.
func (o *cudaOps) fp16Arg() uint64 {
	if o.prec == kernels.FP16 {
		return x16FP16
	}
	return x16BF16
}

// align16 rounds a count of 16-bit elements up to 16 bytes, where cuBLAS's fastest 16-bit paths
// want their operands to start.
func align16(n int) int { return (n + 7) &^ 7 }

// stagingCache keeps one block of device memory per stream for the converted 16-bit operands of
// the products enqueued on it, for the last maxStagingStreams streams that used one. Every product
// on a stream reuses its block: stream order runs one product's conversions only after the product
// before it has read its operands, so no host function has to hand memory back after each product.
// A block grows (never shrinks) when a larger product comes, once its stream has run the products
// that use it; a stream that has not staged for longest gives its block up, after its work, to a
// new one. The blocks live until the device closes. An op holds the cache from stage until it has
// enqueued its product, so that two goroutines enqueueing on one stream do not interleave their
// conversions into the same block.
type stagingCache struct {
	mu      sync.Mutex
	streams []stagingBlock // least recently used first
}

type stagingBlock struct {
	s   gpu.Stream
	buf gpu.Buffer
	p   cu.DevicePtr
}

// maxStagingStreams bounds the streams that keep staging memory (a trainer uses one).
const maxStagingStreams = 4

// staging is a stream's staging memory for one product.
type staging struct{ p cu.DevicePtr }

// at is the address of 16-bit element i.
func (st staging) at(i int) cu.DevicePtr { return st.p + cu.DevicePtr(2*i) }

// stage returns gs's staging memory with room for n 16-bit elements, and done, which the op calls
// once it has enqueued the product (also on an error after stage).
func (o *cudaOps) stage(gs gpu.Stream, n int) (st staging, done func(), err error) {
	c := o.staging
	c.mu.Lock()
	if st, err = c.block(o, gs, n); err != nil {
		c.mu.Unlock()
		return staging{}, nil, err
	}
	return st, c.mu.Unlock, nil
}

// block finds or makes gs's block of at least n 16-bit elements; c.mu is held.
func (c *stagingCache) block(o *cudaOps, gs gpu.Stream, n int) (staging, error) {
	i := slices.IndexFunc(c.streams, func(b stagingBlock) bool { return b.s == gs })
	if i >= 0 && c.streams[i].buf.Len() >= 2*n {
		b := c.streams[i]
		c.streams = append(slices.Delete(c.streams, i, i+1), b)
		return staging{b.p}, nil
	}
	evict := i
	if evict < 0 && len(c.streams) == maxStagingStreams {
		evict = 0
	}
	if evict >= 0 {
		// The block is free once its stream has run what is queued: Synchronize waits for that
		// (and then returns the stream's sticky error, or ErrClosed for a stream whose Close did).
		// Only this op's own stream's error is this op's.
		b := c.streams[evict]
		if err := b.s.Synchronize(context.Background()); err != nil && b.s == gs {
			return staging{}, err
		}
		c.streams = slices.Delete(c.streams, evict, evict+1)
		if err := b.buf.Free(); err != nil {
			return staging{}, err
		}
	}
	buf, err := o.dev.Alloc(2 * n) // its error names the size and the device
	if err != nil {
		return staging{}, err
	}
	p := buf.(*cudaBuffer).ptr
	c.streams = append(c.streams, stagingBlock{gs, buf, p})
	return staging{p}, nil
}

// toHalf converts n floats at src to the op set's 16-bit precision at dst.
func (o *cudaOps) toHalf(s cu.Stream, dst, src cu.DevicePtr, n int) error {
	return o.launchN(s, "to_x16", n, parg(dst), parg(src), iarg(n), o.fp16Arg())
}
