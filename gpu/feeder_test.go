package gpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stoke-ml/stoke/pinned"
)

const (
	imgBytes = 3000
	labBytes = 4
)

type feedRig struct {
	dev     Device
	compute Stream
	pool    *pinned.Pool
	f       *Feeder

	mu     sync.Mutex
	copies []Copy // what FeederConfig.Copied reported
}

func newRig(t *testing.T, ring, prefetch int, compute bool) *feedRig {
	t.Helper()
	return newRigWith(t, ring, prefetch, compute, pinned.Heap())
}

func newRigWith(t *testing.T, ring, prefetch int, compute bool, alloc pinned.Allocator) *feedRig {
	t.Helper()
	r := &feedRig{dev: openCPU(t)}
	if compute {
		r.compute = newStream(t, r.dev)
	}
	var err error
	r.pool, err = pinned.NewPool(pinned.Config{SlotSize: imgBytes + labBytes, Prefetch: prefetch, Allocator: alloc, Poison: true})
	if err != nil {
		t.Fatal(err)
	}
	copied := func(c Copy) {
		r.mu.Lock()
		r.copies = append(r.copies, c)
		r.mu.Unlock()
	}
	r.f, err = NewFeeder(FeederConfig{Device: r.dev, Compute: r.compute, Sizes: []int{imgBytes, labBytes}, Ring: ring, Copied: copied})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.f.Close(); err != nil {
			t.Errorf("feeder Close() = %v; want nil", err)
		}
		if r.compute != nil {
			if err := r.compute.Close(); err != nil {
				t.Errorf("compute Close() = %v; want nil", err)
			}
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

var regions = []Region{{0, imgBytes}, {imgBytes, labBytes}}

// produce fills batch i with byte(i) images and label i, and feeds it.
func (r *feedRig) produce(ctx context.Context, i int) (*DeviceBatch, error) {
	s, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	mem := s.Bytes()
	for k := range imgBytes {
		mem[k] = byte(i)
	}
	binary.LittleEndian.PutUint32(mem[imgBytes:], uint32(i))
	return r.f.Feed(ctx, s, regions...)
}

// checkBatch verifies a batch's device contents; it runs as a compute-stream kernel.
func checkBatch(b *DeviceBatch, i int) error {
	img, ok1 := HostBytes(b.Buffers[0])
	lab, ok2 := HostBytes(b.Buffers[1])
	if !ok1 || !ok2 {
		return errors.New("no host bytes")
	}
	if want := bytes.Repeat([]byte{byte(i)}, imgBytes); !bytes.Equal(img[:b.Lens[0]], want) {
		return fmt.Errorf("batch %d images = [%d %d ...]; want all %d (slot reused or poisoned before its copy)", i, img[0], img[1], byte(i))
	}
	if got := binary.LittleEndian.Uint32(lab); got != uint32(i) {
		return fmt.Errorf("batch %d label = %d; want %d", i, got, i)
	}
	return nil
}

// pump runs a producer feeding n batches into ch, with random delays.
func (r *feedRig) pump(ctx context.Context, g *errgroup.Group, n int, ch chan<- *DeviceBatch, seed uint64) {
	g.Go(func() error {
		defer close(ch)
		rnd := rand.New(rand.NewPCG(seed, 1))
		for i := range n {
			if rnd.IntN(3) == 0 {
				time.Sleep(time.Duration(rnd.IntN(300)) * time.Microsecond)
			}
			b, err := r.produce(ctx, i)
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

// TestFeederNoEarlyReuse: with poisoned slots, a slow compute stream and random delays on both
// sides, every device batch holds exactly what was written into its slot: no slot was released
// (poisoned, refilled) before its copy had read it, and no buffer set was overwritten while the
// compute stream was still reading it.
func TestFeederNoEarlyReuse(t *testing.T) {
	for _, tc := range []struct {
		ring, prefetch int
		alloc          pinned.Allocator
	}{{1, 0, pinned.Heap()}, {2, 1, pinned.Heap()}, {3, 2, pinned.Locked()}, {4, 4, pinned.Heap()}} {
		t.Run(fmt.Sprintf("ring%d_prefetch%d", tc.ring, tc.prefetch), func(t *testing.T) {
			r := newRigWith(t, tc.ring, tc.prefetch, true, tc.alloc)
			ctx := context.Background()
			g, gctx := errgroup.WithContext(ctx)
			ch := make(chan *DeviceBatch)
			const n = 60
			r.pump(gctx, g, n, ch, uint64(tc.ring))
			rnd := rand.New(rand.NewPCG(9, uint64(tc.prefetch)))
			i := 0
			for b := range ch {
				if err := b.Deliver(); err != nil {
					t.Fatal(err)
				}
				delay := time.Duration(rnd.IntN(400)) * time.Microsecond
				idx := i
				r.compute.Host(func() error {
					if err := checkBatch(b, idx); err != nil {
						return err
					}
					time.Sleep(delay)
					return checkBatch(b, idx) // still intact: the next copy waits for us
				})
				if err := b.Release(); err != nil {
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
		})
	}
}

// TestFeederOverlap: the copy of batch i+1 completes while the compute stream works on batch i
// (not after it: copies overlap compute). With a ring of two buffer sets it also cannot complete
// before the compute of batch i-1, whose buffers it reuses, has ended.
func TestFeederOverlap(t *testing.T) {
	for _, ring := range []int{2, 3} {
		t.Run(fmt.Sprintf("ring%d", ring), func(t *testing.T) {
			r := newRig(t, ring, 2, true)
			ctx := context.Background()
			g, gctx := errgroup.WithContext(ctx)
			ch := make(chan *DeviceBatch, 2)
			const n, work = 6, 15 * time.Millisecond
			r.pump(gctx, g, n, ch, 1)
			var ready []Event
			computeEnd := make([]time.Time, n)
			i := 0
			for b := range ch {
				b.Deliver()
				ready = append(ready, b.Ready)
				idx := i
				r.compute.Host(func() error {
					time.Sleep(work)
					computeEnd[idx] = time.Now()
					return checkBatch(b, idx)
				})
				b.Release()
				i++
			}
			if err := errors.Join(g.Wait(), r.compute.Synchronize(ctx)); err != nil {
				t.Fatal(err)
			}
			t0 := ready[0].(*cpuEvent).at
			for i := 1; i+1 < n; i++ {
				copied := ready[i+1].(*cpuEvent).at
				if !copied.Before(computeEnd[i]) {
					t.Errorf("copy of batch %d done at +%v; want before compute of batch %d ends at +%v", i+1, copied.Sub(t0), i, computeEnd[i].Sub(t0))
				}
				if ring == 2 && copied.Before(computeEnd[i-1]) {
					t.Errorf("copy of batch %d done at +%v; want after compute of batch %d (same buffers) ends at +%v", i+1, copied.Sub(t0), i-1, computeEnd[i-1].Sub(t0))
				}
			}
		})
	}
}

// TestFeederBoundedStalledConsumer: a consumer that stops releasing stops the producer; neither
// slots nor device buffers grow, and cancelling frees everything.
func TestFeederBoundedStalledConsumer(t *testing.T) {
	const ring, prefetch = 2, 1
	r := newRig(t, ring, prefetch, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	ch := make(chan *DeviceBatch)
	r.pump(gctx, g, 1000, ch, 3)
	var held []*DeviceBatch
	for range ring {
		held = append(held, <-ch) // take batches, never release them
	}
	time.Sleep(30 * time.Millisecond)
	fs, ps := r.f.Stats(), r.pool.Stats()
	if fs.Batches > ring+1 || ps.MaxInUse > ps.Slots {
		t.Errorf("stalled consumer: %d batches fed, %d of %d slots used at most; want <= %d batches", fs.Batches, ps.MaxInUse, ps.Slots, ring+1)
	}
	cancel()
	for range ch { // the producer may have had one more batch to hand over
	}
	if err := g.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("producer after cancel = %v; want %v", err, context.Canceled)
	}
	for _, b := range held {
		b.Release()
	}
	r.compute.Synchronize(context.Background())
}

// TestFeederCancelMidEpoch: cancelling while batches are in every state returns every slot and
// joins every goroutine (goleak checks the latter in TestMain).
func TestFeederCancelMidEpoch(t *testing.T) {
	for _, stopAt := range []int{0, 1, 5, 17} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			r := newRig(t, 3, 2, true)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g, gctx := errgroup.WithContext(ctx)
			ch := make(chan *DeviceBatch)
			r.pump(gctx, g, 1000, ch, uint64(stopAt))
			i := 0
			for b := range ch {
				b.Deliver()
				r.compute.Host(func() error { time.Sleep(200 * time.Microsecond); return nil })
				if i == stopAt {
					cancel()
				}
				b.Release()
				i++
			}
			if err := g.Wait(); !errors.Is(err, context.Canceled) {
				t.Errorf("producer = %v; want %v", err, context.Canceled)
			}
			// newRig's cleanup closes the feeder and checks that every slot is free.
		})
	}
}

func TestFeederStats(t *testing.T) {
	r := newRig(t, 2, 1, false)
	ctx := context.Background()
	const n = 5
	for i := range n {
		b, err := r.produce(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Deliver(); err != nil { // no compute stream: nothing to do
			t.Fatal(err)
		}
		if err := b.Ready.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
		if err := checkBatch(b, i); err != nil {
			t.Error(err)
		}
		b.Release()
	}
	// Flush: every copy fed is accounted and reported, and its slot is back in the pool.
	if err := r.f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := r.f.Stats()
	if ps := r.pool.Stats(); ps.Free != ps.Slots {
		t.Errorf("after Flush: %d of %d slots free; want all", ps.Free, ps.Slots)
	}
	r.mu.Lock()
	copies := append([]Copy(nil), r.copies...)
	r.mu.Unlock()
	if len(copies) != n {
		t.Fatalf("Copied called %d times; want %d", len(copies), n)
	}
	for i, c := range copies {
		if c.Seq != int64(i) || c.Bytes != imgBytes+labBytes || c.End.Before(c.Start) {
			t.Errorf("copy %d reported as %+v; want Seq %d, %d bytes, Start <= End", i, c, i, imgBytes+labBytes)
		}
	}
	if st.Batches != n || st.Bytes != n*(imgBytes+labBytes) {
		t.Errorf("Stats() batches, bytes = %d, %d; want %d, %d", st.Batches, st.Bytes, n, n*(imgBytes+labBytes))
	}
	if st.CopyTime <= 0 || st.GBps() <= 0 {
		t.Errorf("Stats() CopyTime, GBps = %v, %v; want > 0", st.CopyTime, st.GBps())
	}
	if st.Pinned {
		t.Errorf("Stats().Pinned = true for heap slots; want false")
	}
	if got := (FeederStats{Bytes: 2e9, CopyTime: time.Second}).GBps(); got != 2 {
		t.Errorf("GBps(2e9 bytes in 1s) = %v; want 2", got)
	}
}

func TestFeederMisuse(t *testing.T) {
	r := newRig(t, 1, 0, true)
	ctx := context.Background()
	feedWith := func(regs ...Region) error {
		s, err := r.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		_, err = r.f.Feed(ctx, s, regs...)
		if st, serr := s.State(); serr == nil {
			t.Errorf("slot after a failed Feed is %v; want released", st)
		}
		return err
	}
	tests := []struct {
		name string
		regs []Region
	}{
		{"too few regions", []Region{{0, 1}}},
		{"region past slot", []Region{{0, imgBytes}, {imgBytes, labBytes + 1}}},
		{"region over buffer", []Region{{0, imgBytes + 1}, {0, 1}}},
		{"negative", []Region{{-1, 1}, {0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := feedWith(tt.regs...); !errors.Is(err, ErrRange) {
				t.Errorf("Feed(%v) = %v; want %v", tt.regs, err, ErrRange)
			}
		})
	}
	// A slot that the producer already marked Ready (Feed does that) is refused, and released
	// (with stoke_invariants, pinned panics on that misuse instead).
	if !slotMisusePanics {
		s, _ := r.pool.Acquire(ctx)
		s.Ready()
		if _, err := r.f.Feed(ctx, s, regions...); !errors.Is(err, pinned.ErrState) {
			t.Errorf("Feed(ready slot) = %v; want %v", err, pinned.ErrState)
		}
	}
	b, err := r.produce(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	// The ring has one entry, held: Feed waits until ctx ends.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := r.produce(tctx, 8); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Feed with every buffer set held = %v; want %v", err, context.DeadlineExceeded)
	}
	if err := b.Release(); err != nil {
		t.Errorf("Release() = %v", err)
	}
	if err := b.Release(); !errors.Is(err, ErrReleased) {
		t.Errorf("second Release() = %v; want %v", err, ErrReleased)
	}
	if err := b.Deliver(); !errors.Is(err, ErrReleased) {
		t.Errorf("Deliver() after Release = %v; want %v", err, ErrReleased)
	}
	if err := r.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := feedWith(regions...); !errors.Is(err, ErrClosed) {
		t.Errorf("Feed after Close = %v; want %v", err, ErrClosed)
	}
}

func TestFeederConfig(t *testing.T) {
	d := openCPU(t)
	tests := []struct {
		name string
		cfg  FeederConfig
		want error
	}{
		{"no device", FeederConfig{Sizes: []int{1}}, ErrNoDevice},
		{"no sizes", FeederConfig{Device: d}, ErrRange},
		{"zero size", FeederConfig{Device: d, Sizes: []int{1, 0}}, ErrRange},
		{"negative ring", FeederConfig{Device: d, Sizes: []int{1}, Ring: -1}, ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewFeeder(tt.cfg); !errors.Is(err, tt.want) {
				t.Errorf("NewFeeder(%s) = %v; want %v", tt.name, err, tt.want)
			}
		})
	}
}

// failingCopies is a device whose streams fail every host-to-device copy when they run it.
type failingCopies struct{ Device }

func (d failingCopies) NewStream() (Stream, error) {
	s, err := d.Device.NewStream()
	return failingStream{s}, err
}

type failingStream struct{ Stream }

var errDMA = errors.New("dma failed")

func (s failingStream) CopyH2D(Buffer, int, []byte) error {
	return s.Host(func() error { return errDMA })
}

// TestFeederFailedCopyStream: a copy stream that fails does not strand slots: every slot goes
// back to the pool and Close reports the failure.
func TestFeederFailedCopyStream(t *testing.T) {
	dev := openCPU(t)
	pool, err := pinned.NewPool(pinned.Config{SlotSize: 16, Prefetch: 2, Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFeeder(FeederConfig{Device: failingCopies{dev}, Sizes: []int{16}, Ring: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 {
		s, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		b, err := f.Feed(ctx, s, Region{0, 16})
		if err != nil {
			t.Fatalf("batch %d: Feed = %v; want the failure to show on the stream, not at enqueue", i, err)
		}
		if err := b.Ready.Synchronize(ctx); !errors.Is(err, errDMA) {
			t.Errorf("batch %d: Ready.Synchronize() = %v; want %v", i, err, errDMA)
		}
		b.Release()
	}
	if err := f.Close(); !errors.Is(err, errDMA) {
		t.Errorf("Close() = %v; want %v", err, errDMA)
	}
	if st := pool.Stats(); st.Free != st.Slots {
		t.Errorf("after a failed copy stream: %d of %d slots free; want all", st.Free, st.Slots)
	}
	if err := pool.Close(); err != nil {
		t.Errorf("pool Close() = %v; want nil", err)
	}
}

// TestFeederCloseWakesBlockedFeed: Close while a Feed waits for a buffer set makes it return
// ErrClosed, and the slot it was given goes back to the pool.
func TestFeederCloseWakesBlockedFeed(t *testing.T) {
	r := newRig(t, 1, 1, true)
	ctx := context.Background()
	held, err := r.produce(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := r.produce(ctx, 1)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := r.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("blocked Feed after Close = %v; want %v", err, ErrClosed)
	}
	if err := held.Release(); err != nil { // frees the buffers now that the feeder is closed
		t.Errorf("Release() after Close = %v; want nil", err)
	}
	if _, ok := HostBytes(held.Buffers[0]); ok {
		t.Errorf("buffers of a batch released after Close are not freed")
	}
}

// TestFeederCloseWhileFeeding closes the feeder at random moments while a producer feeds and a
// consumer releases: the producer stops with ErrClosed and every slot returns to the pool.
func TestFeederCloseWhileFeeding(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newRig(t, 2, 1, true)
			ctx := context.Background()
			g, gctx := errgroup.WithContext(ctx)
			ch := make(chan *DeviceBatch)
			r.pump(gctx, g, 1000, ch, seed)
			g.Go(func() error {
				time.Sleep(time.Duration(rand.New(rand.NewPCG(seed, 5)).IntN(3000)) * time.Microsecond)
				return r.f.Close()
			})
			for b := range ch {
				b.Deliver()
				b.Release()
			}
			if err := g.Wait(); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("producer after Close = %v; want nil or %v", err, ErrClosed)
			}
			r.compute.Synchronize(ctx)
			// newRig's cleanup checks that every slot is free.
		})
	}
}
