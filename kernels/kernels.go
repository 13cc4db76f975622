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
