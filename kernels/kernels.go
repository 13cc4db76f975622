package kernels

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/stoke-ml/stoke/gpu"
)

// Sentinel errors; every error of this package wraps one of them or a backend's error.
var (
	// ErrShape: a view's length does not match the dimensions an op was given.
	ErrShape = errors.New("shape mismatch")
	// ErrArgument: a bad parameter (negative size, zero stride, dropout p outside [0,1), ...).
	ErrArgument = errors.New("invalid argument")
	// ErrLabel: a label outside [0, classes) reached a loss or accuracy op. It surfaces as the
	// stream's sticky error, naming the sample.
	ErrLabel = errors.New("label out of range")
	// ErrNoBackend: no op set is registered for the device's backend.
	ErrNoBackend = errors.New("no op set for backend")
	// ErrBuffer: a view's buffer is not memory of this op set's device (for example a CUDA buffer
	// given to the CPU op set).
	ErrBuffer = errors.New("buffer not usable by this op set")
)

// F32 is a view of Len float32 elements starting at element Off of a device buffer. The zero
// F32 is the empty view; ops that accept an optional operand take an empty view as "none".
type F32 struct {
	Buf      gpu.Buffer
	Off, Len int
}

// I32 is a view of Len int32 elements starting at element Off of a device buffer.
type I32 struct {
	Buf      gpu.Buffer
	Off, Len int
}

// U8 is a view of Len bytes starting at byte Off of a device buffer.
type U8 struct {
	Buf      gpu.Buffer
	Off, Len int
}

// Float32s views a whole buffer as float32 (a trailing partial element is left out).
func Float32s(b gpu.Buffer) F32 { return F32{Buf: b, Len: b.Len() / 4} }

// Int32s views a whole buffer as int32.
func Int32s(b gpu.Buffer) I32 { return I32{Buf: b, Len: b.Len() / 4} }

// Bytes views a whole buffer as uint8.
func Bytes(b gpu.Buffer) U8 { return U8{Buf: b, Len: b.Len()} }

// Slice returns elements [i, j) of v. It panics if the range is outside v, like a slice
// expression: slicing is the caller's arithmetic, not outside input.
func (v F32) Slice(i, j int) F32 {
	if i < 0 || j < i || j > v.Len {
		panic(fmt.Sprintf("kernels: F32.Slice(%d, %d) of length %d", i, j, v.Len))
	}
	return F32{Buf: v.Buf, Off: v.Off + i, Len: j - i}
}

// Slice returns elements [i, j) of v; it panics if the range is outside v.
func (v I32) Slice(i, j int) I32 {
	if i < 0 || j < i || j > v.Len {
		panic(fmt.Sprintf("kernels: I32.Slice(%d, %d) of length %d", i, j, v.Len))
	}
	return I32{Buf: v.Buf, Off: v.Off + i, Len: j - i}
}

// Slice returns bytes [i, j) of v; it panics if the range is outside v.
func (v U8) Slice(i, j int) U8 {
	if i < 0 || j < i || j > v.Len {
		panic(fmt.Sprintf("kernels: U8.Slice(%d, %d) of length %d", i, j, v.Len))
	}
	return U8{Buf: v.Buf, Off: v.Off + i, Len: j - i}
}

// Conv2D is the geometry of a 2-D convolution: input x is NCHW [N][InC][InH][InW], weights w are
// [OutC][InC][KH][KW], bias is [OutC], output y is [N][OutC][OutH][OutW]. Stride 0 means 1.
type Conv2D struct {
	N, InC, InH, InW int
	OutC, KH, KW     int
	Stride, Pad      int
}

func (g Conv2D) stride() int { return max(g.Stride, 1) }

// OutH is the output height, (InH + 2*Pad - KH)/Stride + 1.
func (g Conv2D) OutH() int { return (g.InH+2*g.Pad-g.KH)/g.stride() + 1 }

// OutW is the output width, (InW + 2*Pad - KW)/Stride + 1.
func (g Conv2D) OutW() int { return (g.InW+2*g.Pad-g.KW)/g.stride() + 1 }

// InLen, OutLen, WeightLen are the element counts of x, y and w.
func (g Conv2D) InLen() int { return g.N * g.InC * g.InH * g.InW }

// OutLen is the element count of y.
func (g Conv2D) OutLen() int { return g.N * g.OutC * g.OutH() * g.OutW() }

// WeightLen is the element count of w.
func (g Conv2D) WeightLen() int { return g.OutC * g.InC * g.KH * g.KW }

// WorkspaceLen is the float32 count of the workspace Conv2D and Conv2DBackward need: room for the
// batch's column matrix [InC*KH*KW][N*OutH*OutW], for one output-sized matrix
// [OutC][N*OutH*OutW], so that each product is a single GEMM over the whole batch, and for a
// zero-padded copy of the input [N][InC][InH+2*Pad][InW+2*Pad] (the CPU backend's forward pass
// reads the input from it, packing the column matrix from it or, with its direct AVX-512
// kernels, in place, and keeps it for the backward pass, which uses the rest as scratch). What
// a backend keeps there is its own affair; the workspace must reach the backward pass unchanged.
func (g Conv2D) WorkspaceLen() int {
	return (g.InC*g.KH*g.KW+g.OutC)*g.N*g.OutH()*g.OutW() + g.N*g.InC*(g.InH+2*g.Pad)*(g.InW+2*g.Pad)
}

// Validate reports a geometry that has no output or a negative size.
func (g Conv2D) Validate() error {
	if g.N < 0 || g.InC <= 0 || g.InH <= 0 || g.InW <= 0 || g.OutC <= 0 || g.KH <= 0 || g.KW <= 0 ||
		g.Stride < 0 || g.Pad < 0 || g.Pad > (math.MaxInt-max(g.InH, g.InW))/2 || g.InH+2*g.Pad < g.KH || g.InW+2*g.Pad < g.KW ||
		!fits(g.N, g.InC, g.InH, g.InW) || !fits(g.OutC, g.InC, g.KH, g.KW) || !fits(g.InC*g.KH*g.KW+g.OutC, g.N, g.OutH(), g.OutW()) ||
		!fits(g.N, g.InC, g.InH+2*g.Pad, g.InW+2*g.Pad) ||
		(g.InC*g.KH*g.KW+g.OutC)*g.N*g.OutH()*g.OutW() > math.MaxInt-g.N*g.InC*(g.InH+2*g.Pad)*(g.InW+2*g.Pad) {
		// The last two: WorkspaceLen's padded copy of x, and the sum, must not wrap around either.
		return fmt.Errorf("kernels: %w: conv2d geometry %+v", ErrArgument, g)
	}
	return nil
}

// Depthwise2D is the geometry of a depthwise 2-D convolution (a convolution with one group per
// channel and channel multiplier 1, PyTorch's Conv2d with groups = in = out channels): x is
// NCHW [N][C][H][W], weights w are [C][1][K][K] (square kernels), bias is [C], output y is
// [N][C][OutH][OutW]; x is padded with Pad zeros on each side and the window moves Stride pixels
// (0 means 1). Channel c of y sees channel c of x only.
type Depthwise2D struct {
	N, C, H, W     int
	K, Stride, Pad int
}

func (g Depthwise2D) stride() int { return max(g.Stride, 1) }

// OutH is the output height, (H + 2*Pad - K)/Stride + 1.
func (g Depthwise2D) OutH() int { return (g.H+2*g.Pad-g.K)/g.stride() + 1 }

// OutW is the output width, (W + 2*Pad - K)/Stride + 1.
func (g Depthwise2D) OutW() int { return (g.W+2*g.Pad-g.K)/g.stride() + 1 }

// InLen is the element count of x.
func (g Depthwise2D) InLen() int { return g.N * g.C * g.H * g.W }

// OutLen is the element count of y.
func (g Depthwise2D) OutLen() int { return g.N * g.C * g.OutH() * g.OutW() }

// WeightLen is the element count of w, C*K*K.
func (g Depthwise2D) WeightLen() int { return g.C * g.K * g.K }

// Validate reports a geometry that has no output or a negative size.
func (g Depthwise2D) Validate() error {
	if g.N < 0 || g.C <= 0 || g.H <= 0 || g.W <= 0 || g.K <= 0 || g.Stride < 0 || g.Pad < 0 ||
		g.Pad > (math.MaxInt-max(g.H, g.W))/2 || g.H+2*g.Pad < g.K || g.W+2*g.Pad < g.K ||
		!fits(g.N, g.C, g.H, g.W) || !fits(g.C, g.K, g.K) || !fits(g.N, g.C, g.OutH(), g.OutW()) {
		return fmt.Errorf("kernels: %w: depthwise conv2d geometry %+v", ErrArgument, g)
	}
	return nil
}

// Pool2D is the geometry of a max pooling: x is [N][C][H][W], windows K×K every Stride pixels
// (Stride 0 means K) over the input padded with Pad pixels of -Inf on each side (Pad at most K/2,
// as in PyTorch); a partial window at the edge is left out, as in PyTorch.
type Pool2D struct {
	N, C, H, W     int
	K, Stride, Pad int
}

func (g Pool2D) stride() int {
	if g.Stride == 0 {
		return g.K
	}
	return g.Stride
}

// OutH is the output height, (H+2*Pad-K)/Stride + 1.
func (g Pool2D) OutH() int { return (g.H+2*g.Pad-g.K)/g.stride() + 1 }

// OutW is the output width, (W+2*Pad-K)/Stride + 1.
func (g Pool2D) OutW() int { return (g.W+2*g.Pad-g.K)/g.stride() + 1 }

// InLen is the element count of x.
func (g Pool2D) InLen() int { return g.N * g.C * g.H * g.W }

// OutLen is the element count of y (and of the argmax indices).
func (g Pool2D) OutLen() int { return g.N * g.C * g.OutH() * g.OutW() }

// Validate reports a geometry with no output or a negative size.
func (g Pool2D) Validate() error {
	if g.N < 0 || g.C <= 0 || g.H <= 0 || g.W <= 0 || g.K <= 0 || g.Stride < 0 || g.Pad < 0 || 2*g.Pad > g.K || g.H+2*g.Pad < g.K || g.W+2*g.Pad < g.K ||
		!fits(g.N, g.C, g.H, g.W) {
		return fmt.Errorf("kernels: %w: pool2d geometry %+v", ErrArgument, g)
	}
	return nil
}

// BatchNorm is the geometry and settings of a batch normalization: x is viewed as [N][C][HW]
// (HW = H*W for images, 1 after a linear layer), with one mean, variance, scale gamma and shift
// beta per channel. Momentum is the weight of the batch's statistics in the running ones
// (PyTorch's momentum; 0.1 there); Eps is added to the variance (1e-5 there).
type BatchNorm struct {
	N, C, HW      int
	Momentum, Eps float32
}

// Len is the element count of x and y.
func (g BatchNorm) Len() int { return g.N * g.C * g.HW }

// Validate reports a geometry with no channel or a negative size, or settings outside
// 0 <= Momentum <= 1, Eps > 0.
func (g BatchNorm) Validate() error {
	if g.N < 0 || g.C <= 0 || g.HW <= 0 || !(g.Momentum >= 0 && g.Momentum <= 1) || !(g.Eps > 0) || !fits(g.N, g.C, g.HW) {
		return fmt.Errorf("kernels: %w: batch norm %+v", ErrArgument, g)
	}
	return nil
}

// Attention is the geometry of a scaled dot-product attention: Batch independent problems (batch
// times heads), each of queries q [LQ][D], keys k [LK][D] and values v [LK][D], packed one after
// another ([Batch][LQ][D], [Batch][LK][D]); the output y is [Batch][LQ][D] and the saved
// log-sum-exp of each query's scaled scores [Batch][LQ]. Scale multiplies the scores q·kᵀ before
// the softmax (1/√D is torch's default).
type Attention struct {
	Batch, LQ, LK, D int
	Scale            float32
}

// QLen is the element count of q, y and their gradients, Batch*LQ*D.
func (g Attention) QLen() int { return g.Batch * g.LQ * g.D }

// KLen is the element count of k, v and their gradients, Batch*LK*D.
func (g Attention) KLen() int { return g.Batch * g.LK * g.D }

// Rows is the element count of the saved log-sum-exp, Batch*LQ.
func (g Attention) Rows() int { return g.Batch * g.LQ }

// Validate reports a negative size, no key or no feature (a softmax over no key has no value) and
// a scale that is not finite.
func (g Attention) Validate() error {
	if g.Batch < 0 || g.LQ < 0 || g.LK <= 0 || g.D <= 0 || math.IsNaN(float64(g.Scale)) || math.IsInf(float64(g.Scale), 0) ||
		!fits(g.Batch, g.LQ, g.D) || !fits(g.Batch, g.LK, g.D) {
		return fmt.Errorf("kernels: %w: attention geometry %+v", ErrArgument, g)
	}
	return nil
}

// fits reports whether the product of dims (each >= 0) and its partial products fit in an int: a
// geometry whose element counts wrap around would pass the length checks with small views.
func fits(dims ...int) bool {
	p := 1
	for _, d := range dims {
		if d < 0 || (d > 0 && p > math.MaxInt/d) {
			return false
		}
		p *= d
	}
	return true
}

// SGD holds the hyper-parameters of one SGD step (PyTorch's formulation, no dampening):
// g' = g + WeightDecay*w; v = Momentum*v + g'; w -= LR * (Nesterov ? g' + Momentum*v : v).
// With Momentum 0 the velocity is not used.
type SGD struct {
	LR, Momentum, WeightDecay float32
	Nesterov                  bool
}

// LossKind names a loss of FloatLoss: predictions against float targets.
type LossKind int

// The losses over float targets, as PyTorch's with reduction "mean".
const (
	// SoftCrossEntropy is softmax cross-entropy against target distributions (soft labels):
	// the mean over samples of -sum_j t_j log softmax(x)_j (CrossEntropyLoss with probabilities).
	SoftCrossEntropy LossKind = 1
	// BCEWithLogits is binary cross-entropy on logits (multi-label, multi-hot targets): the mean
	// over elements of -[w_j t log sigmoid(x) + (1-t) log(1-sigmoid(x))], with w the pos_weight
	// of column j (1 without), computed without overflow for any finite logits.
	BCEWithLogits LossKind = 2
	// MSE is the mean over elements of (x-t)^2.
	MSE LossKind = 3
	// SmoothL1 is the mean over elements of 0.5 (x-t)^2 / Beta where |x-t| < Beta, |x-t| - Beta/2
	// elsewhere (Huber divided by Beta; Beta 0 is the L1 loss).
	SmoothL1 LossKind = 4
)

// Loss is a FloatLoss's kind and parameter.
type Loss struct {
	Kind LossKind
	// Beta is SmoothL1's threshold (>= 0); the other kinds ignore it.
	Beta float32
}

// AdamW holds the hyper-parameters of one step of torch.optim.AdamW, in torch's order of
// operations (torch.optim.Adam's is one with WeightDecay 0, its decay added to the gradient
// first): w *= 1 - LR*WeightDecay; m = Beta1*m + (1-Beta1)*g; v = Beta2*v + (1-Beta2)*g²; with
// AMSGrad vmax = max(vmax, v) and d = √vmax/√c2 + Eps, otherwise d = √v/√c2 + Eps; w -= (LR/c1)*m/d,
// where c1 = 1-Beta1^Step and c2 = 1-Beta2^Step (Step counts from 1). The betas are float64 so
// that 1-β is rounded to float32 as torch's (from 0.999, float32 arithmetic gives a 1-β2 1.3e-5
// off); the factors 1-LR*WeightDecay, LR/c1 and √c2 are computed in float64 and rounded once.
type AdamW struct {
	LR, Eps, WeightDecay float32
	Beta1, Beta2         float64
	Step                 int
	AMSGrad              bool
}

// RMSprop holds the hyper-parameters of one RMSprop step, torch.optim.RMSprop's formulation (eps
// outside the root, weight decay added to the gradient): g' = g + WeightDecay*w;
// sq = Alpha*sq + (1-Alpha)*g'²; with Centered, ga = Alpha*ga + (1-Alpha)*g' and
// d = √(sq - ga²) + Eps, otherwise d = √sq + Eps; with Momentum, b = Momentum*b + g'/d and
// w -= LR*b, otherwise w -= LR*g'/d. Alpha is a float64 so that 1-Alpha is rounded to float32
// as torch's (from 0.99, float32 arithmetic gives a 1-Alpha 1e-6 off).
type RMSprop struct {
	LR, Eps, WeightDecay, Momentum float32
	Alpha                          float64
	Centered                       bool
}

// UnaryFunc names an elementwise function of Unary and UnaryGrad.
type UnaryFunc uint8

// The functions of Unary and UnaryGrad, as PyTorch's.
const (
	Exp         UnaryFunc = iota + 1 // e^x
	Log                              // ln x
	Sqrt                             // √x
	Rsqrt                            // 1/√x
	Sigmoid                          // 1/(1+e^-x), without overflow for any x
	Tanh                             // tanh x
	GELU                             // x·Φ(x), Φ by erf (PyTorch's approximate='none')
	GELUTanh                         // PyTorch's approximate='tanh'
	SiLU                             // x·sigmoid(x)
	Hardswish                        // x·ReLU6(x+3)/6 (PyTorch's)
	Hardsigmoid                      // ReLU6(x+3)/6
	ReLU6                            // min(max(x,0),6)
)

var unaryNames = [...]string{Exp: "exp", Log: "log", Sqrt: "sqrt", Rsqrt: "rsqrt", Sigmoid: "sigmoid", Tanh: "tanh",
	GELU: "gelu", GELUTanh: "gelu_tanh", SiLU: "silu", Hardswish: "hardswish", Hardsigmoid: "hardsigmoid", ReLU6: "relu6"}

// String is f's name in lower case ("exp", "gelu_tanh", ...), or UnaryFunc(n) for an unknown f.
func (f UnaryFunc) String() string {
	if f.valid() {
		return unaryNames[f]
	}
	return fmt.Sprintf("UnaryFunc(%d)", uint8(f))
}

func (f UnaryFunc) valid() bool { return f >= Exp && f <= ReLU6 }

// BinaryFunc names an elementwise function of two operands, for Binary.
type BinaryFunc uint8

// The functions of Binary.
const (
	BinaryAdd BinaryFunc = iota + 1 // x + y
	BinarySub                       // x - y
	BinaryMul                       // x * y
	BinaryDiv                       // x / y
)

var binaryNames = [...]string{BinaryAdd: "add", BinarySub: "sub", BinaryMul: "mul", BinaryDiv: "div"}

// String is f's name in lower case ("add", "sub", "mul", "div"), or BinaryFunc(n) for an unknown f.
func (f BinaryFunc) String() string {
	if f.valid() {
		return binaryNames[f]
	}
	return fmt.Sprintf("BinaryFunc(%d)", uint8(f))
}

func (f BinaryFunc) valid() bool { return f >= BinaryAdd && f <= BinaryDiv }

// MaxRank is the most dimensions Binary, SumTo and CopyStrided take.
const MaxRank = 8

// Ops is the operation set training needs, enqueued on a stream of the device the op set was made
// for. Every method checks its arguments' shapes and returns an error before enqueueing anything
// when they are wrong (the op sets that For and CPU return check them the same way for every
// backend, before the backend sees the call); errors that only the data can reveal (a label out of range) become the
// stream's sticky error, returned by the stream's Synchronize. Matrices are row-major and packed;
// tensors are NCHW. Unless a method says otherwise, outputs must not overlap inputs.
//
// An Ops value is safe for concurrent use; ordering is the stream's.
type Ops interface {
	// Backend is the name of the gpu backend this op set runs on ("cpu", "cuda").
	Backend() string

	// Fill sets every element of x to v.
	Fill(s gpu.Stream, x F32, v float32) error
	// Copy copies src to dst (equal lengths).
	Copy(s gpu.Stream, dst, src F32) error
	// Axpy computes y += alpha*x.
	Axpy(s gpu.Stream, y F32, alpha float32, x F32) error
	// Scale computes x *= alpha.
	Scale(s gpu.Stream, x F32, alpha float32) error
	// Mul computes z = x*y elementwise; z may be x or y.
	Mul(s gpu.Stream, z, x, y F32) error

	// Gemm computes c = alpha*op(a)*op(b) + beta*c, where op(a) is m×k (a is stored k×m when
	// transA), op(b) is k×n (stored n×k when transB) and c is m×n. With beta 0, c's old contents
	// (even NaN) are ignored.
	Gemm(s gpu.Stream, transA, transB bool, m, n, k int, alpha float32, a, b F32, beta float32, c F32) error

	// BiasAdd adds bias[c] to x viewed as [outer][channels][inner], channels = bias.Len
	// (Linear: outer = batch, inner = 1; Conv: outer = batch, inner = H*W).
	BiasAdd(s gpu.Stream, x, bias F32, outer, inner int) error
	// BiasGrad sets dbias[c] to the sum of dy over outer and inner (the shape of BiasAdd).
	BiasGrad(s gpu.Stream, dbias, dy F32, outer, inner int) error

	// ReLU computes y = max(x, 0); y may be x.
	ReLU(s gpu.Stream, y, x F32) error
	// ReLUGrad computes dx = dy where y > 0 and 0 elsewhere, from the ReLU's output y; dx may be dy.
	ReLUGrad(s gpu.Stream, dx, dy, y F32) error

	// SoftmaxCrossEntropy takes logits [n][classes] and labels [n], writes the batch's mean loss
	// to loss (one element) and dlogits = (softmax(logits) - onehot(labels))/n (the gradient of
	// the mean). It is stable for any finite logits (log-sum-exp with the row maximum subtracted).
	// A label outside [0, classes) makes the stream's error wrap ErrLabel and name the sample.
	SoftmaxCrossEntropy(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int) error
	// SoftmaxCrossEntropySmooth is SoftmaxCrossEntropy against label-smoothed targets
	// (1-smoothing)*onehot + smoothing/classes: the loss is their cross-entropy with the softmax and
	// dlogits = (softmax - target)/n. smoothing must be in [0,1); 0 is SoftmaxCrossEntropy.
	SoftmaxCrossEntropySmooth(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32) error
	// FloatLoss takes predictions pred and float targets target ([n][dim] each), writes the mean
	// loss of kind l to loss (one element) and its gradient to dpred ([n][dim]). posWeight is
	// BCEWithLogits' pos_weight ([dim]) or the empty view (all 1); other kinds take the empty
	// view. The mean is over samples for SoftCrossEntropy, over elements for the others.
	FloatLoss(s gpu.Stream, loss, dpred, pred, target, posWeight F32, n, dim int, l Loss) error
	// CountNonFinite adds to count (one element) the number of elements of x that are ±Inf or
	// NaN: a check of gradients for overflow that leaves the result on the device (fp16 loss
	// scaling reads one count per step, not a tensor per parameter).
	CountNonFinite(s gpu.Stream, count I32, x F32) error
	// Argmax writes each row's index of the largest logit (the lowest on ties) to dst [n].
	Argmax(s gpu.Stream, dst I32, logits F32, n, classes int) error
	// CountCorrect adds to count (one element) the number of rows whose argmax equals the label.
	CountCorrect(s gpu.Stream, count I32, logits F32, labels I32, n, classes int) error

	// Conv2D computes y = conv(x, w) + bias (bias may be the empty view) and leaves in ws
	// (g.WorkspaceLen elements) what Conv2DBackward needs: ws must reach the backward pass
	// unchanged.
	Conv2D(s gpu.Stream, y, x, w, bias, ws F32, g Conv2D) error
	// Conv2DBackward overwrites dw, dbias (empty view: skipped) and dx (empty view: skipped, for a
	// first layer) from dy, the weights w and the workspace ws left by Conv2D, which it overwrites.
	Conv2DBackward(s gpu.Stream, dx, dw, dbias, dy, w, ws F32, g Conv2D) error

	// DepthwiseConv2D computes y = the depthwise convolution of x with w, plus bias (bias may be
	// the empty view): each output is bias[c] (or 0) plus the products of its window's taps, added
	// in float32 in row-major tap order (padding taps left out). It stays float32 under reduced
	// precision (it has no GEMM).
	DepthwiseConv2D(s gpu.Stream, y, x, w, bias F32, g Depthwise2D) error
	// DepthwiseConv2DBackward overwrites dw, dbias (empty view: skipped) and dx (empty view:
	// skipped) from dy, the forward input x and the weights w. Each dx is a float32 sum of its
	// taps in row-major tap order; dw and dbias sum over the batch and the output plane in
	// float64, rounded once.
	DepthwiseConv2DBackward(s gpu.Stream, dx, dw, dbias, dy, x, w F32, g Depthwise2D) error

	// MaxPool2D writes each window's maximum to y and the maximum's index within its input plane
	// (H*W) to arg, for the backward pass. The first maximum wins ties.
	MaxPool2D(s gpu.Stream, y F32, arg I32, x F32, g Pool2D) error
	// MaxPool2DBackward overwrites dx with each dy added at its window's maximum.
	MaxPool2DBackward(s gpu.Stream, dx, dy F32, arg I32, g Pool2D) error

	// Add computes z = x + y elementwise (a residual connection); z may be x or y.
	Add(s gpu.Stream, z, x, y F32) error

	// BatchNormTrain normalizes x [N][C][HW] with the batch's per-channel mean and biased variance,
	// y = (x-mean)/sqrt(var+Eps)*gamma + beta, saves the mean and 1/sqrt(var+Eps) ([C] each) for
	// the backward pass, and updates the running statistics as PyTorch does:
	// run = (1-Momentum)*run + Momentum*batch, with the unbiased variance for runVar.
	BatchNormTrain(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd F32, g BatchNorm) error
	// BatchNormEval normalizes x with the running statistics (evaluation mode); y may be x.
	BatchNormEval(s gpu.Stream, y, x, gamma, beta, runMean, runVar F32, g BatchNorm) error
	// BatchNormBackward overwrites dgamma, dbeta and dx (empty view: skipped) from dy, the
	// forward input x, gamma and the statistics BatchNormTrain saved.
	BatchNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd F32, g BatchNorm) error

	// The ops of a batch norm over several batches (one per rank: a synchronized batch norm,
	// PyTorch's SyncBatchNorm), whose statistics the caller gathers between them.
	//
	// BatchNormStats writes x's per-channel statistics as one record of 2C+1 values to stats: the
	// mean [C], the sum of squared deviations from it [C] and the count N*HW (exact below 2^24).
	BatchNormStats(s gpu.Stream, stats, x F32, g BatchNorm) error
	// BatchNormTrainStats is BatchNormTrain with the statistics of every batch: stats holds W >= 1
	// records of BatchNormStats end to end ([W][2C+1]), combined in record order, in float64, into
	// the mean and biased variance of all their values; x (one of the batches) is normalized with
	// them, they are saved, and the running statistics are updated with the unbiased variance over
	// the total count. A single record of x's own is BatchNormTrain's arithmetic.
	BatchNormTrainStats(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats F32, g BatchNorm) error
	// BatchNormBackwardInput overwrites dx with the gradient of a batch norm over every batch
	// from sums (2C+1 values): the sums over all the batches of dy*xhat [C] and dy [C] (what
	// BatchNormBackward writes to dgamma and dbeta for one batch), then their total count;
	// dx = gamma*inv * (dy - sum(dy)/count - xhat*sum(dy*xhat)/count), xhat = (x-mean)*inv with
	// the statistics BatchNormTrainStats saved.
	BatchNormBackwardInput(s gpu.Stream, dx, dy, x, gamma, saveMean, saveInvStd, sums F32, g BatchNorm) error

	// GlobalAvgPool writes y[r] = the mean of x's row r, x viewed as [y.Len][inner] (NCHW
	// images: one value per sample and channel, inner = H*W).
	GlobalAvgPool(s gpu.Stream, y, x F32, inner int) error
	// GlobalAvgPoolBackward overwrites dx [dy.Len][inner] with dy[r]/inner.
	GlobalAvgPoolBackward(s gpu.Stream, dx, dy F32, inner int) error

	// Dropout zeroes each element of x with probability p and scales survivors by 1/(1-p), writing
	// y and the multiplier mask (0 or 1/(1-p)); the backward pass is Mul(dx, dy, mask). The mask
	// is a function of (seed, element index) only, the same on every backend. p must be in [0,1);
	// y may be x.
	Dropout(s gpu.Stream, y, mask, x F32, p float32, seed uint64) error

	// NormalizeU8 converts uint8 src viewed as [N][channels][inner] to float32 dst:
	// dst = (src/255 - mean[c]) / std[c]. mean and std hold one value per channel or a single
	// value for all; an empty mean is 0 and an empty std is 1. The values are copied at enqueue.
	NormalizeU8(s gpu.Stream, dst F32, src U8, channels, inner int, mean, std []float32) error

	// ToBF16 rounds src to bfloat16 (to the nearest, ties to even; NaN stays NaN) into dst, 2
	// bytes per value, little-endian (dst.Len = 2*src.Len, dst.Off even): gradients that travel
	// as bf16 (a data-parallel step in bf16).
	ToBF16(s gpu.Stream, dst U8, src F32) error
	// FromBF16 widens the bfloat16 values of src (2 bytes each, as ToBF16 writes them) into dst,
	// exactly.
	FromBF16(s gpu.Stream, dst F32, src U8) error
	// ToFP16 rounds src to IEEE half precision (fp16: to the nearest, ties to even; a magnitude
	// of 65520 or more becomes ±Inf, subnormals are kept, NaN stays NaN) into dst, laid out as
	// ToBF16's: gradients that travel as fp16 (a data-parallel step in fp16).
	ToFP16(s gpu.Stream, dst U8, src F32) error
	// FromFP16 widens the fp16 values of src (2 bytes each, as ToFP16 writes them) into dst,
	// exactly.
	FromFP16(s gpu.Stream, dst F32, src U8) error

	// Unary computes y = f(x) elementwise; y may be x. An unknown f is ErrArgument.
	Unary(s gpu.Stream, f UnaryFunc, y, x F32) error
	// UnaryGrad computes dx = dy·f'(x) from the forward input x; dx may be dy. At the kinks of
	// Hardswish, Hardsigmoid and ReLU6 the derivative is PyTorch's: Hardswish's is x/3+0.5 on
	// [-3,3], 0 below and 1 above; Hardsigmoid's 1/6 on (-3,3), else 0; ReLU6's 1 on (0,6), else 0.
	UnaryGrad(s gpu.Stream, f UnaryFunc, dx, dy, x F32) error

	// Binary, SumTo and CopyStrided copy their shapes and strides when they enqueue.
	//
	// Binary computes z = f(x, y) over an index space of the given shape (rank 1..MaxRank, every
	// dim >= 1): z is packed row-major of that shape; x's element for index i is at
	// x.Off + Σ i_d·xStrides[d], y's likewise (strides >= 0; a 0 stride broadcasts). Every
	// element read must lie inside the view (x.Len, y.Len). z must not overlap x or y.
	Binary(s gpu.Stream, f BinaryFunc, z, x, y F32, shape, xStrides, yStrides []int) error
	// SumTo overwrites y with x summed over the dimensions that keep does not have: x is packed
	// of shape, y packed of shape keep (same rank as shape, 1..MaxRank; keep[d] is shape[d] or 1).
	// The order of the sums is fixed (the same result on every call), so the broadcast's VJP is
	// deterministic. y must not overlap x.
	SumTo(s gpu.Stream, y, x F32, shape, keep []int) error
	// CopyStrided copies, for every index i of shape (rank 1..MaxRank), src[Σ i_d·srcStrides[d]]
	// to dst[Σ i_d·dstStrides[d]] (offsets from each view's Off): a permutation, a slice or one
	// part of a concatenation made packed, or written into its place. Strides >= 0; the dst
	// positions must be distinct (checked: no dst stride 0 on a dim > 1, and the dims sorted by
	// dst stride do not overlap); every position inside its view; dst must not overlap src.
	CopyStrided(s gpu.Stream, dst F32, dstStrides []int, src F32, srcStrides []int, shape []int) error

	// Softmax computes y = softmax of each row of x [rows][cols], stable for any finite x (the
	// row maximum subtracted); y may be x.
	Softmax(s gpu.Stream, y, x F32, rows, cols int) error
	// SoftmaxBackward computes dx = y·(dy − Σ_row dy·y) from the forward output y; dx may be dy.
	SoftmaxBackward(s gpu.Stream, dx, dy, y F32, rows, cols int) error

	// LayerNorm normalizes each row of x [rows][cols] with its mean and biased variance,
	// y = (x−mean)·rstd·gamma + beta, rstd = 1/√(var+eps) (PyTorch's layer_norm over the last
	// dim); gamma and beta are [cols] or the empty view (1 and 0). mean and rstd ([rows] each)
	// are saved for the backward pass. eps > 0 and finite.
	LayerNorm(s gpu.Stream, y, mean, rstd, x, gamma, beta F32, rows, cols int, eps float32) error
	// LayerNormBackward overwrites dx, dgamma and dbeta (each may be the empty view: skipped)
	// from dy, the forward input x, gamma (empty: 1) and the saved mean and rstd.
	LayerNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, mean, rstd F32, rows, cols int) error

	// GemmStrided computes batch independent Gemms (same transA, transB, m, n, k, alpha, beta as
	// Gemm): the i-th on a[i·strideA:], b[i·strideB:], c[i·strideC:] (cublasSgemmStridedBatched).
	// strideA or strideB may be 0 (one operand for all); strideC >= m·n (outputs do not overlap).
	// Each view must hold its last matrix ((batch-1)·stride + the matrix's size elements, at
	// least). batch >= 0; batch 0 does nothing.
	GemmStrided(s gpu.Stream, transA, transB bool, batch, m, n, k int, alpha float32, a F32, strideA int, b F32, strideB int, beta float32, c F32, strideC int) error

	// Attention computes y = softmax(g.Scale·q·kᵀ)·v for each of g.Batch problems (torch's
	// scaled_dot_product_attention without a mask or dropout) and saves each query's log-sum-exp
	// of its scaled scores to lse for the backward pass. The score matrix is never held whole: keys
	// are taken a block at a time with an online softmax (FlashAttention's), so memory does not grow
	// with LQ·LK. It stays float32 under reduced precision.
	Attention(s gpu.Stream, y, lse, q, k, v F32, g Attention) error
	// AttentionBackward overwrites dq, dk and dv from dy, the forward operands q, k, v, the output y
	// and the lse Attention saved, recomputing the scores block by block (FlashAttention-2's
	// backward pass).
	AttentionBackward(s gpu.Stream, dq, dk, dv, dy, q, k, v, y, lse F32, g Attention) error

	// SGDStep updates w in place from g and the velocity v (v unused, may be empty, with
	// Momentum 0).
	SGDStep(s gpu.Stream, w, g, v F32, p SGD) error
	// AdamWStep updates w in place from g, the moment estimates m and v and the largest v so far
	// vmax (torch's max_exp_avg_sq; unused, may be empty, without AMSGrad).
	AdamWStep(s gpu.Stream, w, g, m, v, vmax F32, p AdamW) error
	// RMSpropStep updates w in place from g, the mean square sq, the momentum buffer b (unused,
	// may be empty, with Momentum 0) and the mean gradient ga (unused, may be empty, unless
	// Centered).
	RMSpropStep(s gpu.Stream, w, g, sq, b, ga F32, p RMSprop) error
}

// Factory makes the op set for one opened device of its backend. The op set it returns may assume
// checked arguments: For puts the package's argument checks (a stream, every view empty or inside
// its buffer, the lengths each method's doc gives, geometries' Validate, settings such as dropout's
// p, the overlaps the docs forbid) in front of it, so a call that fails them never reaches it. What
// only the backend can know (whether a buffer or stream is its device's) is the backend's to check.
type Factory func(dev gpu.Device) (Ops, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes f the op-set factory for devices whose Info().Backend is backend. Backends call
// it from init; registering a name twice replaces the earlier factory.
func Register(backend string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	registry[backend] = f
}

// Registered lists the backends that have an op set, sorted.
func Registered() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// For returns the op set for dev, behind the argument checks. The error wraps ErrNoBackend when
// none is registered for dev's backend (a backend registered with gpu but not with this package).
func For(dev gpu.Device) (Ops, error) {
	if dev == nil {
		return nil, fmt.Errorf("kernels: %w: nil device", ErrArgument)
	}
	name := dev.Info().Backend
	regMu.RLock()
	f := registry[name]
	regMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("kernels: %w %q (have %v)", ErrNoBackend, name, Registered())
	}
	o, err := f(dev)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, fmt.Errorf("kernels: %w %q: its factory returned no op set", ErrNoBackend, name)
	}
	return withChecks(o), nil
}
