//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/opcheck"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/pinned"
)

// side is one backend of a parity test: a device, a stream and its op set.
type side struct {
	dev gpu.Device
	s   gpu.Stream
	ops kernels.Ops
}

func openSide(t *testing.T, name string) *side {
	t.Helper()
	dev, err := gpu.Open(name)
	if err != nil {
		if name == "cuda" {
			t.Skipf("no CUDA device: %v", err)
		}
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
		if err := dev.Close(); err != nil && !errors.Is(err, kernels.ErrLabel) {
			t.Error(err)
		}
	})
	return &side{dev, s, ops}
}

func bytesOf[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

func (sd *side) upload(t *testing.T, b []byte) gpu.Buffer {
	t.Helper()
	buf, err := sd.dev.Alloc(len(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sd.s.CopyH2D(buf, 0, b); err != nil {
		t.Fatal(err)
	}
	// The host slice must stay untouched until the copy ran: wait here, tests are not hot paths.
	if err := sd.s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return buf
}

func (sd *side) f32(t *testing.T, v []float32) kernels.F32 {
	return kernels.Float32s(sd.upload(t, bytesOf(v)))
}
func (sd *side) i32(t *testing.T, v []int32) kernels.I32 {
	return kernels.Int32s(sd.upload(t, bytesOf(v)))
}
func (sd *side) u8(t *testing.T, v []uint8) kernels.U8 { return kernels.Bytes(sd.upload(t, v)) }

// read returns the contents of views (F32, I32 or U8) after the stream has run everything before.
func (sd *side) read(t *testing.T, views ...any) [][]float64 {
	t.Helper()
	out := make([][]float64, len(views))
	var pending []func()
	for i, v := range views {
		var f func()
		switch v := v.(type) {
		case kernels.F32:
			f = readAs[float32](t, sd, v.Buf, v.Off, v.Len, &out[i])
		case kernels.I32:
			f = readAs[int32](t, sd, v.Buf, v.Off, v.Len, &out[i])
		case kernels.U8:
			f = readAs[uint8](t, sd, v.Buf, v.Off, v.Len, &out[i])
		default:
			t.Fatalf("read: view %T", v)
		}
		pending = append(pending, f)
	}
	if err := sd.s.Synchronize(context.Background()); err != nil {
		t.Fatalf("Synchronize() = %v", err)
	}
	for _, f := range pending {
		f()
	}
	return out
}

// readAs enqueues the copy of n elements of type T at element off of buf to the host and returns
// the function that, once the stream has run it, converts them into *dst.
func readAs[T float32 | int32 | uint8](t *testing.T, sd *side, buf gpu.Buffer, off, n int, dst *[]float64) func() {
	t.Helper()
	var zero T
	h := make([]T, n)
	if err := sd.s.CopyD2H(bytesOf(h), buf, off*int(unsafe.Sizeof(zero))); err != nil {
		t.Fatal(err)
	}
	return func() {
		for _, x := range h {
			*dst = append(*dst, float64(x))
		}
	}
}

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func randU8(r *rand.Rand, n int) []uint8 {
	v := make([]uint8, n)
	for i := range v {
		v[i] = uint8(r.IntN(256))
	}
	return v
}

func randLabels(r *rand.Rand, n, classes int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(r.IntN(classes))
	}
	return v
}

// relErr is the largest, over the outputs, of max|got-want| / max|want| within one output.
func relErr(got, want [][]float64) float64 {
	var worst float64
	for i := range want {
		var diff, scale float64
		for j := range want[i] {
			diff = math.Max(diff, math.Abs(got[i][j]-want[i][j]))
			scale = math.Max(scale, math.Abs(want[i][j]))
		}
		if math.IsNaN(diff) || slicesHaveNaN(got[i]) != slicesHaveNaN(want[i]) {
			return math.NaN()
		}
		worst = math.Max(worst, diff/math.Max(scale, 1e-30))
	}
	return worst
}

func slicesHaveNaN(v []float64) bool { return slices.ContainsFunc(v, math.IsNaN) }

// parityCase runs the same op on both sides with the same inputs and returns the output views.
type parityCase struct {
	name string
	tol  float64 // 0: exact
	run  func(t *testing.T, sd *side, r *rand.Rand) []any
}

func f32Len(sd *side, t *testing.T, n int) kernels.F32 {
	t.Helper()
	b, err := sd.dev.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	v := kernels.Float32s(b)
	if err := sd.ops.Fill(sd.s, v, float32(math.NaN())); err != nil { // outputs must not read old contents
		t.Fatal(err)
	}
	return v
}

func i32Len(sd *side, t *testing.T, n int) kernels.I32 {
	t.Helper()
	return sd.i32(t, make([]int32, n))
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func gemmCase(ta, tb bool, m, n, k int) parityCase {
	return parityCase{fmt.Sprintf("gemm ta=%v tb=%v %dx%dx%d", ta, tb, m, n, k), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		a, b, c := sd.f32(t, randF32(r, m*k)), sd.f32(t, randF32(r, k*n)), sd.f32(t, randF32(r, m*n))
		check(t, sd.ops.Gemm(sd.s, ta, tb, m, n, k, 0.5, a, b, 0.25, c))
		return []any{c}
	}}
}

func convCase(g kernels.Conv2D) parityCase {
	return parityCase{fmt.Sprintf("conv2d %+v", g), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		x, w, bias := sd.f32(t, randF32(r, g.InLen())), sd.f32(t, randF32(r, g.WeightLen())), sd.f32(t, randF32(r, g.OutC))
		y, ws := f32Len(sd, t, g.OutLen()), f32Len(sd, t, g.WorkspaceLen())
		check(t, sd.ops.Conv2D(sd.s, y, x, w, bias, ws, g))
		dy := sd.f32(t, randF32(r, g.OutLen()))
		dx, dw, db := f32Len(sd, t, g.InLen()), f32Len(sd, t, g.WeightLen()), f32Len(sd, t, g.OutC)
		check(t, sd.ops.Conv2DBackward(sd.s, dx, dw, db, dy, w, ws, g))
		return []any{y, dx, dw, db}
	}}
}

func poolCase(g kernels.Pool2D) parityCase {
	return parityCase{fmt.Sprintf("maxpool %+v", g), 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
		x := sd.f32(t, randF32(r, g.InLen()))
		y, arg := f32Len(sd, t, g.OutLen()), i32Len(sd, t, g.OutLen())
		check(t, sd.ops.MaxPool2D(sd.s, y, arg, x, g))
		dy, dx := sd.f32(t, randF32(r, g.OutLen())), f32Len(sd, t, g.InLen())
		check(t, sd.ops.MaxPool2DBackward(sd.s, dx, dy, arg, g))
		return []any{y, arg, dx}
	}}
}

// TestCUDAParity runs every op of the op set on the CPU and on the GPU with the same random
// inputs. Data movement, ReLU, pooling and dropout must agree exactly; float arithmetic within
// 1e-6 (ops.cu is compiled without FMA contraction, so it differs only where Go fuses); reductions
// and GEMM-based ops within a relative error of 1e-5 (FP32 cuBLAS, no TF32).
func TestCUDAParity(t *testing.T) {
	const n = 100_003
	cases := []parityCase{
		{"fill", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x := f32Len(sd, t, n)
			check(t, sd.ops.Fill(sd.s, x, 1.5))
			return []any{x}
		}},
		{"copy", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x, y := sd.f32(t, randF32(r, n)), f32Len(sd, t, n)
			check(t, sd.ops.Copy(sd.s, y, x))
			return []any{y}
		}},
		{"axpy scale mul", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x, y, z := sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n)), f32Len(sd, t, n)
			check(t, sd.ops.Axpy(sd.s, y, -0.7, x))
			check(t, sd.ops.Scale(sd.s, x, 3.25))
			check(t, sd.ops.Mul(sd.s, z, x, y))
			return []any{x, y, z}
		}},
		gemmCase(false, false, 1, 1, 1),
		gemmCase(false, false, 37, 53, 29),
		gemmCase(true, false, 64, 10, 784),
		gemmCase(false, true, 128, 256, 512),
		gemmCase(true, true, 33, 17, 65),
		gemmCase(false, false, 5, 7, 0),
		{"bias add and grad", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			const outer, ch, inner = 16, 24, 49
			x, b := sd.f32(t, randF32(r, outer*ch*inner)), sd.f32(t, randF32(r, ch))
			db := f32Len(sd, t, ch)
			check(t, sd.ops.BiasAdd(sd.s, x, b, outer, inner))
			check(t, sd.ops.BiasGrad(sd.s, db, x, outer, inner))
			return []any{x, db}
		}},
		{"relu and grad", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x, dy := sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n))
			y, dx := f32Len(sd, t, n), f32Len(sd, t, n)
			check(t, sd.ops.ReLU(sd.s, y, x))
			check(t, sd.ops.ReLUGrad(sd.s, dx, dy, y))
			return []any{y, dx}
		}},
		{"softmax cross-entropy, argmax, count correct (10 classes)", 1e-5, lossCase(128, 10)},
		{"softmax cross-entropy, argmax, count correct (1000 classes)", 1e-5, lossCase(96, 1000)},
		convCase(kernels.Conv2D{N: 4, InC: 3, InH: 13, InW: 11, OutC: 8, KH: 3, KW: 3, Stride: 1, Pad: 1}),
		convCase(kernels.Conv2D{N: 2, InC: 5, InH: 16, InW: 16, OutC: 6, KH: 5, KW: 5, Stride: 2, Pad: 2}),
		convCase(kernels.Conv2D{N: 3, InC: 1, InH: 28, InW: 28, OutC: 16, KH: 5, KW: 5}),
		poolCase(kernels.Pool2D{N: 3, C: 4, H: 12, W: 10, K: 2}),
		poolCase(kernels.Pool2D{N: 2, C: 3, H: 13, W: 13, K: 3, Stride: 2}),
		{"dropout", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x := sd.f32(t, randF32(r, n))
			y, m := f32Len(sd, t, n), f32Len(sd, t, n)
			check(t, sd.ops.Dropout(sd.s, y, m, x, 0.3, 12345))
			return []any{y, m}
		}},
		{"normalize u8 per channel", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			const imgs, ch, inner = 5, 3, 31 * 29
			src, dst := sd.u8(t, randU8(r, imgs*ch*inner)), f32Len(sd, t, imgs*ch*inner)
			check(t, sd.ops.NormalizeU8(sd.s, dst, src, ch, inner, []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}))
			return []any{dst}
		}},
		{"normalize u8 one statistic", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			src, dst := sd.u8(t, randU8(r, 7*784)), f32Len(sd, t, 7*784)
			check(t, sd.ops.NormalizeU8(sd.s, dst, src, 1, 784, []float32{0.1307}, []float32{0.3081}))
			return []any{dst}
		}},
		{"sgd", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			w, g, v := sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n))
			w2 := sd.f32(t, randF32(r, n))
			check(t, sd.ops.SGDStep(sd.s, w, g, v, kernels.SGD{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-4, Nesterov: true}))
			check(t, sd.ops.SGDStep(sd.s, w2, g, kernels.F32{}, kernels.SGD{LR: 0.05}))
			return []any{w, v, w2}
		}},
		{"count non-finite", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x := randF32(r, n)
			for i := range 37 {
				x[r.IntN(n)] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[i%3]
			}
			xv, cnt := sd.f32(t, x), sd.i32(t, []int32{3})
			check(t, sd.ops.CountNonFinite(sd.s, cnt, xv))
			check(t, sd.ops.CountNonFinite(sd.s, cnt, xv.Slice(0, 1000)))
			return []any{cnt}
		}},
		{"adamw", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			w, g := sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n))
			m, v := sd.f32(t, make([]float32, n)), sd.f32(t, make([]float32, n))
			for step := 1; step <= 3; step++ {
				check(t, sd.ops.AdamWStep(sd.s, w, g, m, v, kernels.F32{}, kernels.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step}))
			}
			return []any{w, m, v}
		}},
		{"adamw amsgrad", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			// A gradient that shrinks each step, so that vmax holds an earlier v where v decays.
			gh := randF32(r, n)
			w, g := sd.f32(t, randF32(r, n)), sd.f32(t, gh)
			m, v, vmax := sd.f32(t, make([]float32, n)), sd.f32(t, make([]float32, n)), sd.f32(t, make([]float32, n))
			for step := 1; step <= 4; step++ {
				check(t, sd.ops.AdamWStep(sd.s, w, g, m, v, vmax, kernels.AdamW{LR: 1e-2, Beta1: 0.8, Beta2: 0.9, Eps: 1e-8, WeightDecay: 0.1,
					Step: step, AMSGrad: true}))
				check(t, sd.ops.Scale(sd.s, g, 0.25))
			}
			return []any{w, m, v, vmax}
		}},
		{"rmsprop", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			w, g := sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n))
			sq, b, ga := sd.f32(t, make([]float32, n)), sd.f32(t, make([]float32, n)), sd.f32(t, make([]float32, n))
			w2, sq2 := sd.f32(t, randF32(r, n)), sd.f32(t, make([]float32, n))
			for range 3 {
				check(t, sd.ops.RMSpropStep(sd.s, w, g, sq, b, ga, kernels.RMSprop{LR: 0.01, Alpha: 0.9, Eps: 0.0316, WeightDecay: 1e-4, Momentum: 0.9, Centered: true}))
				check(t, sd.ops.RMSpropStep(sd.s, w2, g, sq2, kernels.F32{}, kernels.F32{}, kernels.RMSprop{LR: 0.01, Alpha: 0.99, Eps: 1e-8}))
			}
			return []any{w, sq, b, ga, w2, sq2}
		}},
	}
	cases = append(cases, nnParityCases()...)
	cases = append(cases, coreParityCases()...)
	cases = append(cases, renderParityCase())
	checkParityCovers(t, cases)
	gp := openSide(t, "cuda")
	cp := openSide(t, "cpu")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := cp.read(t, tc.run(t, cp, rand.New(rand.NewPCG(uint64(i), 1)))...)
			got := gp.read(t, tc.run(t, gp, rand.New(rand.NewPCG(uint64(i), 1)))...)
			e := relErr(got, want)
			// scripts/gpu-check.sh collects these lines (go test -v) into its report.
			t.Logf("parity %q: relative error %g (tolerance %g)", tc.name, e, tc.tol)
			if !(e <= tc.tol) {
				t.Errorf("%s: relative error %g; want <= %g", tc.name, e, tc.tol)
			}
		})
	}
}

// parityCovers names, for every method of kernels.Ops, the TestCUDAParity case (by name prefix)
// that exercises it: an op added without a parity case fails the test.
var parityCovers = map[string]string{
	"Fill": "fill", "Copy": "copy", "Axpy": "axpy", "Scale": "axpy scale", "Mul": "axpy scale mul", "Gemm": "gemm",
	"BiasAdd": "bias add", "BiasGrad": "bias add and grad", "ReLU": "relu", "ReLUGrad": "relu and grad",
	"SoftmaxCrossEntropy": "softmax cross-entropy", "Argmax": "softmax cross-entropy, argmax",
	"CountCorrect": "softmax cross-entropy, argmax, count correct", "Conv2D": "conv2d", "Conv2DBackward": "conv2d",
	"MaxPool2D": "maxpool", "MaxPool2DBackward": "maxpool", "Dropout": "dropout", "NormalizeU8": "normalize u8",
	"SGDStep": "sgd", "AdamWStep": "adamw", "RMSpropStep": "rmsprop",
	"Add": "add", "GlobalAvgPool": "global average pool", "GlobalAvgPoolBackward": "global average pool and grad",
	"BatchNormTrain": "batch norm", "BatchNormEval": "batch norm", "BatchNormBackward": "batch norm",
	"BatchNormStats": "batch norm over gathered stats", "BatchNormTrainStats": "batch norm over gathered stats",
	"BatchNormBackwardInput":    "batch norm over gathered stats",
	"SoftmaxCrossEntropySmooth": "label-smoothed cross-entropy", "CountNonFinite": "count non-finite",
	"FloatLoss": "float loss", "ToBF16": "bf16 conversions", "FromBF16": "bf16 conversions",
	"ToFP16": "fp16 conversions", "FromFP16": "fp16 conversions",
	"Unary": "unary", "UnaryGrad": "unary", "Binary": "binary", "CopyStrided": "copy strided", "SumTo": "sum to",
	"Softmax": "softmax and backward", "SoftmaxBackward": "softmax and backward", "LayerNorm": "layer norm",
	"LayerNormBackward": "layer norm", "GemmStrided": "gemm strided",
	"DepthwiseConv2D": "depthwise conv2d", "DepthwiseConv2DBackward": "depthwise conv2d",
	"Attention": "attention", "AttentionBackward": "attention", "RenderRecords": "render records",
}

func checkParityCovers(t *testing.T, cases []parityCase) {
	t.Helper()
	ops := reflect.TypeFor[kernels.Ops]()
	for i := range ops.NumMethod() {
		m := ops.Method(i).Name
		if m == "Backend" {
			continue
		}
		prefix, ok := parityCovers[m]
		if !ok {
			t.Errorf("kernels.Ops.%s has no parity case: add one to TestCUDAParity and to parityCovers", m)
			continue
		}
		if !slices.ContainsFunc(cases, func(c parityCase) bool { return strings.HasPrefix(c.name, prefix) }) {
			t.Errorf("parityCovers[%s] = %q names no case of TestCUDAParity", m, prefix)
		}
	}
}

func lossCase(n, classes int) func(t *testing.T, sd *side, r *rand.Rand) []any {
	return func(t *testing.T, sd *side, r *rand.Rand) []any {
		logits := randF32(r, n*classes)
		for i := range logits {
			logits[i] *= 4
		}
		x, y := sd.f32(t, logits), sd.i32(t, randLabels(r, n, classes))
		loss, dl := f32Len(sd, t, 1), f32Len(sd, t, n*classes)
		am, cnt := i32Len(sd, t, n), sd.i32(t, []int32{5})
		check(t, sd.ops.SoftmaxCrossEntropy(sd.s, loss, dl, x, y, n, classes))
		check(t, sd.ops.Argmax(sd.s, am, x, n, classes))
		check(t, sd.ops.CountCorrect(sd.s, cnt, x, y, n, classes))
		return []any{loss, dl, am, cnt}
	}
}

// TestCUDALabelOutOfRange checks that a bad label becomes the stream's sticky ErrLabel, naming the
// sample and its label, as on the CPU.
func TestCUDALabelOutOfRange(t *testing.T) {
	sd := openSide(t, "cuda")
	x, y := sd.f32(t, make([]float32, 4*3)), sd.i32(t, []int32{0, 2, 7, -1})
	loss, dl := f32Len(sd, t, 1), f32Len(sd, t, 4*3)
	check(t, sd.ops.SoftmaxCrossEntropy(sd.s, loss, dl, x, y, 4, 3))
	err := sd.s.Synchronize(context.Background())
	if !errors.Is(err, kernels.ErrLabel) {
		t.Fatalf("Synchronize() = %v; want ErrLabel", err)
	}
	if want := "sample 2 of the batch has label 7"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
}

// TestCUDAForeignOperands checks that CPU buffers and streams are refused before anything runs.
func TestCUDAForeignOperands(t *testing.T) {
	gp := openSide(t, "cuda")
	cp := openSide(t, "cpu")
	cx := cp.f32(t, []float32{1, 2})
	gx := gp.f32(t, []float32{1, 2})
	if err := gp.ops.Fill(gp.s, cx, 0); !errors.Is(err, kernels.ErrBuffer) {
		t.Errorf("Fill(cpu buffer) = %v; want ErrBuffer", err)
	}
	if err := gp.ops.Fill(cp.s, gx, 0); !errors.Is(err, kernels.ErrArgument) {
		t.Errorf("Fill(cpu stream) = %v; want ErrArgument", err)
	}
	if err := gp.ops.Copy(gp.s, gx, gx.Slice(0, 1)); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("Copy(2, 1 elements) = %v; want ErrShape", err)
	}
}

// TestCUDAChecks: the CUDA op set sits behind package kernels' checks. Every bad call of
// opcheck.Cases, made with CPU buffers, gets the checks' error; the op set itself would say
// ErrBuffer.
func TestCUDAChecks(t *testing.T) {
	gp, cpu := openSide(t, "cuda"), openSide(t, "cpu")
	for _, c := range opcheck.Cases(t, cpu.dev, cpu.s) {
		for _, b := range c.Bad {
			if err := b.Call(gp.ops, gp.s); !errors.Is(err, b.Want) {
				t.Errorf("%s: %s: error %v; want %v", c.Method, b.Name, err, b.Want)
			}
		}
	}
}

// TestCUDAFeederKernel: a kernel on the compute stream reads every batch that the Feeder copied on
// its own stream, ordered only by DeviceBatch.Deliver's stream wait; the normalized values must be
// those of the batch's slot (on the CPU stand-in an asynchronous copy lands late, so a missing
// wait reads the ring's previous contents).
func TestCUDAFeederKernel(t *testing.T) {
	sd := openSide(t, "cuda")
	const size, n = 64 << 10, 24
	pool, err := pinned.NewPool(pinned.Config{SlotSize: size, Prefetch: 1, Allocator: pinned.Registered(pinned.Locked(), sd.dev.(pinned.Registerer))})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	f, err := gpu.NewFeeder(gpu.FeederConfig{Device: sd.dev, Compute: sd.s, Sizes: []int{size}, Ring: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x := f32Len(sd, t, size)
	ctx := context.Background()
	for i := range n {
		slot, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mem := slot.Bytes()
		for k := range mem {
			mem[k] = byte(i*7 + k%3)
		}
		b, err := f.Feed(ctx, slot, gpu.Region{Off: 0, Len: size})
		if err != nil {
			t.Fatal(err)
		}
		check(t, b.Deliver())
		check(t, sd.ops.NormalizeU8(sd.s, x, kernels.Bytes(b.Buffers[0]).Slice(0, size), 1, size, nil, []float32{1.0 / 255}))
		check(t, b.Release())
		got := sd.read(t, x)[0]
		for k, v := range got {
			if want := float64(byte(i*7 + k%3)); v != want {
				t.Fatalf("batch %d element %d = %v; want %v (the kernel ran before the batch's copy)", i, k, v, want)
			}
		}
	}
}

// TestCUDAOpSetEndsWithDevice: a device keeps one op set (kernels.For twice gives it), Close
// releases it (its cuBLAS handle with it), a closed device makes none, and the device opened
// again gets a new one that works.
func TestCUDAOpSetEndsWithDevice(t *testing.T) {
	for round := range 2 {
		dev := openCUDA(t)
		a, err := kernels.For(dev)
		if err != nil {
			t.Fatal(err)
		}
		b, err := kernels.For(dev)
		if err != nil {
			t.Fatal(err)
		}
		cd := dev.(*cudaDevice)
		if cd.ops == nil {
			t.Fatalf("round %d: no op set kept by the device after kernels.For", round)
		}
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		buf, err := dev.Alloc(4 * 1000)
		if err != nil {
			t.Fatal(err)
		}
		x := kernels.Float32s(buf)
		for _, o := range []kernels.Ops{a, b} {
			if err := o.Fill(s, x, 2); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Synchronize(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := dev.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if cd.ops != nil {
			t.Errorf("round %d: the closed device still holds its op set", round)
		}
		if _, err := kernels.For(dev); !errors.Is(err, gpu.ErrClosed) {
			t.Errorf("round %d: kernels.For(closed device) error %v; want gpu.ErrClosed", round, err)
		}
	}
}
