package kernels_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// ExampleForPrecision multiplies in bf16: 1 + 2^-10 has no bf16 value (8 significand bits), so the
// product of the rounded operands is 1, where fp32 keeps the 2^-10. On a "cuda" device the same
// call multiplies bf16 copies of the operands with cuBLAS's GemmEx.
func ExampleForPrecision() {
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	s, _ := dev.NewStream()
	fp32, _ := kernels.ForPrecision(dev, kernels.FP32)
	bf16, _ := kernels.ForPrecision(dev, kernels.BF16)

	buf, _ := dev.Alloc(4 * 4)
	v := kernels.Float32s(buf) // a, b, and the two products
	_ = fp32.Fill(s, v.Slice(0, 1), 1+1.0/1024)
	_ = fp32.Fill(s, v.Slice(1, 2), 3)
	_ = fp32.Gemm(s, false, false, 1, 1, 1, 1, v.Slice(0, 1), v.Slice(1, 2), 0, v.Slice(2, 3))
	_ = bf16.Gemm(s, false, false, 1, 1, 1, 1, v.Slice(0, 1), v.Slice(1, 2), 0, v.Slice(3, 4))

	out := make([]float32, 4)
	_ = s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 16), buf, 0)
	_ = s.Synchronize(context.Background())
	fmt.Println("fp32:", out[2], "bf16:", out[3])
	// Output: fp32: 3.0029297 bf16: 3
}

func TestPrecisionRound(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	p2 := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, c := range []struct {
		p       kernels.Precision
		in, out float32
	}{
		{kernels.BF16, 1 + p2(-8), 1},                    // a tie: to the even 1
		{kernels.BF16, 1 + 3*p2(-8), 1 + p2(-6)},         // a tie: to the even 1+2^-6
		{kernels.BF16, 1 + p2(-8) + p2(-20), 1 + p2(-7)}, // above the tie
		{kernels.BF16, -3.1415927, -3.140625},
		{kernels.BF16, math.MaxFloat32, inf},
		{kernels.BF16, p2(-130), p2(-130)}, // fp32's subnormals are bf16's
		{kernels.BF16, -inf, -inf},
		{kernels.FP16, 65504, 65504},
		{kernels.FP16, 65519, 65504},
		{kernels.FP16, 65520, inf}, // the tie with 65536, one past the largest half
		{kernels.FP16, -70000, -inf},
		{kernels.FP16, 1 + p2(-11), 1},
		{kernels.FP16, 1 + 3*p2(-11), 1 + p2(-9)},
		{kernels.FP16, 0.001, 0.0010004044},
		{kernels.FP16, p2(-14), p2(-14)},         // the smallest normal half
		{kernels.FP16, p2(-24), p2(-24)},         // the smallest subnormal
		{kernels.FP16, p2(-25), 0},               // a tie with 0
		{kernels.FP16, -1.5 * p2(-24), -p2(-23)}, // a tie: to the even 2 units
		{kernels.FP16, 0.75 * p2(-24), p2(-24)},
		{kernels.FP16, p2(-14) - p2(-25), p2(-14)}, // a subnormal rounding up to the smallest normal
		{kernels.FP32, 1 + p2(-20), 1 + p2(-20)},
	} {
		if got := c.p.Round(c.in); got != c.out {
			t.Errorf("%s round(%g) = %g; want %g", c.p, c.in, got, c.out)
		}
	}
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		if got := p.Round(nan); got == got {
			t.Errorf("%s round(NaN) = %g; want NaN", p, got)
		}
	}
}

func TestForPrecisionErrors(t *testing.T) {
	e := newEnv(t)
	if _, err := kernels.ForPrecision(e.dev, "fp8"); !errors.Is(err, kernels.ErrArgument) {
		t.Errorf("ForPrecision(fp8) error = %v; want ErrArgument", err)
	}
	if _, err := kernels.ForPrecision(nil, kernels.BF16); !errors.Is(err, kernels.ErrArgument) {
		t.Errorf("ForPrecision(nil device) error = %v; want ErrArgument", err)
	}
	// A registered backend without reduced precisions says so.
	if _, err := kernels.ForPrecision(recorderDevice{e.dev}, kernels.FP16); !errors.Is(err, kernels.ErrNoBackend) || !strings.Contains(err.Error(), "fp32 only") {
		t.Errorf("ForPrecision(recorder, fp16) error = %v; want ErrNoBackend saying fp32 only", err)
	}
	// A backend's MixedPrecision that refuses, or returns nothing, is an error naming the op set.
	for _, tc := range []struct {
		name string
		mp   halfOnly
		want error
	}{{"refuses", halfOnly{err: errNoFP16}, errNoFP16}, {"returns nil", halfOnly{}, kernels.ErrNoBackend}} {
		theHalfOnly = tc.mp
		_, err := kernels.ForPrecision(halfOnlyDevice{e.dev}, kernels.FP16)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), halfOnlyBackend) {
			t.Errorf("ForPrecision of a backend whose WithPrecision %s: error %v; want %v naming the op set", tc.name, err, tc.want)
		}
	}
	// The package's argument checks stand in front of the precision's op set too.
	bf16, err := kernels.ForPrecision(e.dev, kernels.BF16)
	if err != nil {
		t.Fatal(err)
	}
	if err := bf16.Gemm(e.s, false, false, 2, 2, 2, 1, e.f32(t, 1, 2, 3), e.f32(t, 1, 2, 3, 4), 0, e.f32(t, 0, 0, 0, 0)); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("bf16 Gemm with a 3-element a for 2x2: error %v; want ErrShape", err)
	}
}

func randVals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func rounded(p kernels.Precision, v []float32) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = p.Round(f)
	}
	return out
}

// TestCPUPrecisionEmulation: the CPU op set of a reduced precision gives bit for bit the fp32
// products of the rounded operands (and not the fp32 products of the operands themselves).
func TestCPUPrecisionEmulation(t *testing.T) {
	e := newEnv(t)
	r := rand.New(rand.NewPCG(1, 2))
	const m, n, k = 17, 23, 31
	a, b := randVals(r, m*k), randVals(r, k*n)
	g := kernels.Conv2D{N: 2, InC: 3, InH: 9, InW: 7, OutC: 4, KH: 3, KW: 3, Stride: 2, Pad: 1}
	x, w, bias, dy := randVals(r, g.InLen()), randVals(r, g.WeightLen()), randVals(r, g.OutC), randVals(r, g.OutLen())
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		t.Run(string(p), func(t *testing.T) {
			ops, err := kernels.ForPrecision(e.dev, p)
			if err != nil {
				t.Fatal(err)
			}
			// run computes the Gemm and the convolution's passes with ops on the given operands; the
			// bias gradient always comes from dyBias.
			run := func(ops kernels.Ops, a, b, x, w, dy, dyBias []float32) [][]float32 {
				c := e.f32(t, make([]float32, m*n)...)
				y, ws := e.f32(t, make([]float32, g.OutLen())...), e.f32(t, make([]float32, g.WorkspaceLen())...)
				dx, dw, db := e.f32(t, make([]float32, g.InLen())...), e.f32(t, make([]float32, g.WeightLen())...), e.f32(t, make([]float32, g.OutC)...)
				wv := e.f32(t, w...)
				noErr(t, ops.Gemm(e.s, true, false, m, n, k, 1, e.f32(t, a...), e.f32(t, b...), 0, c))
				noErr(t, ops.Conv2D(e.s, y, e.f32(t, x...), wv, e.f32(t, bias...), ws, g))
				noErr(t, ops.Conv2DBackward(e.s, dx, dw, kernels.F32{}, e.f32(t, dy...), wv, ws, g))
				noErr(t, e.ops.BiasGrad(e.s, db, e.f32(t, dyBias...), g.N, g.OutH()*g.OutW()))
				return [][]float32{e.read(t, c), e.read(t, y), e.read(t, dx), e.read(t, dw), e.read(t, db)}
			}
			got := run(ops, a, b, x, w, dy, dy)
			want := run(e.ops, rounded(p, a), rounded(p, b), rounded(p, x), rounded(p, w), rounded(p, dy), dy)
			raw := run(e.ops, a, b, x, w, dy, dy)
			names := []string{"gemm", "conv y", "conv dx", "conv dw", "conv dbias"}
			for i := range got {
				same, sameRaw := true, true
				for j := range got[i] {
					same = same && got[i][j] == want[i][j]
					sameRaw = sameRaw && got[i][j] == raw[i][j]
				}
				if !same {
					t.Errorf("%s: %s differs from the fp32 result of the rounded operands", p, names[i])
				}
				if sameRaw && names[i] != "conv dbias" {
					t.Errorf("%s: %s is the fp32 result of the unrounded operands: nothing was rounded", p, names[i])
				}
			}
			// Through Conv2DBackward's own bias gradient too.
			wv, ws := e.f32(t, w...), e.f32(t, make([]float32, g.WorkspaceLen())...)
			y, dw, db := e.f32(t, make([]float32, g.OutLen())...), e.f32(t, make([]float32, g.WeightLen())...), e.f32(t, make([]float32, g.OutC)...)
			noErr(t, ops.Conv2D(e.s, y, e.f32(t, x...), wv, kernels.F32{}, ws, g))
			noErr(t, ops.Conv2DBackward(e.s, kernels.F32{}, dw, db, e.f32(t, dy...), wv, ws, g))
			if gd, wd := e.read(t, db), got[4]; fmt.Sprint(gd) != fmt.Sprint(wd) {
				t.Errorf("%s: Conv2DBackward's dbias %v; want the fp32 sums of dy %v", p, gd, wd)
			}
			if gw := e.read(t, dw); fmt.Sprint(gw) != fmt.Sprint(got[3]) {
				t.Errorf("%s: dw without dx %v; want %v", p, gw, got[3])
			}
		})
	}
}

func TestCountNonFinite(t *testing.T) {
	e := newEnv(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	x := e.f32(t, 1, inf, nan, -inf, math.MaxFloat32, 0, -math.MaxFloat32, 1e-45)
	count := e.i32(t, 2)
	noErr(t, e.ops.CountNonFinite(e.s, count, x))
	noErr(t, e.ops.CountNonFinite(e.s, count, x.Slice(4, 8)))
	got := make([]int32, 1)
	if err := e.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), 4), count.Buf, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got[0] != 5 {
		t.Errorf("count = %d; want 2 + 3 non-finite + 0", got[0])
	}
	if err := e.ops.CountNonFinite(e.s, e.i32(t, 0, 0), x); err == nil {
		t.Error("CountNonFinite with a 2-element count: no error")
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestConversions16: ToBF16 and ToFP16 round as collective.F32ToBF16 and collective.F32ToFP16 do (the host's
// all-reduce of 16-bit gradients), to the nearest with ties to even, NaN kept, fp16 overflowing
// to Inf and keeping subnormals; FromBF16 and FromFP16 widen exactly.
func TestConversions16(t *testing.T) {
	e := newEnv(t)
	vals := []float32{1, -1, 1 + 1.0/256, 1 + 3.0/256, 3.1415927, 1e-40, float32(math.Inf(-1)), float32(math.NaN()), 65504, -0,
		1 + 1.0/2048, 1 + 3.0/2048, 65520, -1e6, 3e-6, 0x1p-25, 3 * 0x1p-25}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		vals = append(vals, float32(r.NormFloat64()*math.Pow(10, float64(r.IntN(20)-10))))
	}
	src := e.f32(t, vals...)
	buf, err := e.dev.Alloc(2 * len(vals))
	if err != nil {
		t.Fatal(err)
	}
	b16 := kernels.Bytes(buf)
	back := e.f32(t, make([]float32, len(vals))...)
	for _, c := range []struct {
		name     string
		to       func(gpu.Stream, kernels.U8, kernels.F32) error
		from     func(gpu.Stream, kernels.F32, kernels.U8) error
		want     func(float32) float32
		ties     [2]float32 // vals[2:4] in bf16, vals[10:12] in fp16: 1+1/256 and 1+3/256 or 1+1/2048 and 1+3/2048
		tieIndex int
	}{
		{"bf16", e.ops.ToBF16, e.ops.FromBF16, func(v float32) float32 { return collective.BF16ToF32(collective.F32ToBF16(v)) }, [2]float32{1, 1 + 4.0/256}, 2},
		{"fp16", e.ops.ToFP16, e.ops.FromFP16, func(v float32) float32 { return collective.FP16ToF32(collective.F32ToFP16(v)) }, [2]float32{1, 1 + 4.0/2048}, 10},
	} {
		if err := c.to(e.s, b16, src); err != nil {
			t.Fatal(err)
		}
		if err := c.from(e.s, back, b16); err != nil {
			t.Fatal(err)
		}
		got := e.read(t, back)
		for i, v := range vals {
			want := c.want(v)
			if math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
				t.Fatalf("%s(%v) = %v; want %v", c.name, v, got[i], want)
			}
		}
		if k := c.tieIndex; got[k] != c.ties[0] || got[k+1] != c.ties[1] { // ties to even
			t.Errorf("%s ties: %v, %v round to %v, %v; want %v", c.name, vals[k], vals[k+1], got[k], got[k+1], c.ties)
		}
		if c.name == "fp16" {
			if !math.IsInf(float64(got[12]), 1) || !math.IsInf(float64(got[13]), -1) || got[8] != 65504 {
				t.Errorf("fp16: 65504, 65520, -1e6 round to %v, %v, %v; want 65504, +Inf, -Inf", got[8], got[12], got[13])
			}
			if got[15] != 0 || got[16] != 0x1p-23 || got[5] != 0 { // subnormal ties to even, 1e-40 to 0
				t.Errorf("fp16: 2^-25, 3*2^-25, 1e-40 round to %v, %v, %v; want 0, 2^-23, 0", got[15], got[16], got[5])
			}
		}
	}
}

// halfOnly is the op set of a backend that implements MixedPrecision but gives no fp16 op set:
// the CPU op set's methods, and WithPrecision's answer set by the test.
type halfOnly struct {
	kernels.Ops
	err error
}

func (h halfOnly) WithPrecision(kernels.Precision) (kernels.Ops, error) { return nil, h.err }

const halfOnlyBackend = "half-only (kernels test)"

var (
	theHalfOnly halfOnly
	errNoFP16   = errors.New("no fp16 here")
)

func init() {
	kernels.Register(halfOnlyBackend, func(gpu.Device) (kernels.Ops, error) {
		return halfOnly{Ops: kernels.CPU(), err: theHalfOnly.err}, nil
	})
}

// halfOnlyDevice is a CPU device that says it belongs to the half-only backend.
type halfOnlyDevice struct{ gpu.Device }

func (d halfOnlyDevice) Info() gpu.Info {
	i := d.Device.Info()
	i.Backend = halfOnlyBackend
	return i
}
