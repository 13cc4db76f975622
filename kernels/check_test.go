package kernels_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/opcheck"
	"github.com/stoke-ml/stoke/kernels"
)

// recorder is an op set registered by a test, as a user registers a backend: it runs nothing and
// records which methods were called. Every call that reaches it passed the checks of For.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) called(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
	return nil
}

// take returns the calls recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// Backend names the recorder's backend; its ops are recorder_gen_test.go's, generated from the
// table of kernels/internal/opdef.
func (r *recorder) Backend() string { return recorderBackend }

const recorderBackend = "recorder (kernels test)"

var theRecorder = &recorder{}

func init() {
	kernels.Register(recorderBackend, func(gpu.Device) (kernels.Ops, error) { return theRecorder, nil })
}

// recorderDevice is a CPU device that says it belongs to the recorder's backend, so that For
// picks the recorder; its buffers are the CPU device's.
type recorderDevice struct{ gpu.Device }

func (d recorderDevice) Info() gpu.Info {
	i := d.Device.Info()
	i.Backend = recorderBackend
	return i
}

// TestChecksForEveryBackend: for every Ops method, calls with wrong arguments return the right
// sentinel on the CPU backend and on a backend registered by the test, which they never reach;
// the good calls run on the CPU and reach the registered backend. The checks are the package's,
// not a backend's.
func TestChecksForEveryBackend(t *testing.T) {
	e := newEnv(t)
	cases := opcheck.Cases(t, e.dev, e.s)
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.Method] = true
	}
	ops := reflect.TypeFor[kernels.Ops]()
	for i := range ops.NumMethod() {
		if m := ops.Method(i).Name; m != "Backend" && !covered[m] {
			t.Errorf("kernels.Ops.%s has no case in opcheck.Cases", m)
		}
	}

	rec, err := kernels.For(recorderDevice{e.dev})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Backend(); got != recorderBackend {
		t.Fatalf("For(recorder device).Backend() = %q", got)
	}
	theRecorder.take()
	for _, c := range cases {
		t.Run(c.Method, func(t *testing.T) {
			if err := c.Good(e.ops, e.s); err != nil {
				t.Fatalf("cpu: good call: %v", err)
			}
			if err := c.Good(rec, e.s); err != nil {
				t.Fatalf("recorder: good call: %v", err)
			}
			if got := theRecorder.take(); len(got) != 1 || got[0] != c.Method {
				t.Fatalf("recorder: good call reached %v; want [%s]", got, c.Method)
			}
			for _, b := range c.Bad {
				for _, side := range []struct {
					name string
					ops  kernels.Ops
				}{{"cpu", e.ops}, {"recorder", rec}} {
					err := b.Call(side.ops, e.s)
					if !errors.Is(err, b.Want) {
						t.Errorf("%s: %s: error %v; want %v", side.name, b.Name, err, b.Want)
					}
					if err != nil && !strings.Contains(err.Error(), ": ") {
						t.Errorf("%s: %s: error %q names no op", side.name, b.Name, err)
					}
				}
				if got := theRecorder.take(); len(got) != 0 {
					t.Errorf("%s: the rejected call reached the backend (%v)", b.Name, got)
				}
			}
		})
	}
	if err := e.s.Synchronize(context.Background()); err != nil {
		t.Fatalf("stream error after the good and the rejected calls: %v", err)
	}
}

// TestCheckMessages: the errors name the op and what mismatched, as the backends' did.
func TestCheckMessages(t *testing.T) {
	e := newEnv(t)
	x4, x3 := e.f32(t, 1, 2, 3, 4), e.f32(t, 1, 2, 3)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{e.ops.Copy(e.s, x4, x3), "kernels: shape mismatch: copy: dst has 4 elements; want 3"},
		{e.ops.Fill(e.s, kernels.F32{Buf: x4.Buf, Off: 2, Len: 4}, 0), "kernels: shape mismatch: fill: x bytes [8,24) outside its buffer of 16 bytes"},
		{e.ops.Dropout(e.s, x4, x4, x4, 1, 0), "kernels: invalid argument: dropout: p = 1; want [0,1)"},
		{e.ops.ReLU(e.s, x4.Slice(1, 4), x4.Slice(0, 3)), "kernels: invalid argument: relu: y overlaps x"},
		{e.ops.Fill(nil, x4, 0), "kernels: invalid argument: fill: nil stream"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error %v; want %q", tc.err, tc.want)
		}
	}
}

// opaqueBuffer is a backend's buffer type that cannot be compared with ==.
type opaqueBuffer struct{ mem []byte }

func (b opaqueBuffer) Len() int    { return len(b.mem) }
func (b opaqueBuffer) Free() error { return nil }

// TestChecksIncomparableBuffers: the overlap check does not compare buffers that Go cannot
// compare (it would panic); such buffers are taken as distinct.
func TestChecksIncomparableBuffers(t *testing.T) {
	e := newEnv(t)
	rec, err := kernels.For(recorderDevice{e.dev})
	if err != nil {
		t.Fatal(err)
	}
	theRecorder.take()
	b := opaqueBuffer{make([]byte, 16)}
	if err := rec.Copy(e.s, kernels.Float32s(b), kernels.Float32s(b)); err != nil {
		t.Fatal(err)
	}
	if got := theRecorder.take(); len(got) != 1 {
		t.Fatalf("calls %v; want [Copy]", got)
	}
}

// BenchmarkChecks times the argument checks alone: calls to the recorder backend through For
// (checked) and directly (raw), for an op of 3 operands and one of 8.
func BenchmarkChecks(b *testing.B) {
	e := newEnv(b)
	checked, err := kernels.For(recorderDevice{e.dev})
	if err != nil {
		b.Fatal(err)
	}
	x, y := e.f32(b, make([]float32, 4)...), e.f32(b, make([]float32, 4)...)
	var c [6]kernels.F32
	for i := range c {
		c[i] = e.f32(b, 0, 0)
	}
	bn := kernels.BatchNorm{N: 2, C: 2, HW: 1, Momentum: 0.1, Eps: 1e-5}
	for _, o := range []struct {
		name string
		ops  kernels.Ops
	}{{"raw", theRecorder}, {"checked", checked}} {
		b.Run("mul/"+o.name, func(b *testing.B) {
			for b.Loop() {
				_ = o.ops.Mul(e.s, x, x, y)
				theRecorder.take()
			}
		})
		b.Run("batch norm/"+o.name, func(b *testing.B) {
			for b.Loop() {
				_ = o.ops.BatchNormTrain(e.s, y, x, c[0], c[1], c[2], c[3], c[4], c[5], bn)
				theRecorder.take()
			}
		})
	}
}

// TestConv2DPaddedLenOverflow: a padding whose padded plane (InH+2*Pad)*(InW+2*Pad) wraps
// around to 0 while every other count stays small (a stride that leaves one output) made
// WorkspaceLen 2, so a 2-float workspace passed the checks and the CPU backend panicked writing
// the padded copy. The checks must refuse the geometry.
func TestConv2DPaddedLenOverflow(t *testing.T) {
	g := kernels.Conv2D{N: 1, InC: 1, InH: 2, InW: 2, OutC: 1, KH: 1, KW: 1, Stride: 1 << 32, Pad: 1<<31 - 1}
	if err := g.Validate(); !errors.Is(err, kernels.ErrArgument) {
		t.Fatalf("Validate(%+v) = %v; want ErrArgument", g, err)
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dev.Alloc(4 * 8)
	if err != nil {
		t.Fatal(err)
	}
	v := kernels.Float32s(buf)
	y, x, w, ws := v.Slice(0, 1), v.Slice(1, 5), v.Slice(5, 6), v.Slice(6, 8)
	if err := kernels.CPU().Conv2D(s, y, x, w, kernels.F32{}, ws, g); !errors.Is(err, kernels.ErrArgument) {
		t.Fatalf("Conv2D(%+v) with a %d-float workspace = %v; want ErrArgument", g, ws.Len, err)
	}
	if err := kernels.CPU().Conv2DBackward(s, x, w, kernels.F32{}, y, w, ws, g); !errors.Is(err, kernels.ErrArgument) {
		t.Fatalf("Conv2DBackward(%+v) = %v; want ErrArgument", g, err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
}
