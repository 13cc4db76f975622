//go:build cuda

package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/pinned"
)

// openCUDA opens cuda:0 or skips: these tests run on a GPU host (go test -tags cuda ./gpu/cuda/) and
// skip, not fail, on a machine whose driver or GPU is missing.
func openCUDA(t testing.TB) gpu.Device {
	t.Helper()
	d, err := gpu.Open("cuda")
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
	})
	return d
}

func TestCUDAInfo(t *testing.T) {
	d := openCUDA(t)
	info := d.Info()
	if info.Backend != "cuda" || info.Name == "" || info.Memory <= 0 || info.ComputeCapability == "" {
		t.Errorf("Info() = %+v; want backend cuda with a name, memory and compute capability", info)
	}
	infos, err := cudaBackend{}.Devices()
	if err != nil || len(infos) == 0 || infos[0] != info {
		t.Errorf("Devices() = %v, %v; want [%v ...]", infos, err, info)
	}
	if _, err := gpu.Open(fmt.Sprintf("cuda:%d", len(infos))); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("Open(cuda:%d) = %v; want ErrNoDevice", len(infos), err)
	}
}

// TestCUDANoDevice runs where the driver reports no GPU (scripts/cuda-check.sh sets
// FAKECUDA_NODEVICE=1 for its stand-in driver): Open and Devices fail with ErrNoDevice.
func TestCUDANoDevice(t *testing.T) {
	if os.Getenv("FAKECUDA_NODEVICE") != "1" {
		t.Skip("needs a driver without a GPU: FAKECUDA_NODEVICE=1 with internal/cudainc/fake")
	}
	if d, err := gpu.Open("cuda"); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("Open(cuda) = %v, %v; want ErrNoDevice", d, err)
	}
	if infos, err := (cudaBackend{}).Devices(); len(infos) != 0 || !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("Devices() = %v, %v; want none, ErrNoDevice", infos, err)
	}
}

func TestCUDARoundTrip(t *testing.T) {
	d := openCUDA(t)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []int{1, 511, 4096, 3<<20 + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(i*7 + n)
			}
			b, err := d.Alloc(n + 16)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free()
			got := make([]byte, n)
			if err := s.CopyH2D(b, 16, src); err != nil {
				t.Fatal(err)
			}
			if err := s.CopyD2H(got, b, 16); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) {
				t.Errorf("round trip of %d bytes differs", n)
			}
		})
	}
}

func TestCUDAArgumentErrors(t *testing.T) {
	d := openCUDA(t)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := d.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := gpu.Open("cpu")
	defer cpu.Close()
	cb, _ := cpu.Alloc(8)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"past end", s.CopyH2D(b, 4, make([]byte, 5)), gpu.ErrRange},
		{"negative offset", s.CopyD2H(make([]byte, 1), b, -1), gpu.ErrRange},
		{"cpu buffer", s.CopyH2D(cb, 0, make([]byte, 1)), gpu.ErrForeign},
		{"nil host function", s.Host(nil), gpu.ErrRange},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: error = %v; want %v", tt.name, tt.err, tt.want)
		}
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); !errors.Is(err, gpu.ErrFreed) {
		t.Errorf("second Free() = %v; want ErrFreed", err)
	}
	if err := s.CopyH2D(b, 0, make([]byte, 1)); !errors.Is(err, gpu.ErrFreed) {
		t.Errorf("CopyH2D(freed) = %v; want ErrFreed", err)
	}
}

// TestCUDAHostOrder checks that host functions run in stream order, after the copies before them.
func TestCUDAHostOrder(t *testing.T) {
	d := openCUDA(t)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _ := d.Alloc(4)
	defer b.Free()
	host := make([]byte, 4)
	var order []int
	for i := range 50 {
		if err := s.CopyH2D(b, 0, []byte{byte(i), 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		if err := s.CopyD2H(host, b, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Host(func() error {
			if int(host[0]) != i {
				return fmt.Errorf("host function %d saw copy %d", i, host[0])
			}
			order = append(order, i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatalf("Synchronize() = %v", err)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("order[%d] = %d; want %d", i, v, i)
		}
	}
	if len(order) != 50 {
		t.Errorf("%d host functions ran; want 50", len(order))
	}
}

func TestCUDAStickyError(t *testing.T) {
	d := openCUDA(t)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var after atomic.Bool
	_ = s.Host(func() error { return boom })
	_ = s.Host(func() error { after.Store(true); return nil })
	e, err := s.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Synchronize(context.Background()); !errors.Is(err, boom) {
		t.Errorf("event Synchronize() = %v; want %v", err, boom)
	}
	if err := s.Synchronize(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Synchronize() = %v; want %v", err, boom)
	}
	if after.Load() {
		t.Error("host function after the failure ran; want skipped")
	}
	_ = s.Host(func() error { panic("kernel bug") })
	if err := s.Close(); !errors.Is(err, boom) {
		t.Errorf("Close() = %v; want %v", err, boom)
	}
	if err := s.Host(func() error { return nil }); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Host after Close = %v; want ErrClosed", err)
	}
}

// TestCUDACrossStreamWait makes a consumer stream wait for an event of a producer stream that is
// held back by a slow host function: the consumer's host function must see the producer's work.
func TestCUDACrossStreamWait(t *testing.T) {
	d := openCUDA(t)
	prod, _ := d.NewStream()
	defer prod.Close()
	cons, _ := d.NewStream()
	defer cons.Close()
	var produced, seen atomic.Int32
	for i := range 20 {
		_ = prod.Host(func() error {
			time.Sleep(time.Millisecond)
			produced.Store(int32(i + 1))
			return nil
		})
		e, err := prod.Record()
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Wait(e); err != nil {
			t.Fatal(err)
		}
		_ = cons.Host(func() error {
			if p := produced.Load(); p < int32(i+1) {
				return fmt.Errorf("consumer step %d ran after only %d producer steps", i, p)
			}
			seen.Add(1)
			return nil
		})
	}
	if err := cons.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seen.Load() != 20 {
		t.Errorf("consumer ran %d steps; want 20", seen.Load())
	}
}

func TestCUDAEventElapsed(t *testing.T) {
	d := openCUDA(t)
	s, _ := d.NewStream()
	defer s.Close()
	start, err := s.Record()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := start.Elapsed(start); err != nil && !errors.Is(err, gpu.ErrNotReady) {
		t.Errorf("Elapsed before completion = %v; want nil or ErrNotReady", err)
	}
	_ = s.Host(func() error { time.Sleep(20 * time.Millisecond); return nil })
	end, _ := s.Record()
	if err := end.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !start.Done() || !end.Done() {
		t.Fatal("events not done after Synchronize")
	}
	el, err := end.Elapsed(start)
	if err != nil || el < 15*time.Millisecond || el > 2*time.Second {
		t.Errorf("Elapsed = %v, %v; want about 20ms", el, err)
	}
	cpu, _ := gpu.Open("cpu")
	defer cpu.Close()
	cs, _ := cpu.NewStream()
	ce, _ := cs.Record()
	if err := s.Wait(ce); !errors.Is(err, gpu.ErrForeign) {
		t.Errorf("Wait(cpu event) = %v; want ErrForeign", err)
	}
	_ = cs.Close()
}

func TestCUDASynchronizeContext(t *testing.T) {
	d := openCUDA(t)
	s, _ := d.NewStream()
	release := make(chan struct{})
	_ = s.Host(func() error { <-release; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := s.Synchronize(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Synchronize(expiring ctx) = %v; want DeadlineExceeded", err)
	}
	close(release)
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}

// TestCUDAAllocCache checks that a freed block is reused by the next allocation of its size
// class, so that a training step does not reach cuMemAlloc.
func TestCUDAAllocCache(t *testing.T) {
	d := openCUDA(t)
	cd := d.(*cudaDevice)
	for _, n := range []int{1, 1000, 1 << 20, 5<<20 + 3} {
		b1, err := d.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		p1, _, _ := Pointer(b1)
		_ = b1.Free()
		b2, err := d.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		p2, _, _ := Pointer(b2)
		if p1 != p2 || b2.Len() != n {
			t.Errorf("Alloc(%d) after Free = %v (len %d); want the cached block %v", n, p2, b2.Len(), p1)
		}
		_ = b2.Free()
	}
	cd.mu.Lock()
	cached := cd.cached
	cd.mu.Unlock()
	if cached == 0 {
		t.Error("cache empty after frees; want the blocks kept")
	}
	cd.trim()
	if cd.cached != 0 || len(cd.live) != 0 {
		t.Errorf("after trim: cached %d, live %d; want 0, 0", cd.cached, len(cd.live))
	}
}

func TestSizeClass(t *testing.T) {
	tests := []struct{ n, want int }{{1, 512}, {512, 512}, {513, 1024}, {1<<20 - 1, 1 << 20}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}}
	for _, tt := range tests {
		if got := sizeClass(tt.n); got != tt.want {
			t.Errorf("sizeClass(%d) = %d; want %d", tt.n, got, tt.want)
		}
	}
}

// TestCUDAPinnedRegistration registers pinned.Locked memory with the device through
// pinned.Registered and copies through it.
func TestCUDAPinnedRegistration(t *testing.T) {
	d := openCUDA(t)
	alloc := pinned.Registered(pinned.Locked(), d.(pinned.Registerer))
	blk, err := alloc.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if !blk.Pinned {
		t.Errorf("Alloc() block not pinned: %s", blk.Reason)
	}
	for i := range blk.Bytes {
		blk.Bytes[i] = byte(i % 251)
	}
	s, _ := d.NewStream()
	defer s.Close()
	b, _ := d.Alloc(len(blk.Bytes))
	defer b.Free()
	back := make([]byte, len(blk.Bytes))
	_ = s.CopyH2D(b, 0, blk.Bytes)
	_ = s.CopyD2H(back, b, 0)
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, blk.Bytes) {
		t.Error("copy through registered memory differs")
	}
	if err := alloc.Free(blk); err != nil {
		t.Errorf("Free() = %v", err)
	}
}

// TestCUDACopyStructField: a host buffer inside a Go object that also holds pointers (as
// train.Trainer's loss read-back is) is a valid copy source and destination. cgo's pointer check
// panicked on it while the address travelled to the driver as an unsafe.Pointer.
func TestCUDACopyStructField(t *testing.T) {
	d := openCUDA(t)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := d.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		name *string
		buf  [4]byte
	}
	name := "x"
	in, out := &holder{name: &name, buf: [4]byte{1, 2, 3, 4}}, &holder{name: &name}
	if err := s.CopyH2D(b, 0, in.buf[:]); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyD2H(out.buf[:], b, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out.buf != in.buf {
		t.Errorf("copied %v; want %v", out.buf, in.buf)
	}
}

// TestCUDALoadMissing needs no GPU: a driver library the dynamic loader cannot find is refused
// with the loader's own message, which names the file.
func TestCUDALoadMissing(t *testing.T) {
	err := loadDriver("libstoke-absent.so.1")
	if err == nil || !strings.Contains(err.Error(), "cannot load the CUDA driver: libstoke-absent.so.1: cannot open shared object file") {
		t.Errorf("loadDriver(libstoke-absent.so.1) = %v; want the loader's error naming the file", err)
	}
}
