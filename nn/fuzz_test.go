package nn_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// program is a random forward (and backward) pass read from fuzz bytes: each op of nn drawn with
// operands from the tensors made so far and arguments small enough to run quickly but free to
// be wrong (negative sizes, axes out of range, shapes that do not fit, tensors of another graph).
// Whatever it draws, no op may panic, and every error wraps one of nn's sentinels.
type program struct {
	b   []byte
	e   *env
	g   *nn.Graph
	log []string // what ran, for the failure message
}

// byte returns the next byte of the program, 0 once it is spent.
func (p *program) byte() byte {
	if len(p.b) == 0 {
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

// small returns an int in [-2, 6): sizes, axes and offsets, some of them wrong.
func (p *program) small() int { return int(p.byte()%8) - 2 }

// shape returns a shape of rank 0..4 with sizes drawn by small (negative ones included).
func (p *program) shape() []int {
	s := make([]int, p.byte()%5)
	for i := range s {
		s[i] = p.small()
		if p.byte()%4 != 0 {
			s[i] = max(s[i], 1) // mostly valid sizes, so that the ops behind them run
		}
	}
	return s
}

// input makes an input of g of a drawn shape (a graph error where the shape is invalid).
func (p *program) input(g *nn.Graph) *nn.Tensor {
	s := p.shape()
	n := 1
	for _, d := range s {
		n *= max(d, 0)
	}
	v, err := p.e.a.F32(n)
	if err != nil {
		p.e.t.Fatal(err)
	}
	return g.Input(v.Slice(0, n), s...)
}

// run interprets the program and returns the pass's error.
func (p *program) run() error {
	other := p.e.graph(true)
	p.g = p.e.graph(p.byte()%2 == 0)
	ts := []*nn.Tensor{p.input(p.g), p.input(p.g)}
	w := nn.Param(p.shape(), nn.Weight)
	if err := nn.Bind(nn.Sequential{paramModule{w}}, p.e.a, p.e.s, 1); err == nil {
		ts = append(ts, w)
		p.g.Attach(w)
	}
	foreign := other.Input(mustF32(p.e, 6), 2, 3)
	pick := func() *nn.Tensor {
		i := int(p.byte())
		if i == 255 {
			return foreign
		}
		return ts[i%len(ts)]
	}
	for steps := 0; len(p.b) > 0 && steps < 12; steps++ {
		op := p.byte() % 48
		a, b, c := pick(), pick(), pick()
		i, j, k := p.small(), p.small(), p.small()
		p.log = append(p.log, fmt.Sprintf("op %d on %v %v %v args %d %d %d", op, a.Shape(), b.Shape(), c.Shape(), i, j, k))
		var y *nn.Tensor
		switch op {
		case 0:
			y = nn.Add(a, b)
		case 1:
			y = nn.Sub(a, b)
		case 2:
			y = nn.Mul(a, b)
		case 3:
			y = nn.Div(a, b)
		case 4:
			y = nn.AddScalar(a, float32(i))
		case 5:
			y = nn.Scale(a, float32(i))
		case 6:
			y = nn.Exp(a)
		case 7:
			y = nn.Sigmoid(a)
		case 8:
			y = nn.GELU(a)
		case 9:
			y = nn.ReLU(a)
		case 10:
			y = nn.Hardswish(a)
		case 11:
			y = nn.Sum(a, []int{i}, j > 1)
		case 12:
			y = nn.Mean(a, []int{i, j}, k > 1)
		case 13:
			y = a.Reshape(i, j, k)
		case 14:
			y = a.Reshape(-1, i)
		case 15:
			y = nn.Flatten(a)
		case 16:
			y = nn.Permute(a, i, j, k)
		case 17:
			y = nn.Transpose(a, i, j)
		case 18:
			y = nn.Narrow(a, i, j, k)
		case 19:
			parts := nn.Split(a, i, j, k)
			y = parts[len(parts)-1]
		case 20:
			y = nn.Concat(i, a, b)
		case 21:
			y = nn.Concat(i)
		case 22:
			y = nn.MatMul(a, b)
		case 23:
			y = nn.Linear(a, b, nil)
		case 24:
			y = nn.Linear(a, b, c)
		case 25:
			y = nn.Conv2d(a, b, nil, nn.ConvOptions{Stride: i, Padding: j, Groups: k})
		case 26:
			y = nn.Conv2d(a, b, c, nn.ConvOptions{Stride: i, Padding: j})
		case 27:
			y = nn.BatchNorm(a, b, c, b, c, 0.1, 1e-5)
		case 28:
			y = nn.LayerNorm(a, b, c, 1e-5)
		case 29:
			y = nn.LayerNorm(a, nil, nil, 1e-5)
		case 30:
			y = nn.Softmax(a)
		case 31:
			y = nn.ScaledDotProductAttention(a, b, c, 0.5)
		case 32:
			y = nn.MaxPool2d(a, i, j, k)
		case 33:
			y = nn.GlobalAvgPool(a)
		case 34:
			y = nn.Dropout(a, float32(i)/4)
		case 35:
			y = nn.DropPath(a, float32(i)/4)
		case 36:
			y = nn.CrossEntropy(a, p.e.labels([]int32{0, 1}), 0)
		case 37:
			y = p.g.Full(float32(i), i, j, k)
		case 38:
			y = p.g.Constant([]float32{1, 2, 3, 4, 5, 6}, i, j)
		case 39:
			y = p.input(p.g)
		case 40:
			y = nn.Scale(a, float32(a.Dim(i)+b.Dim(j)))
		case 41:
			y = nn.Log(a)
		case 42:
			y = nn.Tanh(nn.Sqrt(a))
		case 43:
			y = nn.Conv2d(a, b, nil, nn.ConvOptions{Stride: 1, Groups: a.Dim(1)})
		case 44:
			y = nn.SoftCrossEntropy(a, b.Data())
		case 45:
			y = nn.BCEWithLogits(a, b.Data(), c.Data())
		case 46:
			y = nn.MSE(a, b.Data())
		case 47:
			y = nn.SmoothL1(a, b.Data(), float32(i))
		}
		ts = append(ts, y)
	}
	last := ts[len(ts)-1]
	if p.g.Err() == nil && p.byte()%2 == 0 {
		if err := p.g.Backward(nn.Sum(last, nil, false), nil); err != nil {
			return err
		}
	}
	if err := p.g.Err(); err != nil {
		return err
	}
	_, err := last.Host(context.Background(), p.g)
	return err
}

// paramModule holds one parameter, so that nn.Bind gives it memory.
type paramModule struct{ W *nn.Tensor }

func (m paramModule) Forward(x *nn.Tensor) *nn.Tensor { return x }

func mustF32(e *env, n int) kernels.F32 {
	v, err := e.a.F32(n)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// checkProgram runs one program and fails the test on a panic or an error of no sentinel.
func checkProgram(t testing.TB, b []byte) {
	e, release := openEnv(t) // a stream of its own: a kernel's sticky error stays with its program
	defer release()
	p := &program{b: b, e: e}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v\nprogram %x:\n%v\n%s", r, b, p.log, debug.Stack())
		}
	}()
	err := p.run()
	if err != nil && !errors.Is(err, nn.ErrShape) && !errors.Is(err, nn.ErrGraph) && !errors.Is(err, nn.ErrArgument) && !errors.Is(err, kernels.ErrLabel) {
		t.Fatalf("error %q is none of ErrShape, ErrGraph, ErrArgument, kernels.ErrLabel\nprogram %x:\n%v", err, b, p.log)
	}
}

// FuzzOps drives every op of nn with random shapes, arguments and operands (go test -fuzz
// FuzzOps ./nn/): no program may panic.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 2, 3, 4, 2, 3, 4, 1, 5, 9, 0, 1, 0, 3, 3, 3})
	f.Add([]byte{1, 3, 5, 5, 5, 5, 5, 5, 2, 2, 2, 19, 0, 0, 0, 3, 4, 4})
	f.Add([]byte{0, 4, 3, 3, 3, 3, 4, 3, 3, 3, 3, 2, 3, 3, 0, 255, 0, 1, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkProgram(t, b)
	})
}

// TestOpsNeverPanic runs a few thousand random programs of FuzzOps's form on every test run.
func TestOpsNeverPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		b := make([]byte, 8+r.IntN(80))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		checkProgram(t, b)
	}
}
