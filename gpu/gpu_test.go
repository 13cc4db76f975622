package gpu

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openCPU(t testing.TB) Device {
	t.Helper()
	d, err := Open("cpu")
	if err != nil {
		t.Fatalf("Open(cpu) error: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("device Close() = %v; want nil", err)
		}
	})
	return d
}

func newStream(t testing.TB, d Device) Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatalf("NewStream() error: %v", err)
	}
	return s
}

func alloc(t testing.TB, d Device, n int) Buffer {
	t.Helper()
	b, err := d.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d) error: %v", n, err)
	}
	return b
}

func TestOpen(t *testing.T) {
	// Package gpu's tests never have the CUDA backend: it is package gpu/cuda, which imports gpu.
	tests := []struct {
		name    string
		wantErr error
		wantMsg string
	}{
		{name: "cpu"},
		{name: "CPU"},
		{name: " cpu:0 "},
		{name: "cpu : 0"},
		{name: "cpu:1", wantErr: ErrNoDevice},
		{name: "cpu:-1", wantErr: ErrNoDevice},
		{name: "cpu:x", wantErr: ErrNoDevice},
		{name: "", wantErr: ErrUnknownBackend},
		{name: "tpu", wantErr: ErrUnknownBackend, wantMsg: "built in: cpu"},
		{name: "cuda", wantErr: ErrUnknownBackend, wantMsg: `import _ "github.com/stoke-ml/stoke/gpu/cuda" and build with ` + "`-tags cuda`"},
		{name: "cuda:3", wantErr: ErrUnknownBackend, wantMsg: "-tags cuda"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Open(tt.name)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Open(%q) error = %v; want nil", tt.name, err)
				}
				if got := d.Info().Backend; got != "cpu" {
					t.Errorf("Open(%q).Info().Backend = %q; want cpu", tt.name, got)
				}
				if err := d.Close(); err != nil {
					t.Errorf("Close() = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open(%q) error = %v; want %v", tt.name, err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "gpu: ") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Open(%q) error = %q; want prefix \"gpu: \" and %q", tt.name, err, tt.wantMsg)
			}
		})
	}
}

func backendByName(name string) (Backend, bool) {
	for _, b := range Backends() {
		if b.Name() == name {
			return b, true
		}
	}
	return nil, false
}

type fakeBackend struct{ name string }

func (f fakeBackend) Name() string             { return f.name }
func (f fakeBackend) Devices() ([]Info, error) { return nil, nil }
func (f fakeBackend) Open(i int) (Device, error) {
	return nil, ErrNoDevice
}

func TestRegisterBackends(t *testing.T) {
	Register(fakeBackend{"zz-fake"})
	Register(fakeBackend{"zz-fake"}) // replaces, does not duplicate
	var names []string
	for _, b := range Backends() {
		names = append(names, b.Name())
	}
	if got, want := strings.Join(names, ","), "cpu,zz-fake"; !strings.Contains(got, want) {
		t.Errorf("Backends() = %s; want sorted, one each, containing %s", got, want)
	}
	if _, err := Open("zz-fake:2"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("Open(zz-fake:2) error = %v; want %v", err, ErrNoDevice)
	}
	cpu, _ := backendByName("cpu")
	infos, err := cpu.Devices()
	if err != nil || len(infos) != 1 || infos[0].Backend != "cpu" || infos[0].Index != 0 {
		t.Errorf("cpu Devices() = %v, %v; want one cpu:0 device", infos, err)
	}
}

func TestAllocAndHostBytes(t *testing.T) {
	d := openCPU(t)
	for _, n := range []int{0, 1, 63, 64, 1000, 1 << 20} {
		b := alloc(t, d, n)
		if b.Len() != n {
			t.Errorf("Alloc(%d).Len() = %d; want %d", n, b.Len(), n)
		}
		h, ok := HostBytes(b)
		if !ok || len(h) != n {
			t.Errorf("HostBytes(Alloc(%d)) = len %d, %v; want len %d, true", n, len(h), ok, n)
		}
		if n > 0 {
			if addr := uintptrOf(h); addr%bufferAlign != 0 {
				t.Errorf("HostBytes(Alloc(%d)) address %% %d = %d; want 0", n, bufferAlign, addr%bufferAlign)
			}
		}
		if err := b.Free(); err != nil {
			t.Errorf("Free() = %v; want nil", err)
		}
		if _, ok := HostBytes(b); ok {
			t.Errorf("HostBytes(freed) ok = true; want false")
		}
		if err := b.Free(); !errors.Is(err, ErrFreed) {
			t.Errorf("second Free() = %v; want %v", err, ErrFreed)
		}
	}
	if _, err := d.Alloc(-1); !errors.Is(err, ErrRange) {
		t.Errorf("Alloc(-1) error = %v; want %v", err, ErrRange)
	}
	if _, ok := HostBytes(nil); ok {
		t.Errorf("HostBytes(nil) ok = true; want false")
	}
}

func TestCopyRoundTrip(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	buf := alloc(t, d, 16)
	src := []byte("0123456789abcdef")
	if err := s.CopyH2D(buf, 0, src[:8]); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyH2D(buf, 8, src[8:]); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if err := s.CopyD2H(got, buf, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatalf("Synchronize() = %v; want nil", err)
	}
	if want := src[5:11]; !bytes.Equal(got, want) {
		t.Errorf("CopyD2H after CopyH2D = %q; want %q", got, want)
	}
}

func TestCopyErrors(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	buf := alloc(t, d, 8)
	freed := alloc(t, d, 8)
	freed.Free()
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"h2d past end", func() error { return s.CopyH2D(buf, 4, make([]byte, 5)) }, ErrRange},
		{"h2d negative offset", func() error { return s.CopyH2D(buf, -1, make([]byte, 1)) }, ErrRange},
		{"h2d offset past end", func() error { return s.CopyH2D(buf, 9, nil) }, ErrRange},
		{"d2h past end", func() error { return s.CopyD2H(make([]byte, 9), buf, 0) }, ErrRange},
		{"d2h negative offset", func() error { return s.CopyD2H(make([]byte, 1), buf, -2) }, ErrRange},
		{"h2d freed", func() error { return s.CopyH2D(freed, 0, make([]byte, 1)) }, ErrFreed},
		{"d2h freed", func() error { return s.CopyD2H(make([]byte, 1), freed, 0) }, ErrFreed},
		{"h2d nil buffer", func() error { return s.CopyH2D(nil, 0, nil) }, ErrForeign},
		{"wait nil event", func() error { return s.Wait(nil) }, ErrForeign},
		{"nil host function", func() error { return s.Host(nil) }, ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); !errors.Is(err, tt.want) {
				t.Errorf("%s = %v; want %v", tt.name, err, tt.want)
			}
		})
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Errorf("Synchronize() after rejected enqueues = %v; want nil (rejections are not sticky)", err)
	}
}

// TestStreamOrder: host functions enqueued from several goroutines run one at a time, and those
// of each goroutine in its order.
func TestStreamOrder(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	const goroutines, each = 4, 200
	var running atomic.Int32
	seen := make([][]int, goroutines) // written only by the stream's executor
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				err := s.Host(func() error {
					if n := running.Add(1); n != 1 {
						t.Errorf("%d host functions running at once; want 1", n)
					}
					seen[g] = append(seen[g], i)
					running.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for g := range goroutines {
		if len(seen[g]) != each {
			t.Fatalf("goroutine %d: %d host functions ran; want %d", g, len(seen[g]), each)
		}
		for i, v := range seen[g] {
			if v != i {
				t.Fatalf("goroutine %d: host function %d ran at position %d; want in order", g, v, i)
			}
		}
	}
}

// TestEventsOrderStreams: work on stream b enqueued after b.Wait(e) runs only after the work
// before e on stream a, even though a is slow.
func TestEventsOrderStreams(t *testing.T) {
	d := openCPU(t)
	a, b := newStream(t, d), newStream(t, d)
	defer a.Close()
	defer b.Close()
	for round := range 20 {
		var aDone, bStart time.Time
		buf := alloc(t, d, 4)
		a.Host(func() error { time.Sleep(time.Duration(round%3) * time.Millisecond); return nil })
		a.CopyH2D(buf, 0, []byte{byte(round), 1, 2, 3})
		a.Host(func() error { aDone = time.Now(); return nil })
		e, err := a.Record()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(e); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		b.Host(func() error { bStart = time.Now(); return nil })
		b.CopyD2H(got, buf, 0)
		if err := b.Synchronize(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !e.Done() {
			t.Fatalf("round %d: event not done after the waiting stream synchronized", round)
		}
		if bStart.Before(aDone) {
			t.Errorf("round %d: stream b started at %v, before a finished at %v", round, bStart, aDone)
		}
		if want := []byte{byte(round), 1, 2, 3}; !bytes.Equal(got, want) {
			t.Errorf("round %d: b read %v; want %v", round, got, want)
		}
	}
}

// TestWaitBlocksWhileEventPending: b really waits while a is held up.
func TestWaitBlocksWhileEventPending(t *testing.T) {
	d := openCPU(t)
	a, b := newStream(t, d), newStream(t, d)
	defer a.Close()
	defer b.Close()
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // even when the test fails, so that Close can drain the stream
	a.Host(func() error { <-release; return nil })
	e, _ := a.Record()
	b.Wait(e)
	var ran atomic.Bool
	b.Host(func() error { ran.Store(true); return nil })
	after, _ := b.Record()
	time.Sleep(20 * time.Millisecond)
	if ran.Load() || after.Done() || e.Done() {
		t.Fatalf("work after Wait ran = %v, event done = %v while the awaited stream was blocked; want false", ran.Load(), after.Done())
	}
	unblock()
	if err := after.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !ran.Load() {
		t.Errorf("work after Wait did not run after the event completed")
	}
}

func TestStickyError(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	boom := errors.New("boom")
	var after atomic.Bool
	s.Host(func() error { return boom })
	s.Host(func() error { after.Store(true); return nil })
	e, _ := s.Record()
	if err := s.Synchronize(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Synchronize() = %v; want %v", err, boom)
	}
	if err := e.Synchronize(context.Background()); !errors.Is(err, boom) {
		t.Errorf("event Synchronize() = %v; want %v", err, boom)
	}
	if after.Load() {
		t.Errorf("host function after a failed one ran; want skipped")
	}
	if err := s.Close(); !errors.Is(err, boom) {
		t.Errorf("Close() = %v; want %v", err, boom)
	}
	if err := s.Host(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Host after Close = %v; want %v", err, ErrClosed)
	}
	if err := s.Close(); !errors.Is(err, boom) {
		t.Errorf("second Close() = %v; want %v", err, boom)
	}
}

func TestHostPanicBecomesError(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	s.Host(func() error { panic("kernel bug") })
	err := s.Synchronize(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kernel bug") || !strings.Contains(err.Error(), "goroutine") {
		t.Errorf("Synchronize() after panic = %v; want error with the panic value and stack", err)
	}
}

func TestFreedWhileQueued(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	hold := make(chan struct{})
	buf := alloc(t, d, 4)
	s.Host(func() error { <-hold; return nil })
	if err := s.CopyH2D(buf, 0, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	buf.Free()
	close(hold)
	if err := s.Synchronize(context.Background()); !errors.Is(err, ErrFreed) {
		t.Errorf("Synchronize() after freeing a queued copy's buffer = %v; want %v", err, ErrFreed)
	}
}

func TestSynchronizeContext(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	hold := make(chan struct{})
	s.Host(func() error { <-hold; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.Synchronize(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Synchronize(expiring ctx) = %v; want %v", err, context.DeadlineExceeded)
	}
	close(hold)
	if err := s.Synchronize(context.Background()); err != nil {
		t.Errorf("Synchronize() = %v; want nil", err)
	}
}

func TestElapsed(t *testing.T) {
	d := openCPU(t)
	s := newStream(t, d)
	defer s.Close()
	hold := make(chan struct{})
	start, _ := s.Record()
	s.Host(func() error { <-hold; time.Sleep(15 * time.Millisecond); return nil })
	end, _ := s.Record()
	if _, err := end.Elapsed(start); !errors.Is(err, ErrNotReady) {
		t.Errorf("Elapsed before completion = %v; want %v", err, ErrNotReady)
	}
	close(hold)
	if err := end.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := end.Elapsed(start)
	if err != nil || got < 15*time.Millisecond {
		t.Errorf("Elapsed() = %v, %v; want >= 15ms, nil", got, err)
	}
	other := openCPU(t)
	os := newStream(t, other)
	defer os.Close()
	oe, _ := os.Record()
	oe.Synchronize(context.Background())
	if _, err := end.Elapsed(oe); !errors.Is(err, ErrForeign) {
		t.Errorf("Elapsed(event of another device) = %v; want %v", err, ErrForeign)
	}
}

func TestDeviceCloseJoinsStreams(t *testing.T) {
	d, err := Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(t, d)
	var ran atomic.Int32
	for range 100 {
		s.Host(func() error { ran.Add(1); return nil })
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close() = %v; want nil", err)
	}
	if got := ran.Load(); got != 100 {
		t.Errorf("host functions run by Close = %d; want 100 (Close drains the queue)", got)
	}
	if _, err := d.NewStream(); !errors.Is(err, ErrClosed) {
		t.Errorf("NewStream after Close = %v; want %v", err, ErrClosed)
	}
	if _, err := d.Alloc(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close = %v; want %v", err, ErrClosed)
	}
	if _, err := s.Record(); !errors.Is(err, ErrClosed) {
		t.Errorf("Record on a stream of a closed device = %v; want %v", err, ErrClosed)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}
