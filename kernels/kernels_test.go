package kernels_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a CPU device, a stream and its op set.
type env struct {
	dev gpu.Device
	s   gpu.Stream
	ops kernels.Ops
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := kernels.For(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil && !errors.Is(err, kernels.ErrLabel) { // ErrLabel: a test's expected sticky error
			t.Error(err)
		}
	})
	return &env{dev, s, ops}
}

func (e *env) f32(t testing.TB, vals ...float32) kernels.F32 {
	t.Helper()
	b, err := e.dev.Alloc(4 * len(vals))
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) > 0 {
		if err := e.s.CopyH2D(b, 0, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))); err != nil {
			t.Fatal(err)
		}
	}
	return kernels.Float32s(b)
}

func (e *env) i32(t testing.TB, vals ...int32) kernels.I32 {
	t.Helper()
	b, err := e.dev.Alloc(4 * len(vals))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.CopyH2D(b, 0, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))); err != nil {
		t.Fatal(err)
	}
	return kernels.Int32s(b)
}

func (e *env) read(t testing.TB, v kernels.F32) []float32 {
	t.Helper()
	out := make([]float32, v.Len)
	if err := e.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*v.Len), v.Buf, 4*v.Off); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestForUnknownBackend(t *testing.T) {
	if _, err := kernels.For(nil); !errors.Is(err, kernels.ErrArgument) {
		t.Fatalf("For(nil) error = %v; want ErrArgument", err)
	}
	if got := kernels.Registered(); len(got) == 0 || got[0] != "cpu" {
		t.Fatalf("Registered() = %v; want it to start with cpu", got)
	}
}

func TestGemmOnStream(t *testing.T) {
	e := newEnv(t)
	a := e.f32(t, 1, 2, 3, 4, 5, 6) // 2x3
	b := e.f32(t, 1, 0, 0, 1, 1, 1) // 3x2
	c := e.f32(t, 100, 100, 100, 100)
	if err := e.ops.Gemm(e.s, false, false, 2, 2, 3, 1, a, b, 0, c); err != nil {
		t.Fatal(err)
	}
	got := e.read(t, c)
	want := []float32{4, 5, 10, 11}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Gemm c[%d] = %v; want %v", i, got[i], want[i])
		}
	}
}

func TestViewsAndOffsets(t *testing.T) {
	e := newEnv(t)
	x := e.f32(t, 1, -2, 3, -4, 5, -6)
	if err := e.ops.ReLU(e.s, x.Slice(2, 6), x.Slice(2, 6)); err != nil {
		t.Fatal(err)
	}
	got := e.read(t, x)
	want := []float32{1, -2, 3, 0, 5, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ReLU over x[2:6]: x[%d] = %v; want %v", i, got[i], want[i])
		}
	}
}

func TestArgumentErrors(t *testing.T) {
	e := newEnv(t)
	x4, x3 := e.f32(t, 1, 2, 3, 4), e.f32(t, 1, 2, 3)
	lab := e.i32(t, 0, 1)
	outside := kernels.F32{Buf: x4.Buf, Off: 2, Len: 4}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"copy lengths", e.ops.Copy(e.s, x4, x3), kernels.ErrShape},
		{"gemm shape", e.ops.Gemm(e.s, false, false, 2, 2, 2, 1, x4, x3, 0, x4), kernels.ErrShape},
		{"view outside buffer", e.ops.Fill(e.s, outside, 0), kernels.ErrShape},
		{"dropout p=1", e.ops.Dropout(e.s, x4, x4, x4, 1, 0), kernels.ErrArgument},
		{"conv no output", e.ops.Conv2D(e.s, x4, x4, x4, kernels.F32{}, x4, kernels.Conv2D{N: 1, InC: 1, InH: 2, InW: 2, OutC: 1, KH: 3, KW: 3}),
			kernels.ErrArgument},
		{"normalize std 0", e.ops.NormalizeU8(e.s, x4, kernels.U8{Buf: x4.Buf, Len: 4}, 1, 4, nil, []float32{0}), kernels.ErrArgument},
		{"adamw step 0", e.ops.AdamWStep(e.s, x4, x4, x4, x4, kernels.F32{}, kernels.AdamW{LR: 1}), kernels.ErrArgument},
		{"ce labels", e.ops.SoftmaxCrossEntropy(e.s, x4.Slice(0, 1), x3, x3, lab, 1, 3), kernels.ErrShape},
		{"nil stream", e.ops.Fill(nil, x4, 0), kernels.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("error = %v; want %v", tc.err, tc.want)
			}
		})
	}
	if err := e.s.Synchronize(context.Background()); err != nil {
		t.Fatalf("stream error after rejected ops = %v; want nil", err)
	}
}

func TestLabelOutOfRangeIsSticky(t *testing.T) {
	e := newEnv(t)
	logits := e.f32(t, 1, 2, 3, 4, 5, 6)
	d := e.f32(t, 0, 0, 0, 0, 0, 0)
	loss := e.f32(t, 0)
	lab := e.i32(t, 1, 7)
	if err := e.ops.SoftmaxCrossEntropy(e.s, loss, d, logits, lab, 2, 3); err != nil {
		t.Fatal(err)
	}
	err := e.s.Synchronize(context.Background())
	if !errors.Is(err, kernels.ErrLabel) {
		t.Fatalf("Synchronize = %v; want ErrLabel", err)
	}
}

func TestLossAndCorrect(t *testing.T) {
	e := newEnv(t)
	logits := e.f32(t, 0, 0, 10, 5, 0, 0)
	d := e.f32(t, 0, 0, 0, 0, 0, 0)
	loss := e.f32(t, 0)
	lab := e.i32(t, 2, 1)
	cnt := e.i32(t, 3)
	if err := e.ops.SoftmaxCrossEntropy(e.s, loss, d, logits, lab, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := e.ops.CountCorrect(e.s, cnt, logits, lab, 2, 3); err != nil {
		t.Fatal(err)
	}
	l := e.read(t, loss)[0]
	// sample 0: -log softmax(10 | 0,0,10); sample 1: -log softmax(0 | 5,0,0)
	want := (math.Log(2+math.Exp(10)) - 10 + math.Log(math.Exp(5)+2)) / 2
	if math.Abs(float64(l)-want) > 1e-5 {
		t.Fatalf("loss = %v; want %v", l, want)
	}
	c := e.read(t, kernels.F32(cnt))
	if got := math.Float32bits(c[0]); got != 4 {
		t.Fatalf("CountCorrect = %d; want 4 (3 + 1 correct)", got)
	}
}

// Example trains nothing: it shows an op set at work on the CPU device.
func Example() {
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	s, _ := dev.NewStream()
	ops, _ := kernels.For(dev)

	buf, _ := dev.Alloc(4 * 4)
	x := kernels.Float32s(buf)
	_ = ops.Fill(s, x, -1)
	_ = ops.Fill(s, x.Slice(0, 2), 3)
	_ = ops.ReLU(s, x, x)
	_ = ops.Scale(s, x, 0.5)

	out := make([]byte, buf.Len())
	_ = s.CopyD2H(out, buf, 0)
	if err := s.Synchronize(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println(unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), 4))
	// Output: [1.5 1.5 0 0]
}
