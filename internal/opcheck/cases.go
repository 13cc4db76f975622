// Package opcheck holds the calls that the argument checks of package kernels must refuse: one
// good call and the bad calls of every kernels.Ops method, each bad one with the sentinel its
// error must wrap. The good calls and the operands' roles come from the op table of
// kernels/internal/opdef (examples_gen.go, written by go generate ./kernels); the bad calls are
// the generic ones derived from them (generic.go) and the op-specific ones written here. The
// tests of kernels run them against the CPU op set and a backend of their own; those of gpu/cuda
// against the CUDA op set, which sits behind the same checks.
package opcheck

import (
	"maps"
	"math"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// env uploads the cases' operands.
type env struct {
	t   testing.TB
	dev gpu.Device
	s   gpu.Stream
}

func (e env) upload(b []byte) gpu.Buffer {
	e.t.Helper()
	buf, err := e.dev.Alloc(len(b))
	if err != nil {
		e.t.Fatal(err)
	}
	if len(b) > 0 {
		if err := e.s.CopyH2D(buf, 0, b); err != nil {
			e.t.Fatal(err)
		}
	}
	return buf
}

func (e env) f32(vals ...float32) kernels.F32 {
	return kernels.Float32s(e.upload(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 4*len(vals))))
}

func (e env) i32(vals ...int32) kernels.I32 {
	return kernels.Int32s(e.upload(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 4*len(vals))))
}

// Bad is one call that the checks must refuse, with the sentinel its error must wrap.
type Bad struct {
	Name string
	Want error
	Call func(o kernels.Ops, s gpu.Stream) error
}

// Case is one Ops method: a call that passes the checks and calls that do not.
type Case struct {
	Method string
	Good   func(o kernels.Ops, s gpu.Stream) error
	Bad    []Bad
}

// Cases builds, over buffers of dev (a CPU device) filled through s, a good call and bad calls
// for every Ops method: the good call and the generic bad calls come from the method's entry in
// the table of kernels/internal/opdef (examples_gen.go, see generic.go), the op-specific bad
// calls from badCalls.
func Cases(t testing.TB, dev gpu.Device, s gpu.Stream) []Case {
	t.Helper()
	e := env{t, dev, s}
	f := func(n int) kernels.F32 { return e.f32(make([]float32, n)...) }
	u := func(n int) kernels.U8 { return kernels.Bytes(e.upload(make([]byte, n))) }
	specific := badCalls(e, f)
	var cases []Case
	for _, x := range examples(f, e.i32, u) {
		cases = append(cases, Case{x.method, x.call(x.args), append(x.bad(), specific[x.method]...)})
		delete(specific, x.method)
	}
	for m := range specific {
		t.Errorf("opcheck: bad calls of %s, which the table of kernels/internal/opdef does not have", m)
	}
	return cases
}

// badCalls are the op-specific bad calls of each method (beyond the generic ones of generic.go),
// over buffers of f and e.
func badCalls(e env, f func(int) kernels.F32) map[string][]Bad {
	x1, x2, x3, x4 := f(1), f(2), f(3), f(4)
	y2, y4, z4, w4 := f(2), f(4), f(4), f(4)
	big := f(16)
	outside := kernels.F32{Buf: x4.Buf, Off: 2, Len: 4}
	lab := e.i32(0, 1)
	arg4 := e.i32(0, 0, 0, 0)
	cnt := e.i32(0)
	var none kernels.F32
	bytes4 := kernels.U8{Buf: f(1).Buf, Len: 4}
	conv := kernels.Conv2D{N: 1, InC: 1, InH: 3, InW: 3, OutC: 1, KH: 2, KW: 2} // y 2x2, ws 20
	cy, cx, cw, cws := f(4), f(9), f(4), f(conv.WorkspaceLen())
	dw := kernels.Depthwise2D{N: 1, C: 2, H: 3, W: 3, K: 2} // x [1][2][3][3], y [1][2][2][2], w [2][1][2][2]
	dwy, dwx, dww, dwdx, dwdw := f(8), f(18), f(8), f(18), f(8)
	pool := kernels.Pool2D{N: 1, C: 1, H: 4, W: 4, K: 2} // y 2x2
	px := f(16)
	bn := kernels.BatchNorm{N: 2, C: 2, HW: 1, Momentum: 0.1, Eps: 1e-5}
	g2a, g2b, g2c, g2d, g2e, g2f := f(2), f(2), f(2), f(2), f(2), f(2)
	rec5, rec10 := f(5), f(10)               // one and two records of BatchNormStats for bn
	bf8 := kernels.U8{Buf: f(2).Buf, Len: 8} // four bf16 or fp16 values
	// RenderRecords' pixels [1][3][2][2] and one sample of kind 0 at offset 0.
	pix12, pix12b, off2 := kernels.U8{Buf: f(3).Buf, Len: 12}, kernels.U8{Buf: f(3).Buf, Len: 12}, e.i32(0, 0)
	bad := map[string][]Bad{
		"Fill": {
			{"nil stream", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Fill(nil, x4, 1) }},
			{"view outside its buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Fill(s, outside, 1) }},
			{"view without buffer", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Fill(s, kernels.F32{Len: 2}, 1) }},
			{"negative offset", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.Fill(s, kernels.F32{Buf: x4.Buf, Off: -1, Len: 2}, 1)
			}},
			{"offset past the end of the address space", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.Fill(s, kernels.F32{Buf: x4.Buf, Off: math.MaxInt, Len: 1}, 1)
			}},
		},
		"Copy": {
			{"lengths", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, x4, x3) }},
			{"dst overlaps src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, big.Slice(1, 5), big.Slice(0, 4)) }},
			{"dst is src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Copy(s, x4, x4) }},
		},
		"Axpy": {
			{"lengths", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Axpy(s, y4, 2, x3) }},
		},
		"Scale": {
			{"view outside its buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Scale(s, outside, 2) }},
		},
		"Mul": {
			{"y length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Mul(s, z4, x4, x3) }},
			{"z partly overlaps x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.Mul(s, big.Slice(2, 6), big.Slice(0, 4), y4)
			}},
		},
		"Add": {
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Add(s, z4, x2, y4) }},
		},
		"Gemm": {
			{"negative m", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, false, -2, -2, 1, 1, x4, y4, 0, z4) }},
			{"b shape", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, false, 2, 2, 2, 1, x4, x3, 0, z4) }},
			{"c is a", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Gemm(s, false, false, 2, 2, 2, 1, x4, y4, 1, x4) }},
			// m*k, k*n and m*n wrap around to 0: empty views matched them and the backend walked m x n.
			{"m*n overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.Gemm(s, false, false, 1<<32, 1<<32, 0, 1, none, none, 0, none)
			}},
		},
		"BiasAdd": {
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, x4, y2, 3, 1) }},
			{"negative outer and inner", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, x2, x1, -1, -2) }},
			{"outer*inner overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.BiasAdd(s, none, x1, 1<<32, 1<<32) }},
		},
		"BiasGrad": {
			{"dy length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BiasGrad(s, y2, x3, 1, 2) }},
			{"outer*inner overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.BiasGrad(s, x1, none, 1<<32, 1<<32) }},
		},
		"ReLU": {
			{"lengths", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.ReLU(s, x4, x3) }},
			{"y partly overlaps x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.ReLU(s, big.Slice(1, 5), big.Slice(0, 4)) }},
		},
		"ReLUGrad": {
			{"y length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.ReLUGrad(s, x4, z4, y2) }},
			{"dx is y", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.ReLUGrad(s, y4, x4, y4) }},
		},
		"SoftmaxCrossEntropy": {
			{"classes 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.SoftmaxCrossEntropy(s, x1, y4, x4, lab, 2, 0) }},
			{"labels length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.SoftmaxCrossEntropy(s, x1, y2, x2, lab, 1, 2) }},
			{"loss inside dlogits", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropy(s, y4.Slice(0, 1), y4, x4, lab, 2, 2)
			}},
		},
		"SoftmaxCrossEntropySmooth": {
			{"smoothing 1", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropySmooth(s, x1, y4, x4, lab, 2, 2, 1)
			}},
			{"smoothing NaN", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropySmooth(s, x1, y4, x4, lab, 2, 2, float32(math.NaN()))
			}},
			{"logits length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.SoftmaxCrossEntropySmooth(s, x1, y4, x3, lab, 2, 2, 0.1)
			}},
		},
		"FloatLoss": {
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
		},
		"Argmax": {
			{"dst length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, arg4, x4, 2, 2) }},
			{"negative n", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, lab, x4, -2, -2) }},
			{"n*classes overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Argmax(s, lab, none, 2, 1<<62) }},
		},
		"CountCorrect": {
			{"count length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.CountCorrect(s, lab, x4, lab, 2, 2) }},
		},
		"CountNonFinite": {
			{"count length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.CountNonFinite(s, lab, x4) }},
			{"x outside its buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.CountNonFinite(s, cnt, outside) }},
		},
		"Conv2D": {
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
		},
		"Conv2DBackward": {
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Conv2DBackward(s, x4, y4, none, cy, cw, cws, conv) }},
			{"dw is w", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Conv2DBackward(s, none, cw, none, cy, cw, cws, conv) }},
		},
		"DepthwiseConv2D": {
			{"bias length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.DepthwiseConv2D(s, dwy, dwx, dww, x3, dw) }},
			{"w length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.DepthwiseConv2D(s, dwy, dwx, y4, none, dw) }},
			{"y length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.DepthwiseConv2D(s, big, dwx, dww, none, dw) }},
			{"y is x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := dw
				g.K, g.Pad = 3, 1 // y as x, w [2][1][3][3]
				return o.DepthwiseConv2D(s, dwx, dwx, dwdx, none, g)
			}},
			{"kernel larger than the padded input", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := dw
				g.K = 4
				return o.DepthwiseConv2D(s, dwy, dwx, dww, none, g)
			}},
			{"negative stride", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := dw
				g.Stride = -1
				return o.DepthwiseConv2D(s, dwy, dwx, dww, none, g)
			}},
			{"no channel", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2D(s, none, none, none, none, kernels.Depthwise2D{N: 1, H: 3, W: 3, K: 1})
			}},
			{"element counts overflow", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := dw
				g.N, g.C = 1<<32, 1<<32
				return o.DepthwiseConv2D(s, dwy, dwx, dww, none, g)
			}},
			{"padding overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := dw
				g.Pad = math.MaxInt / 2
				return o.DepthwiseConv2D(s, dwy, dwx, dww, none, g)
			}},
		},
		"DepthwiseConv2DBackward": {
			{"dw length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2DBackward(s, none, y4, none, dwy, dwx, dww, dw)
			}},
			{"no dw", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2DBackward(s, dwdx, none, none, dwy, dwx, dww, dw)
			}},
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2DBackward(s, big, dwdw, none, dwy, dwx, dww, dw)
			}},
			{"dbias length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2DBackward(s, none, dwdw, x3, dwy, dwx, dww, dw)
			}},
			{"dw is w", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2DBackward(s, none, dww, none, dwy, dwx, dww, dw)
			}},
			{"dx is x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.DepthwiseConv2DBackward(s, dwx, dwdw, none, dwy, dwx, dww, dw)
			}},
			{"geometry", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := dw
				g.H = 0
				return o.DepthwiseConv2DBackward(s, dwdx, dwdw, none, dwy, dwx, dww, g)
			}},
		},
		"MaxPool2D": {
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
		},
		"MaxPool2DBackward": {
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.MaxPool2DBackward(s, x4, x4, arg4, pool) }},
		},
		"BatchNormTrain": {
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
		},
		"BatchNormEval": {
			{"gamma length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BatchNormEval(s, y4, x4, x3, g2b, g2c, g2d, bn) }},
			{"element count overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := bn
				g.N, g.HW = 1<<32, 1<<31
				return o.BatchNormEval(s, none, none, g2a, g2b, g2c, g2d, g)
			}},
		},
		"BatchNormBackward": {
			{"dbeta length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackward(s, z4, g2a, x4, y4, x4, g2c, g2d, g2e, bn)
			}},
			{"momentum 2", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				g := bn
				g.Momentum = 2
				return o.BatchNormBackward(s, none, g2a, g2b, y4, x4, g2c, g2d, g2e, g)
			}},
		},
		"BatchNormStats": {
			{"stats length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.BatchNormStats(s, x4, x4, bn) }},
			{"stats is x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormStats(s, kernels.F32{Buf: big.Buf, Len: 5}, kernels.F32{Buf: big.Buf, Off: 4, Len: 4}, bn)
			}},
		},
		"BatchNormTrainStats": {
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
		},
		"BatchNormBackwardInput": {
			{"sums length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackwardInput(s, z4, y4, x4, g2a, g2b, g2c, x4, bn)
			}},
			{"no dx", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackwardInput(s, none, y4, x4, g2a, g2b, g2c, rec5, bn)
			}},
			{"dx is dy", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.BatchNormBackwardInput(s, y4, y4, x4, g2a, g2b, g2c, rec5, bn)
			}},
		},
		"GlobalAvgPool": {
			{"inner 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, x4, 0) }},
			{"x length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, x3, 2) }},
			{"x length overflows", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPool(s, y2, none, 1<<62) }},
		},
		"GlobalAvgPoolBackward": {
			{"dx length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.GlobalAvgPoolBackward(s, x4, y2, 3) }},
		},
		"Dropout": {
			{"p 1", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, x4, y4, x4, 1, 1) }},
			{"mask length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, x4, y2, x4, 0.5, 1) }},
			{"mask is x", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return o.Dropout(s, y4, x4, x4, 0.5, 1) }},
		},
		"NormalizeU8": {
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
		},
		"RenderRecords": {
			{"2 channels", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, pix12, pix12b, off2, bytes4, 1, 2, 2, 3)
			}},
			{"height 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, pix12, pix12b, off2, bytes4, 1, 3, 0, 4)
			}},
			{"negative n", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, pix12, pix12b, off2, bytes4, -1, 3, 2, 2)
			}},
			{"dst length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, pix12, pix12b, off2, bytes4, 1, 1, 2, 2)
			}},
			{"offsets length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, pix12, pix12b, cnt, bytes4, 1, 3, 2, 2)
			}},
			{"workspace not n slots", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, kernels.U8{Buf: f(6).Buf, Len: 24}, pix12b, arg4, bytes4.Slice(0, 3), 2, 3, 2, 2)
			}},
			{"dst overlaps the workspace", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.RenderRecords(s, pix12, pix12b, off2, pix12.Slice(8, 12), 1, 3, 2, 2)
			}},
		},
		"SGDStep": {
			{"momentum without velocity", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.SGDStep(s, w4, x4, none, kernels.SGD{LR: 0.1, Momentum: 0.9})
			}},
			{"g length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return o.SGDStep(s, w4, x3, none, kernels.SGD{LR: 0.1}) }},
		},
		"AdamWStep": {
			{"step 0", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.AdamWStep(s, w4, x4, y4, z4, none, kernels.AdamW{LR: 0.1})
			}},
			{"m length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.AdamWStep(s, w4, x4, x3, z4, none, kernels.AdamW{LR: 0.1, Step: 1})
			}},
			{"amsgrad without vmax", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.AdamWStep(s, w4, x4, y4, z4, none, kernels.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Step: 1, AMSGrad: true})
			}},
			{"vmax length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.AdamWStep(s, w4, x4, y4, z4, x3, kernels.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Step: 1, AMSGrad: true})
			}},
			{"vmax overlaps v", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.AdamWStep(s, w4, x4, y4, z4, z4, kernels.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Step: 1, AMSGrad: true})
			}},
		},
		"RMSpropStep": {
			{"centered without mean gradient", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.RMSpropStep(s, w4, x4, y4, none, none, kernels.RMSprop{LR: 0.1, Alpha: 0.9, Centered: true})
			}},
			{"momentum without buffer", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.RMSpropStep(s, w4, x4, y4, none, none, kernels.RMSprop{LR: 0.1, Alpha: 0.9, Momentum: 0.9})
			}},
			{"sq length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error {
				return o.RMSpropStep(s, w4, x4, x3, none, none, kernels.RMSprop{LR: 0.1, Alpha: 0.9})
			}},
			{"sq overlaps w", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return o.RMSpropStep(s, w4, x4, w4, none, none, kernels.RMSprop{LR: 0.1, Alpha: 0.9})
			}},
		},
	}
	maps.Copy(bad, nnCases(f, x2, x3, x4, y4, z4, big, none))
	maps.Copy(bad, conversionCases("BF16", kernels.Ops.ToBF16, kernels.Ops.FromBF16, x3, x4, y4, bf8))
	maps.Copy(bad, conversionCases("FP16", kernels.Ops.ToFP16, kernels.Ops.FromFP16, x3, x4, y4, bf8))
	return bad
}

// conversionCases are the cases of a 16-bit format's two conversions (ToBF16 and FromBF16, or
// ToFP16 and FromFP16), over four 16-bit values h8.
func conversionCases(format string, to func(kernels.Ops, gpu.Stream, kernels.U8, kernels.F32) error,
	from func(kernels.Ops, gpu.Stream, kernels.F32, kernels.U8) error, x3, x4, y4 kernels.F32, h8 kernels.U8) map[string][]Bad {
	return map[string][]Bad{
		"To" + format: {
			{"dst length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return to(o, s, h8, x3) }},
			{"odd offset", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return to(o, s, h8.Slice(1, 7), x3) }},
			{"dst is src", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error {
				return to(o, s, kernels.U8{Buf: x4.Buf, Off: 4, Len: 4}, x4.Slice(0, 2))
			}},
		},
		"From" + format: {
			{"src length", kernels.ErrShape, func(o kernels.Ops, s gpu.Stream) error { return from(o, s, x3, h8) }},
			{"nil stream", kernels.ErrArgument, func(o kernels.Ops, s gpu.Stream) error { return from(o, nil, y4, h8) }},
		},
	}
}

// nnCases are the cases of the ops of the differentiable core (elementwise functions, strided
// and broadcast ops, softmax, layer norm, batched GEMM), over new buffers of f and those given.
func nnCases(f func(int) kernels.F32, x2, x3, x4, y4, z4, big, none kernels.F32) map[string][]Bad {
	type ops = kernels.Ops
	type st = gpu.Stream
	x6, z6, d6, a8, c8 := f(6), f(6), f(6), f(8), f(8)
	s3, m2, r2, g2, b2 := f(3), f(2), f(2), f(2), f(2)
	sh, xs, ys := []int{2, 3}, []int{3, 1}, []int{0, 1} // x6 [2][3] plus x3 [3] broadcast over rows
	add := kernels.BinaryAdd
	nine := []int{1, 1, 1, 1, 1, 1, 1, 1, 1}
	att := kernels.Attention{Batch: 1, LQ: 2, LK: 2, D: 2, Scale: 0.5} // q, k, v, y [1][2][2], lse [1][2]
	w4 := f(4)
	return map[string][]Bad{
		"Unary": {
			{"func 0", kernels.ErrArgument, func(o ops, s st) error { return o.Unary(s, 0, y4, x4) }},
			{"func past ReLU6", kernels.ErrArgument, func(o ops, s st) error { return o.Unary(s, kernels.ReLU6+1, y4, x4) }},
			{"lengths", kernels.ErrShape, func(o ops, s st) error { return o.Unary(s, kernels.Exp, y4, x3) }},
			{"y partly overlaps x", kernels.ErrArgument, func(o ops, s st) error {
				return o.Unary(s, kernels.Tanh, big.Slice(1, 5), big.Slice(0, 4))
			}},
		},
		"UnaryGrad": {
			{"func 0", kernels.ErrArgument, func(o ops, s st) error { return o.UnaryGrad(s, 0, x4, z4, y4) }},
			{"x length", kernels.ErrShape, func(o ops, s st) error { return o.UnaryGrad(s, kernels.Exp, x4, z4, x3) }},
			{"dx is x", kernels.ErrArgument, func(o ops, s st) error { return o.UnaryGrad(s, kernels.Exp, y4, z4, y4) }},
		},
		"Binary": {
			{"func 0", kernels.ErrArgument, func(o ops, s st) error { return o.Binary(s, 0, z6, x6, x3, sh, xs, ys) }},
			{"func past BinaryDiv", kernels.ErrArgument, func(o ops, s st) error {
				return o.Binary(s, kernels.BinaryDiv+1, z6, x6, x3, sh, xs, ys)
			}},
			{"rank 0", kernels.ErrArgument, func(o ops, s st) error { return o.Binary(s, add, x1of(z6), x6, x3, nil, nil, nil) }},
			{"rank 9", kernels.ErrArgument, func(o ops, s st) error {
				return o.Binary(s, add, x1of(z6), x6, x3, nine, make([]int, 9), make([]int, 9))
			}},
			{"dim 0", kernels.ErrArgument, func(o ops, s st) error { return o.Binary(s, add, none, x6, x3, []int{2, 0}, xs, ys) }},
			{"y strides of rank 1", kernels.ErrArgument, func(o ops, s st) error { return o.Binary(s, add, z6, x6, x3, sh, xs, []int{1}) }},
			{"negative stride", kernels.ErrArgument, func(o ops, s st) error { return o.Binary(s, add, z6, x6, x3, sh, []int{3, -1}, ys) }},
			{"z length", kernels.ErrShape, func(o ops, s st) error { return o.Binary(s, add, z4, x6, x3, sh, xs, ys) }},
			{"x strides read past x", kernels.ErrShape, func(o ops, s st) error {
				return o.Binary(s, add, z6, x6, x3, sh, []int{3, 2}, ys)
			}},
			{"y broadcast past y", kernels.ErrShape, func(o ops, s st) error { return o.Binary(s, add, z6, x6, x2, sh, xs, ys) }},
			{"strides overflow", kernels.ErrArgument, func(o ops, s st) error {
				return o.Binary(s, add, z6, x6, x3, sh, []int{math.MaxInt, 1}, ys)
			}},
			{"shape overflows", kernels.ErrArgument, func(o ops, s st) error {
				return o.Binary(s, add, none, x6, x3, []int{1 << 32, 1 << 32}, []int{0, 0}, []int{0, 0})
			}},
			{"z overlaps x", kernels.ErrArgument, func(o ops, s st) error {
				return o.Binary(s, add, big.Slice(0, 6), big.Slice(3, 9), x3, sh, xs, ys)
			}},
			{"z is y", kernels.ErrArgument, func(o ops, s st) error { return o.Binary(s, add, z6, x6, z6, sh, xs, xs) }},
		},
		"SumTo": {
			{"keep dim neither the dim nor 1", kernels.ErrArgument, func(o ops, s st) error { return o.SumTo(s, x4, x6, sh, []int{2, 2}) }},
			{"keep of a lower rank", kernels.ErrArgument, func(o ops, s st) error { return o.SumTo(s, s3, x6, sh, []int{3}) }},
			{"keep of a higher rank", kernels.ErrArgument, func(o ops, s st) error { return o.SumTo(s, s3, x6, sh, []int{1, 3, 1}) }},
			{"rank 9", kernels.ErrArgument, func(o ops, s st) error { return o.SumTo(s, x1of(s3), x1of(x6), nine, nine) }},
			{"y length", kernels.ErrShape, func(o ops, s st) error { return o.SumTo(s, x2, x6, sh, []int{1, 3}) }},
			{"x length", kernels.ErrShape, func(o ops, s st) error { return o.SumTo(s, s3, x4, sh, []int{1, 3}) }},
			{"y inside x", kernels.ErrArgument, func(o ops, s st) error { return o.SumTo(s, x6.Slice(0, 3), x6, sh, []int{1, 3}) }},
		},
		"CopyStrided": {
			{"dst stride 0 on a dim of 2", kernels.ErrArgument, func(o ops, s st) error { return o.CopyStrided(s, d6, []int{0, 1}, x6, xs, sh) }},
			{"dst dims overlap", kernels.ErrArgument, func(o ops, s st) error { return o.CopyStrided(s, d6, []int{2, 1}, x6, xs, sh) }},
			{"src strides read past src", kernels.ErrShape, func(o ops, s st) error {
				return o.CopyStrided(s, d6, []int{1, 2}, x6, []int{3, 2}, sh)
			}},
			{"dst strides write past dst", kernels.ErrShape, func(o ops, s st) error {
				return o.CopyStrided(s, x4, []int{1, 2}, x6, xs, sh)
			}},
			{"negative src stride", kernels.ErrArgument, func(o ops, s st) error {
				return o.CopyStrided(s, d6, []int{1, 2}, x6, []int{-3, 1}, sh)
			}},
			{"rank 9", kernels.ErrArgument, func(o ops, s st) error {
				return o.CopyStrided(s, d6, make([]int, 9), x6, make([]int, 9), nine)
			}},
			{"dst overlaps src", kernels.ErrArgument, func(o ops, s st) error {
				return o.CopyStrided(s, big.Slice(0, 6), xs, big.Slice(4, 10), xs, sh)
			}},
		},
		"Softmax": {
			{"cols 0", kernels.ErrArgument, func(o ops, s st) error { return o.Softmax(s, none, none, 2, 0) }},
			{"negative rows", kernels.ErrArgument, func(o ops, s st) error { return o.Softmax(s, none, none, -1, 2) }},
			{"y length", kernels.ErrShape, func(o ops, s st) error { return o.Softmax(s, x3, y4, 2, 2) }},
			{"rows*cols overflows", kernels.ErrArgument, func(o ops, s st) error { return o.Softmax(s, none, none, 1<<32, 1<<32) }},
			{"y partly overlaps x", kernels.ErrArgument, func(o ops, s st) error {
				return o.Softmax(s, big.Slice(2, 6), big.Slice(0, 4), 2, 2)
			}},
		},
		"SoftmaxBackward": {
			{"y length", kernels.ErrShape, func(o ops, s st) error { return o.SoftmaxBackward(s, x4, z4, x3, 2, 2) }},
			{"dx is y", kernels.ErrArgument, func(o ops, s st) error { return o.SoftmaxBackward(s, y4, z4, y4, 2, 2) }},
		},
		"LayerNorm": {
			{"eps 0", kernels.ErrArgument, func(o ops, s st) error { return o.LayerNorm(s, y4, m2, r2, x4, none, none, 2, 2, 0) }},
			{"eps NaN", kernels.ErrArgument, func(o ops, s st) error {
				return o.LayerNorm(s, y4, m2, r2, x4, none, none, 2, 2, float32(math.NaN()))
			}},
			{"eps +Inf", kernels.ErrArgument, func(o ops, s st) error {
				return o.LayerNorm(s, y4, m2, r2, x4, none, none, 2, 2, float32(math.Inf(1)))
			}},
			{"cols 0", kernels.ErrArgument, func(o ops, s st) error { return o.LayerNorm(s, none, m2, r2, none, none, none, 2, 0, 1e-5) }},
			{"mean length", kernels.ErrShape, func(o ops, s st) error { return o.LayerNorm(s, y4, x3, r2, x4, none, none, 2, 2, 1e-5) }},
			{"gamma length", kernels.ErrShape, func(o ops, s st) error { return o.LayerNorm(s, y4, m2, r2, x4, x3, none, 2, 2, 1e-5) }},
			{"y is x", kernels.ErrArgument, func(o ops, s st) error { return o.LayerNorm(s, x4, m2, r2, x4, none, none, 2, 2, 1e-5) }},
			{"rstd is mean", kernels.ErrArgument, func(o ops, s st) error { return o.LayerNorm(s, y4, m2, m2, x4, none, none, 2, 2, 1e-5) }},
		},
		"LayerNormBackward": {
			{"dgamma length", kernels.ErrShape, func(o ops, s st) error {
				return o.LayerNormBackward(s, z4, x3, b2, y4, x4, none, m2, r2, 2, 2)
			}},
			{"no mean", kernels.ErrShape, func(o ops, s st) error {
				return o.LayerNormBackward(s, z4, g2, b2, y4, x4, none, none, r2, 2, 2)
			}},
			{"negative rows", kernels.ErrArgument, func(o ops, s st) error {
				return o.LayerNormBackward(s, none, none, none, none, none, none, none, none, -1, 2)
			}},
			{"dx is dy", kernels.ErrArgument, func(o ops, s st) error {
				return o.LayerNormBackward(s, y4, g2, b2, y4, x4, none, m2, r2, 2, 2)
			}},
			{"dbeta is gamma", kernels.ErrArgument, func(o ops, s st) error {
				return o.LayerNormBackward(s, z4, none, b2, y4, x4, b2, m2, r2, 2, 2)
			}},
		},
		"Attention": {
			{"no key", kernels.ErrArgument, func(o ops, s st) error {
				return o.Attention(s, a8, m2, x4, none, none, kernels.Attention{Batch: 1, LQ: 2, LK: 0, D: 4, Scale: 0.5})
			}},
			{"d 0", kernels.ErrArgument, func(o ops, s st) error {
				return o.Attention(s, none, m2, none, none, none, kernels.Attention{Batch: 1, LQ: 2, LK: 1, Scale: 0.5})
			}},
			{"scale NaN", kernels.ErrArgument, func(o ops, s st) error {
				return o.Attention(s, w4, m2, x4, z4, y4, kernels.Attention{Batch: 1, LQ: 2, LK: 2, D: 2, Scale: float32(math.NaN())})
			}},
			{"batch*lq*d overflows", kernels.ErrArgument, func(o ops, s st) error {
				return o.Attention(s, a8, m2, x4, z4, y4, kernels.Attention{Batch: 1 << 32, LQ: 1 << 32, LK: 1, D: 1, Scale: 1})
			}},
			{"y length", kernels.ErrShape, func(o ops, s st) error { return o.Attention(s, c8, m2, x4, z4, y4, att) }},
			{"lse length", kernels.ErrShape, func(o ops, s st) error { return o.Attention(s, x4, x3, y4, z4, w4, att) }},
			{"v length", kernels.ErrShape, func(o ops, s st) error { return o.Attention(s, x4, m2, y4, z4, x3, att) }},
			{"y is q", kernels.ErrArgument, func(o ops, s st) error { return o.Attention(s, x4, m2, x4, z4, y4, att) }},
		},
		"AttentionBackward": {
			{"dk length", kernels.ErrShape, func(o ops, s st) error {
				return o.AttentionBackward(s, a8.Slice(0, 4), x3, c8.Slice(0, 4), c8.Slice(4, 8), x4, z4, y4, w4, m2, att)
			}},
			{"no lse", kernels.ErrShape, func(o ops, s st) error {
				return o.AttentionBackward(s, a8.Slice(0, 4), a8.Slice(4, 8), c8.Slice(0, 4), c8.Slice(4, 8), x4, z4, y4, w4, none, att)
			}},
			{"negative batch", kernels.ErrArgument, func(o ops, s st) error {
				return o.AttentionBackward(s, none, none, none, none, none, none, none, none, none, kernels.Attention{Batch: -1, LQ: 1, LK: 1, D: 1})
			}},
			{"dq is dy", kernels.ErrArgument, func(o ops, s st) error {
				return o.AttentionBackward(s, c8.Slice(4, 8), a8.Slice(4, 8), c8.Slice(0, 4), c8.Slice(4, 8), x4, z4, y4, w4, m2, att)
			}},
			{"dv overlaps dk", kernels.ErrArgument, func(o ops, s st) error {
				return o.AttentionBackward(s, a8.Slice(0, 4), a8.Slice(4, 8), a8.Slice(2, 6), c8.Slice(4, 8), x4, z4, y4, w4, m2, att)
			}},
		},
		"GemmStrided": {
			{"negative batch", kernels.ErrArgument, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, -1, 2, 2, 2, 1, a8, 4, y4, 0, 0, c8, 4)
			}},
			{"negative stride", kernels.ErrArgument, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, 2, 2, 2, 2, 1, a8, -4, y4, 0, 0, c8, 4)
			}},
			{"outputs overlap", kernels.ErrArgument, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, 2, 2, 2, 2, 1, a8, 4, y4, 0, 0, c8, 3)
			}},
			{"a holds one matrix", kernels.ErrShape, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, 2, 2, 2, 2, 1, x4, 4, y4, 0, 0, c8, 4)
			}},
			{"c holds one matrix", kernels.ErrShape, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, 2, 2, 2, 2, 1, a8, 4, y4, 0, 0, z4, 4)
			}},
			{"batch*stride overflows", kernels.ErrArgument, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, 1<<62, 2, 2, 2, 1, a8, 4, y4, 0, 0, c8, 4)
			}},
			{"c is a", kernels.ErrArgument, func(o ops, s st) error {
				return o.GemmStrided(s, false, false, 2, 2, 2, 2, 1, a8, 4, y4, 0, 0, a8, 4)
			}},
		},
	}
}

// x1of is the first element of v: an operand of the right kind where the shape is what is wrong.
func x1of(v kernels.F32) kernels.F32 { return v.Slice(0, 1) }
