//go:build cuda

package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/pinned"
)

// The feeder's ordering tests (gpu/feeder_test.go) on a GPU: copy stream and compute stream are
// CUDA streams, slots are pinned.Locked memory registered with the driver, and the compute stream
// reads each batch back with device-to-host copies.

const (
	imgBytes = 3000
	labBytes = 4
)

type feedRig struct {
	dev     gpu.Device
	compute gpu.Stream
	pool    *pinned.Pool
	f       *gpu.Feeder
}

func newCUDARig(t *testing.T, ring, prefetch int) *feedRig {
	t.Helper()
	r := &feedRig{dev: openCUDA(t)} // its cleanup, registered first, runs last
	var err error
	if r.compute, err = r.dev.NewStream(); err != nil {
		t.Fatal(err)
	}
	alloc := pinned.Registered(pinned.Locked(), r.dev.(pinned.Registerer))
	r.pool, err = pinned.NewPool(pinned.Config{SlotSize: imgBytes + labBytes, Prefetch: prefetch, Allocator: alloc, Poison: true})
	if err != nil {
		t.Fatal(err)
	}
	r.f, err = gpu.NewFeeder(gpu.FeederConfig{Device: r.dev, Compute: r.compute, Sizes: []int{imgBytes, labBytes}, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.f.Close(); err != nil {
			t.Errorf("feeder Close() = %v; want nil", err)
		}
		if err := r.compute.Close(); err != nil {
			t.Errorf("compute Close() = %v; want nil", err)
		}
		if st := r.pool.Stats(); st.Free != st.Slots {
			t.Errorf("after feeder Close: %d of %d slots free; want all", st.Free, st.Slots)
		}
		if err := r.pool.Close(); err != nil {
			t.Errorf("pool Close() = %v; want nil", err)
		}
	})
	return r
}

// pump runs a producer feeding n batches into ch, with random delays: batch i is byte(i) images
// and label i.
func (r *feedRig) pump(ctx context.Context, g *errgroup.Group, n int, ch chan<- *gpu.DeviceBatch, seed uint64) {
	g.Go(func() error {
		defer close(ch)
		rnd := rand.New(rand.NewPCG(seed, 1))
		for i := range n {
			if rnd.IntN(3) == 0 {
				time.Sleep(time.Duration(rnd.IntN(300)) * time.Microsecond)
			}
			s, err := r.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			mem := s.Bytes()
			for k := range imgBytes {
				mem[k] = byte(i)
			}
			binary.LittleEndian.PutUint32(mem[imgBytes:], uint32(i))
			b, err := r.f.Feed(ctx, s, gpu.Region{Off: 0, Len: imgBytes}, gpu.Region{Off: imgBytes, Len: labBytes})
			if err != nil {
				return err
			}
			select {
			case ch <- b:
			case <-ctx.Done():
				return errors.Join(ctx.Err(), b.Release())
			}
		}
		return nil
	})
}

// enqueueCUDACheck enqueues on the compute stream a read-back of batch b into host (pinned, so the
// copies are asynchronous) and a host function that checks it holds batch i.
func enqueueCUDACheck(s gpu.Stream, b *gpu.DeviceBatch, i int, host []byte) error {
	img, lab := host[:imgBytes], host[imgBytes:imgBytes+labBytes]
	return errors.Join(
		s.CopyD2H(img, b.Buffers[0], 0),
		s.CopyD2H(lab, b.Buffers[1], 0),
		s.Host(func() error {
			if want := bytes.Repeat([]byte{byte(i)}, imgBytes); !bytes.Equal(img, want) {
				return fmt.Errorf("batch %d images = [%d %d ...]; want all %d (slot reused or poisoned before its copy)", i, img[0], img[1], byte(i))
			}
			if got := binary.LittleEndian.Uint32(lab); got != uint32(i) {
				return fmt.Errorf("batch %d label = %d; want %d", i, got, i)
			}
			return nil
		}))
}

// TestCUDAFeederNoEarlyReuse: with poisoned pinned slots, a slow compute stream and random delays on
// both sides, every batch read back on the compute stream holds what was written into its slot,
// before and after a delay: slots are released only after their copy's event, and buffer sets are
// reused only after the compute stream's event.
func TestCUDAFeederNoEarlyReuse(t *testing.T) {
	for _, tc := range []struct{ ring, prefetch int }{{1, 0}, {2, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("ring%d_prefetch%d", tc.ring, tc.prefetch), func(t *testing.T) {
			r := newCUDARig(t, tc.ring, tc.prefetch)
			alloc := pinned.Registered(pinned.Locked(), r.dev.(pinned.Registerer))
			blk, err := alloc.Alloc(imgBytes + labBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer alloc.Free(blk)
			ctx := context.Background()
			g, gctx := errgroup.WithContext(ctx)
			ch := make(chan *gpu.DeviceBatch)
			const n = 60
			r.pump(gctx, g, n, ch, uint64(tc.ring))
			rnd := rand.New(rand.NewPCG(9, uint64(tc.prefetch)))
			i := 0
			for b := range ch {
				if err := b.Deliver(); err != nil {
					t.Fatal(err)
				}
				delay := time.Duration(rnd.IntN(400)) * time.Microsecond
				// One host buffer serves every check: the compute stream runs them in order.
				err := errors.Join(
					enqueueCUDACheck(r.compute, b, i, blk.Bytes),
					r.compute.Host(func() error { time.Sleep(delay); return nil }),
					enqueueCUDACheck(r.compute, b, i, blk.Bytes),
					b.Release())
				if err != nil {
					t.Fatal(err)
				}
				i++
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := r.compute.Synchronize(ctx); err != nil {
				t.Fatalf("compute stream: %v", err)
			}
			if i != n {
				t.Errorf("consumed %d batches; want %d", i, n)
			}
			if st := r.f.Stats(); !st.Pinned {
				t.Error("Stats().Pinned = false for registered slots; want true")
			}
		})
	}
}

// TestCUDAFeederOverlap: with compute that takes longer than a copy, the copy of batch i+1 completes
// before the compute of batch i ends (measured by device events on both streams).
func TestCUDAFeederOverlap(t *testing.T) {
	r := newCUDARig(t, 3, 2)
	ctx := context.Background()
	g, gctx := errgroup.WithContext(ctx)
	ch := make(chan *gpu.DeviceBatch, 2)
	const n, work = 6, 15 * time.Millisecond
	r.pump(gctx, g, n, ch, 1)
	var ready, computeEnd []gpu.Event
	for b := range ch {
		if err := b.Deliver(); err != nil {
			t.Fatal(err)
		}
		ready = append(ready, b.Ready)
		_ = r.compute.Host(func() error { time.Sleep(work); return nil })
		e, err := r.compute.Record()
		if err != nil {
			t.Fatal(err)
		}
		computeEnd = append(computeEnd, e)
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(g.Wait(), r.compute.Synchronize(ctx)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i+1 < n; i++ {
		// Elapsed(from computeEnd[i] to ready[i+1]) < 0: the copy finished first.
		d, err := ready[i+1].Elapsed(computeEnd[i])
		if err != nil {
			t.Fatal(err)
		}
		if d >= 0 {
			t.Errorf("copy of batch %d completed %v after the compute of batch %d; want before", i+1, d, i)
		}
	}
}
