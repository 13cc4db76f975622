package kernels_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
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

type (
	f32 = kernels.F32
	i32 = kernels.I32
	str = gpu.Stream
)

func (r *recorder) Backend() string                                 { return recorderBackend }
func (r *recorder) Fill(str, f32, float32) error                    { return r.called("Fill") }
func (r *recorder) Copy(str, f32, f32) error                        { return r.called("Copy") }
func (r *recorder) Axpy(str, f32, float32, f32) error               { return r.called("Axpy") }
func (r *recorder) Scale(str, f32, float32) error                   { return r.called("Scale") }
func (r *recorder) Mul(str, f32, f32, f32) error                    { return r.called("Mul") }
func (r *recorder) Add(str, f32, f32, f32) error                    { return r.called("Add") }
func (r *recorder) BiasAdd(str, f32, f32, int, int) error           { return r.called("BiasAdd") }
func (r *recorder) BiasGrad(str, f32, f32, int, int) error          { return r.called("BiasGrad") }
func (r *recorder) ReLU(str, f32, f32) error                        { return r.called("ReLU") }
func (r *recorder) ReLUGrad(str, f32, f32, f32) error               { return r.called("ReLUGrad") }
func (r *recorder) Argmax(str, i32, f32, int, int) error            { return r.called("Argmax") }
func (r *recorder) CountCorrect(str, i32, f32, i32, int, int) error { return r.called("CountCorrect") }
func (r *recorder) CountNonFinite(str, i32, f32) error              { return r.called("CountNonFinite") }
func (r *recorder) GlobalAvgPool(str, f32, f32, int) error          { return r.called("GlobalAvgPool") }
func (r *recorder) GlobalAvgPoolBackward(str, f32, f32, int) error {
	return r.called("GlobalAvgPoolBackward")
}
func (r *recorder) Dropout(str, f32, f32, f32, float32, uint64) error {
	return r.called("Dropout")
}
func (r *recorder) Gemm(str, bool, bool, int, int, int, float32, f32, f32, float32, f32) error {
	return r.called("Gemm")
}
func (r *recorder) SoftmaxCrossEntropy(str, f32, f32, f32, i32, int, int) error {
	return r.called("SoftmaxCrossEntropy")
}
func (r *recorder) FloatLoss(str, f32, f32, f32, f32, f32, int, int, kernels.Loss) error {
	return r.called("FloatLoss")
}
func (r *recorder) SoftmaxCrossEntropySmooth(str, f32, f32, f32, i32, int, int, float32) error {
	return r.called("SoftmaxCrossEntropySmooth")
}
func (r *recorder) Conv2D(str, f32, f32, f32, f32, f32, kernels.Conv2D) error {
	return r.called("Conv2D")
}
func (r *recorder) Conv2DBackward(str, f32, f32, f32, f32, f32, f32, kernels.Conv2D) error {
	return r.called("Conv2DBackward")
}
func (r *recorder) MaxPool2D(str, f32, i32, f32, kernels.Pool2D) error {
	return r.called("MaxPool2D")
}
func (r *recorder) MaxPool2DBackward(str, f32, f32, i32, kernels.Pool2D) error {
	return r.called("MaxPool2DBackward")
}
func (r *recorder) BatchNormTrain(str, f32, f32, f32, f32, f32, f32, f32, f32, kernels.BatchNorm) error {
	return r.called("BatchNormTrain")
}
func (r *recorder) BatchNormEval(str, f32, f32, f32, f32, f32, f32, kernels.BatchNorm) error {
	return r.called("BatchNormEval")
}
func (r *recorder) BatchNormBackward(str, f32, f32, f32, f32, f32, f32, f32, f32, kernels.BatchNorm) error {
	return r.called("BatchNormBackward")
}
func (r *recorder) BatchNormStats(str, f32, f32, kernels.BatchNorm) error {
	return r.called("BatchNormStats")
}
func (r *recorder) BatchNormTrainStats(str, f32, f32, f32, f32, f32, f32, f32, f32, f32, kernels.BatchNorm) error {
	return r.called("BatchNormTrainStats")
}
func (r *recorder) BatchNormBackwardInput(str, f32, f32, f32, f32, f32, f32, f32, kernels.BatchNorm) error {
	return r.called("BatchNormBackwardInput")
}
func (r *recorder) ToBF16(str, kernels.U8, f32) error   { return r.called("ToBF16") }
func (r *recorder) FromBF16(str, f32, kernels.U8) error { return r.called("FromBF16") }
func (r *recorder) NormalizeU8(str, f32, kernels.U8, int, int, []float32, []float32) error {
	return r.called("NormalizeU8")
}
func (r *recorder) SGDStep(str, f32, f32, f32, kernels.SGD) error { return r.called("SGDStep") }
func (r *recorder) AdamWStep(str, f32, f32, f32, f32, kernels.AdamW) error {
	return r.called("AdamWStep")
}

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

// badCall is one call that the checks must refuse, with the sentinel its error must wrap.
type badCall struct {
	name string
	want error
	call func(o kernels.Ops, s gpu.Stream) error
}

// checkCase is one Ops method: a call that passes the checks and calls that do not.
type checkCase struct {
	method string
	good   func(o kernels.Ops, s gpu.Stream) error
	bad    []badCall
}

// checkCases builds, over buffers of e's CPU device, a good call and bad calls for every method.
func checkCases(t *testing.T, e *env) []checkCase {
	f := func(n int) kernels.F32 { return e.f32(t, make([]float32, n)...) }
	x1, x2, x3, x4 := f(1), f(2), f(3), f(4)
	y2, y4, z4, w4 := f(2), f(4), f(4), f(4)
	big := f(16)
	outside := kernels.F32{Buf: x4.Buf, Off: 2, Len: 4}
	lab := e.i32(t, 0, 1)
	arg4 := e.i32(t, 0, 0, 0, 0)
	cnt := e.i32(t, 0)
	var none kernels.F32
	bytes4 := kernels.U8{Buf: f(1).Buf, Len: 4}
	conv := kernels.Conv2D{N: 1, InC: 1, InH: 3, InW: 3, OutC: 1, KH: 2, KW: 2} // y 2x2, ws 20
	cy, cx, cw, cws := f(4), f(9), f(4), f(conv.WorkspaceLen())
	pool := kernels.Pool2D{N: 1, C: 1, H: 4, W: 4, K: 2} // y 2x2
	px := f(16)
	bn := kernels.BatchNorm{N: 2, C: 2, HW: 1, Momentum: 0.1, Eps: 1e-5}
	g2a, g2b, g2c, g2d, g2e, g2f := f(2), f(2), f(2), f(2), f(2), f(2)
	rec5, rec10 := f(5), f(10)               // one and two records of BatchNormStats for bn
	bf8 := kernels.U8{Buf: f(2).Buf, Len: 8} // four bf16 values
	return []checkCase{
		{"Fill", func(o kernels.Ops, s gpu.Stream) error { return o.Fill(s, x4, 1) }, []badCall{
			{"nil stream", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Fill(nil, x4, 1) }},
			{"view outside its buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Fill(s, outside, 1) }},
			{"view without buffer", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Fill(s, kernels.F32{Len: 2}, 1) }},
			{"negative offset", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.Fill(s, kernels.F32{Buf: x4.Buf, Off: -1, Len: 2}, 1)
			}},
			{"offset past the end of the address space", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.Fill(s, kernels.F32{Buf: x4.Buf, Off: math.MaxInt, Len: 1}, 1)
			}},
		}},
		{"Copy", func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, y4, x4) }, []badCall{
			{"lengths", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, x4, x3) }},
			{"dst overlaps src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, big.Slice(1, 5), big.Slice(0, 4)) }},
			{"dst is src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, x4, x4) }},
		}},
		{"Axpy", func(o kernels.Ops, s gpu.Stream) error { return o.Axpy(s, y4, 2, x4) }, []badCall{
			{"lengths", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Axpy(s, y4, 2, x3) }},
		}},
		{"Scale", func(o kernels.Ops, s gpu.Stream) error { return o.Scale(s, x4, 2) }, []badCall{
			{"view outside its buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Scale(s, outside, 2) }},
		}},
		{"Mul", func(o kernels.Ops, s gpu.Stream) error { return o.Mul(s, x4, x4, y4) }, []badCall{
			{"y length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Mul(s, z4, x4, x3) }},
			{"z partly overlaps x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.Mul(s, big.Slice(2, 6), big.Slice(0, 4), y4)
			}},
		}},
		{"Add", func(o kernels.Ops, s gpu.Stream) error { return o.Add(s, z4, x4, z4) }, []badCall{
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Add(s, z4, x2, y4) }},
		}},
		{"Gemm", func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, true, 2, 2, 2, 1, x4, y4, 0, z4) }, []badCall{
			{"negative m", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, false, -2, -2, 1, 1, x4, y4, 0, z4) }},
			{"b shape", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, false, 2, 2, 2, 1, x4, x3, 0, z4) }},
			{"c is a", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, false, 2, 2, 2, 1, x4, y4, 1, x4) }},
			// m*k, k*n and m*n wrap around to 0: empty views matched them and the backend walked m x n.
			{"m*n overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.Gemm(s, false, false, 1<<32, 1<<32, 0, 1, none, none, 0, none)
			}},
		}},
		{"BiasAdd", func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, x4, y2, 2, 1) }, []badCall{
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, x4, y2, 3, 1) }},
			{"negative outer and inner", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, x2, x1, -1, -2) }},
			{"outer*inner overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, none, x1, 1<<32, 1<<32) }},
		}},
		{"BiasGrad", func(o kernels.Ops, s gpu.Stream) error { return o.BiasGrad(s, y2, x4, 1, 2) }, []badCall{
			{"dy length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BiasGrad(s, y2, x3, 1, 2) }},
			{"outer*inner overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.BiasGrad(s, x1, none, 1<<32, 1<<32) }},
		}},
		{"ReLU", func(o kernels.Ops, s gpu.Stream) error { return o.ReLU(s, x4, x4) }, []badCall{
			{"lengths", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.ReLU(s, x4, x3) }},
			{"y partly overlaps x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.ReLU(s, big.Slice(1, 5), big.Slice(0, 4)) }},
		}},
		{"ReLUGrad", func(o kernels.Ops, s gpu.Stream) error { return o.ReLUGrad(s, x4, x4, y4) }, []badCall{
			{"y length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.ReLUGrad(s, x4, z4, y2) }},
			{"dx is y", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.ReLUGrad(s, y4, x4, y4) }},
		}},
		{"SoftmaxCrossEntropy", func(o kernels.Ops, s gpu.Stream) error { return o.SoftmaxCrossEntropy(s, x1, y4, x4, lab, 2, 2) }, []badCall{
			{"classes 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.SoftmaxCrossEntropy(s, x1, y4, x4, lab, 2, 0) }},
			{"labels length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.SoftmaxCrossEntropy(s, x1, y2, x2, lab, 1, 2) }},
			{"loss inside dlogits", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropy(s, y4.Slice(0, 1), y4, x4, lab, 2, 2)
			}},
		}},
		{"SoftmaxCrossEntropySmooth", func(o kernels.Ops, s gpu.Stream) error {
			return o.SoftmaxCrossEntropySmooth(s, x1, y4, x4, lab, 2, 2, 0.1)
		}, []badCall{
			{"smoothing 1", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropySmooth(s, x1, y4, x4, lab, 2, 2, 1)
			}},
			{"smoothing NaN", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropySmooth(s, x1, y4, x4, lab, 2, 2, float32(math.NaN()))
			}},
			{"logits length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropySmooth(s, x1, y4, x3, lab, 2, 2, 0.1)
			}},
		}},
		{"FloatLoss", func(o kernels.Ops, s gpu.Stream) error {
			return o.FloatLoss(s, x1, y4, x4, z4, none, 2, 2, kernels.Loss{Kind: kernels.MSE})
		}, []badCall{
			{"kind 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.FloatLoss(s, x1, y4, x4, z4, none, 2, 2, kernels.Loss{})
			}},
			{"target length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.FloatLoss(s, x1, y4, x4, x3, none, 2, 2, kernels.Loss{Kind: kernels.MSE})
			}},
			{"pos_weight for MSE", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.FloatLoss(s, x1, y4, x4, z4, x2, 2, 2, kernels.Loss{Kind: kernels.MSE})
			}},
			{"pos_weight length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.FloatLoss(s, x1, y4, x4, z4, x3, 2, 2, kernels.Loss{Kind: kernels.BCEWithLogits})
			}},
			{"beta NaN", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.FloatLoss(s, x1, y4, x4, z4, none, 2, 2, kernels.Loss{Kind: kernels.SmoothL1, Beta: float32(math.NaN())})
			}},
			{"dpred is pred", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.FloatLoss(s, x1, x4, x4, z4, none, 2, 2, kernels.Loss{Kind: kernels.MSE})
			}},
		}},
		{"Argmax", func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, lab, x4, 2, 2) }, []badCall{
			{"dst length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, arg4, x4, 2, 2) }},
			{"negative n", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, lab, x4, -2, -2) }},
			{"n*classes overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, lab, none, 2, 1<<62) }},
		}},
		{"CountCorrect", func(o kernels.Ops, s gpu.Stream) error { return o.CountCorrect(s, cnt, x4, lab, 2, 2) }, []badCall{
			{"count length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.CountCorrect(s, lab, x4, lab, 2, 2) }},
		}},
		{"CountNonFinite", func(o kernels.Ops, s gpu.Stream) error { return o.CountNonFinite(s, cnt, x4) }, []badCall{
			{"count length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.CountNonFinite(s, lab, x4) }},
			{"x outside its buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.CountNonFinite(s, cnt, outside) }},
		}},
		{"Conv2D", func(o kernels.Ops, s gpu.Stream) error { return o.Conv2D(s, cy, cx, cw, none, cws, conv) }, []badCall{
			{"bias length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Conv2D(s, cy, cx, cw, x2, cws, conv) }},
			{"workspace length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Conv2D(s, cy, cx, cw, x1, x4, conv) }},
			{"kernel larger than the input", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := conv
				g.KH = 4
				return o.Conv2D(s, cy, cx, cw, none, cws, g)
			}},
			{"element counts overflow", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := conv
				g.N, g.InC = 1<<32, 1<<32
				return o.Conv2D(s, cy, cx, cw, none, cws, g)
			}},
		}},
		{"Conv2DBackward", func(o kernels.Ops, s gpu.Stream) error {
			return o.Conv2DBackward(s, none, y4, none, cy, cw, cws, conv)
		}, []badCall{
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Conv2DBackward(s, x4, y4, none, cy, cw, cws, conv) }},
			{"dw is w", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Conv2DBackward(s, none, cw, none, cy, cw, cws, conv) }},
		}},
		{"MaxPool2D", func(o kernels.Ops, s gpu.Stream) error { return o.MaxPool2D(s, x4, arg4, px, pool) }, []badCall{
			{"arg length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.MaxPool2D(s, x4, lab, px, pool) }},
			{"negative stride", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := pool
				g.Stride = -1
				return o.MaxPool2D(s, x4, arg4, px, g)
			}},
			{"element counts overflow", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := pool
				g.N, g.C = 1<<32, 1<<32
				return o.MaxPool2D(s, x4, arg4, px, g)
			}},
		}},
		{"MaxPool2DBackward", func(o kernels.Ops, s gpu.Stream) error { return o.MaxPool2DBackward(s, big, x4, arg4, pool) }, []badCall{
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.MaxPool2DBackward(s, x4, x4, arg4, pool) }},
		}},
		{"BatchNormTrain", func(o kernels.Ops, s gpu.Stream) error {
			return o.BatchNormTrain(s, y4, x4, g2a, g2b, g2c, g2d, g2e, g2f, bn)
		}, []badCall{
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormTrain(s, y4, x3, g2a, g2b, g2c, g2d, g2e, g2f, bn)
			}},
			{"eps 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := bn
				g.Eps = 0
				return o.BatchNormTrain(s, y4, x4, g2a, g2b, g2c, g2d, g2e, g2f, g)
			}},
			{"saved mean is running mean", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormTrain(s, y4, x4, g2a, g2b, g2c, g2d, g2c, g2f, bn)
			}},
		}},
		{"BatchNormEval", func(o kernels.Ops, s gpu.Stream) error { return o.BatchNormEval(s, x4, x4, g2a, g2b, g2c, g2d, bn) }, []badCall{
			{"gamma length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BatchNormEval(s, y4, x4, x3, g2b, g2c, g2d, bn) }},
			{"element count overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := bn
				g.N, g.HW = 1<<32, 1<<31
				return o.BatchNormEval(s, none, none, g2a, g2b, g2c, g2d, g)
			}},
		}},
		{"BatchNormBackward", func(o kernels.Ops, s gpu.Stream) error {
			return o.BatchNormBackward(s, none, g2a, g2b, y4, x4, g2c, g2d, g2e, bn)
		}, []badCall{
			{"dbeta length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackward(s, z4, g2a, x4, y4, x4, g2c, g2d, g2e, bn)
			}},
			{"momentum 2", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := bn
				g.Momentum = 2
				return o.BatchNormBackward(s, none, g2a, g2b, y4, x4, g2c, g2d, g2e, g)
			}},
		}},
		{"BatchNormStats", func(o kernels.Ops, s gpu.Stream) error { return o.BatchNormStats(s, rec5, x4, bn) }, []badCall{
			{"stats length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BatchNormStats(s, x4, x4, bn) }},
			{"stats is x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormStats(s, kernels.F32{Buf: big.Buf, Len: 5}, kernels.F32{Buf: big.Buf, Off: 4, Len: 4}, bn)
			}},
		}},
		{"BatchNormTrainStats", func(o kernels.Ops, s gpu.Stream) error {
			return o.BatchNormTrainStats(s, y4, x4, g2a, g2b, g2c, g2d, g2e, g2f, rec10, bn)
		}, []badCall{
			{"stats not whole records", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormTrainStats(s, y4, x4, g2a, g2b, g2c, g2d, g2e, g2f, big, bn)
			}},
			{"no stats", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormTrainStats(s, y4, x4, g2a, g2b, g2c, g2d, g2e, g2f, none, bn)
			}},
			{"running var is saved inverse std", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormTrainStats(s, y4, x4, g2a, g2b, g2c, g2f, g2e, g2f, rec10, bn)
			}},
			{"y is stats", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormTrainStats(s, kernels.F32{Buf: rec10.Buf, Len: 4}, x4, g2a, g2b, g2c, g2d, g2e, g2f, rec10, bn)
			}},
		}},
		{"BatchNormBackwardInput", func(o kernels.Ops, s gpu.Stream) error {
			return o.BatchNormBackwardInput(s, z4, y4, x4, g2a, g2b, g2c, rec5, bn)
		}, []badCall{
			{"sums length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackwardInput(s, z4, y4, x4, g2a, g2b, g2c, x4, bn)
			}},
			{"no dx", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackwardInput(s, none, y4, x4, g2a, g2b, g2c, rec5, bn)
			}},
			{"dx is dy", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackwardInput(s, y4, y4, x4, g2a, g2b, g2c, rec5, bn)
			}},
		}},
		{"ToBF16", func(o kernels.Ops, s gpu.Stream) error { return o.ToBF16(s, bf8, x4) }, []badCall{
			{"dst length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.ToBF16(s, bf8, x3) }},
			{"odd offset", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.ToBF16(s, bf8.Slice(1, 7), x3) }},
			{"dst is src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.ToBF16(s, kernels.U8{Buf: x4.Buf, Off: 4, Len: 4}, x4.Slice(0, 2))
			}},
		}},
		{"FromBF16", func(o kernels.Ops, s gpu.Stream) error { return o.FromBF16(s, y4, bf8) }, []badCall{
			{"src length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.FromBF16(s, x3, bf8) }},
			{"nil stream", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.FromBF16(nil, y4, bf8) }},
		}},
		{"GlobalAvgPool", func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, x4, 2) }, []badCall{
			{"inner 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, x4, 0) }},
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, x3, 2) }},
			{"x length overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, none, 1<<62) }},
		}},
		{"GlobalAvgPoolBackward", func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPoolBackward(s, x4, y2, 2) }, []badCall{
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPoolBackward(s, x4, y2, 3) }},
		}},
		{"Dropout", func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, x4, y4, x4, 0.5, 1) }, []badCall{
			{"p 1", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, x4, y4, x4, 1, 1) }},
			{"mask length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, x4, y2, x4, 0.5, 1) }},
			{"mask is x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, y4, x4, x4, 0.5, 1) }},
		}},
		{"NormalizeU8", func(o kernels.Ops, s gpu.Stream) error {
			return o.NormalizeU8(s, x4, bytes4, 2, 2, []float32{0.5}, []float32{0.2, 0.3})
		}, []badCall{
			{"std 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.NormalizeU8(s, x4, bytes4, 2, 2, nil, []float32{0}) }},
			{"3 means for 2 channels", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.NormalizeU8(s, x4, bytes4, 2, 2, []float32{0, 0, 0}, nil)
			}},
			{"not [N][channels][inner]", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.NormalizeU8(s, x4, bytes4, 3, 1, nil, nil) }},
			{"src length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.NormalizeU8(s, x4, bytes4.Slice(0, 2), 1, 2, nil, nil)
			}},
			{"dst overlaps src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.NormalizeU8(s, x4, kernels.U8{Buf: x4.Buf, Off: 4, Len: 4}, 1, 4, nil, nil)
			}},
		}},
		{"SGDStep", func(o kernels.Ops, s gpu.Stream) error { return o.SGDStep(s, w4, x4, none, kernels.SGD{LR: 0.1}) }, []badCall{
			{"momentum without velocity", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.SGDStep(s, w4, x4, none, kernels.SGD{LR: 0.1, Momentum: 0.9})
			}},
			{"g length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.SGDStep(s, w4, x3, none, kernels.SGD{LR: 0.1}) }},
		}},
		{"AdamWStep", func(o kernels.Ops, s gpu.Stream) error {
			return o.AdamWStep(s, w4, x4, y4, z4, kernels.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, Step: 1})
		}, []badCall{
			{"step 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.AdamWStep(s, w4, x4, y4, z4, kernels.AdamW{LR: 0.1}) }},
			{"m length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.AdamWStep(s, w4, x4, x3, z4, kernels.AdamW{LR: 0.1, Step: 1})
			}},
		}},
	}
}

// TestChecksForEveryBackend: for every Ops method, calls with wrong arguments return the right
// sentinel on the CPU backend and on a backend registered by the test, which they never reach;
// the good calls run on the CPU and reach the registered backend. The checks are the package's,
// not a backend's.
func TestChecksForEveryBackend(t *testing.T) {
	e := newEnv(t)
	cases := checkCases(t, e)
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.method] = true
	}
	ops := reflect.TypeFor[kernels.Ops]()
	for i := range ops.NumMethod() {
		if m := ops.Method(i).Name; m != "Backend" && !covered[m] {
			t.Errorf("kernels.Ops.%s has no case in checkCases", m)
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
		t.Run(c.method, func(t *testing.T) {
			if err := c.good(e.ops, e.s); err != nil {
				t.Fatalf("cpu: good call: %v", err)
			}
			if err := c.good(rec, e.s); err != nil {
				t.Fatalf("recorder: good call: %v", err)
			}
			if got := theRecorder.take(); len(got) != 1 || got[0] != c.method {
				t.Fatalf("recorder: good call reached %v; want [%s]", got, c.method)
			}
			for _, b := range c.bad {
				for _, side := range []struct {
					name string
					ops  kernels.Ops
				}{{"cpu", e.ops}, {"recorder", rec}} {
					err := b.call(side.ops, e.s)
					if !errors.Is(err, b.want) {
						t.Errorf("%s: %s: error %v; want %v", side.name, b.name, err, b.want)
					}
					if err != nil && !strings.Contains(err.Error(), ": ") {
						t.Errorf("%s: %s: error %q names no op", side.name, b.name, err)
					}
				}
				if got := theRecorder.take(); len(got) != 0 {
					t.Errorf("%s: the rejected call reached the backend (%v)", b.name, got)
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
