package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/stoke-ml/stoke/models"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/kernels"
)

// TestRMSpropTorch: RMSprop's steps match torch.optim.RMSprop's (torch's own implementation, run
// through $STOKE_PYTHON) within 1e-6 relative, weights and state, over five steps of given
// gradients, plain, with momentum, centered, with weight decay and with torchvision's MobileNetV3
// settings; a bias (Param.Decayed false) gets no weight decay, as a torch parameter group with
// weight_decay 0.
func TestRMSpropTorch(t *testing.T) {
	py := pyoracle.Python(t, "torch")
	const n, nb, steps = 24, 5, 5
	cases := []struct {
		name string
		o    RMSprop
	}{
		{"plain", RMSprop{LR: 0.01}},
		{"momentum", RMSprop{LR: 0.01, Momentum: 0.9}},
		{"centered", RMSprop{LR: 0.01, Alpha: 0.9, Centered: true}},
		{"centered momentum", RMSprop{LR: 0.005, Momentum: 0.5, Centered: true, Eps: 1e-3}},
		{"weight decay", RMSprop{LR: 0.01, WeightDecay: 0.1}},
		{"mobilenet_v3", RMSprop{LR: 0.064, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9, WeightDecay: 1e-5}},
	}
	r := rand.New(rand.NewPCG(7, 8))
	vec := func(k int, scale float32) []float32 { return normalVec(r, k, scale) }
	type pcase struct {
		LR, Alpha, Eps, WeightDecay, Momentum float64
		Centered                              bool
		W, B                                  []float32
		GW, GB                                [][]float32 // the gradients of each step
	}
	in := make([]pcase, len(cases))
	for i, c := range cases {
		o := c.o.withDefaults()
		in[i] = pcase{LR: o.LR, Alpha: o.Alpha, Eps: o.Eps, WeightDecay: o.WeightDecay, Momentum: o.Momentum, Centered: o.Centered,
			W: vec(n, 1), B: vec(nb, 0.1)}
		for range steps {
			in[i].GW, in[i].GB = append(in[i].GW, vec(n, 0.5)), append(in[i].GB, vec(nb, 0.05))
		}
	}
	script := `
import json, sys, torch
out = []
for c in json.load(sys.stdin):
    w = torch.nn.Parameter(torch.tensor(c["W"], dtype=torch.float32))
    b = torch.nn.Parameter(torch.tensor(c["B"], dtype=torch.float32))
    opt = torch.optim.RMSprop([{"params": [w]}, {"params": [b], "weight_decay": 0.0}], lr=c["LR"], alpha=c["Alpha"],
        eps=c["Eps"], weight_decay=c["WeightDecay"], momentum=c["Momentum"], centered=c["Centered"])
    for gw, gb in zip(c["GW"], c["GB"]):
        w.grad = torch.tensor(gw, dtype=torch.float32)
        b.grad = torch.tensor(gb, dtype=torch.float32)
        opt.step()
    res = {}
    for name, p in (("W", w), ("B", b)):
        st = opt.state[p]
        res[name] = [p.detach().tolist(), st["square_avg"].tolist()]
        if c["Momentum"] != 0:
            res[name].append(st["momentum_buffer"].tolist())
        if c["Centered"]:
            res[name].append(st["grad_avg"].tolist())
    out.append(res)
print(json.dumps(out))
`
	var want []map[string][][]float64
	runTorch(t, py, script, in, &want)
	dev, ops, s := optimDevice(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pc := in[i]
			w, b := optimSteps(t, dev, ops, s, c.o, c.o.LR, pc.W, pc.B, pc.GW, pc.GB)
			for name, p := range map[string]*testParam{"W": w, "B": b} {
				got := append([]kernels.F32{p.W}, p.state...)
				if len(got) != len(want[i][name]) {
					t.Fatalf("%s: %d tensors of weights and state; torch has %d", name, len(got), len(want[i][name]))
				}
				for j, v := range got {
					if e := relErr(download(t, s, v), want[i][name][j]); !(e <= 1e-6) {
						t.Errorf("%s tensor %d (weights, square_avg, momentum_buffer, grad_avg): relative error %g against torch; want <= 1e-6",
							name, j, e)
					}
				}
			}
		})
	}
}

// testParam is a Param on a device with its optimizer state.
type testParam struct {
	Param
	state []kernels.F32
}

func newTestParam(t *testing.T, dev gpu.Device, s gpu.Stream, kind paramKind, w []float32) *testParam {
	t.Helper()
	return &testParam{Param: Param{W: deviceF32(t, dev, s, w), G: deviceF32(t, dev, s, make([]float32, len(w))), kind: kind}}
}

// deviceF32 allocates a tensor on dev holding host.
func deviceF32(t *testing.T, dev gpu.Device, s gpu.Stream, host []float32) kernels.F32 {
	t.Helper()
	buf, err := dev.Alloc(4 * len(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Free() })
	v := kernels.Float32s(buf)
	put(t, s, v, host)
	return v
}

// put copies host into v.
func put(t *testing.T, s gpu.Stream, v kernels.F32, host []float32) {
	t.Helper()
	if err := upload(s, v, host); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// download reads v.
func download(t *testing.T, s gpu.Stream, v kernels.F32) []float32 {
	t.Helper()
	host := make([]float32, v.Len)
	if err := s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), v.Buf, 4*v.Off); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return host
}

// relErr is the largest difference of got from want relative to want's largest magnitude.
func relErr(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-want[i]))
		m = max(m, math.Abs(want[i]))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// TestNewOptimizer: the names stoke train and the recipes take give their optimizers with the
// settings stated once (PyTorch's AdamW defaults, torchvision's RMSprop recipe), a recipe's is
// NewOptimizer's at its scaled rate, and an unknown name is a configuration error.
func TestNewOptimizer(t *testing.T) {
	for name, want := range map[string]Optimizer{
		"sgd":     SGD{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4},
		"adam":    Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4},
		"adamw":   AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4},
		"rmsprop": RMSprop{LR: 0.1, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9, WeightDecay: 1e-4},
	} {
		got, err := NewOptimizer(name, 0.1, 0.9, 1e-4)
		if err != nil || got != want {
			t.Errorf("NewOptimizer(%s) = %#v, %v; want %#v", name, got, err, want)
		}
		r := models.Recipe{Optimizer: name, LR: 0.05, LRBatch: 64, WeightDecay: 1e-4}
		if ro, err := RecipeOptimizer(r, 128); err != nil || ro != got {
			t.Errorf("recipe %s: %#v, %v; want NewOptimizer's %#v", name, ro, err, got)
		}
	}
	if sgd, _ := NewOptimizer("sgd", 0.1, 0, 0); sgd.(SGD).Nesterov {
		t.Error("sgd without momentum is Nesterov")
	}
	if _, err := NewOptimizer("adagrad", 0.1, 0.9, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("NewOptimizer(adagrad) = %v; want ErrConfig", err)
	}
}

// TestAdamTorch: Adam's steps match torch.optim.Adam's (run through $STOKE_PYTHON) within 1e-6
// relative, weights and exp_avg, over five steps of given gradients: with torch's defaults, other
// betas and eps, and an L2 weight decay added to the gradient of the weight, not of the bias (a
// parameter group with weight_decay 0), which AdamW would decouple. exp_avg_sq is within 2e-5:
// the kernels (AdamW's, shared) take the betas as float32 and compute 1-β2 from them, 0.00099998713
// for 0.999 where torch rounds its float64 1-β2 to 0.001, 1.3e-5 relative (RMSprop's kernel takes
// alpha in float64 for that reason; AdamW's CPU and CUDA kernels could too).
func TestAdamTorch(t *testing.T) {
	py := pyoracle.Python(t, "torch")
	const n, nb, steps = 24, 5, 5
	cases := map[string]Adam{
		"defaults":     {LR: 0.01},
		"betas":        {LR: 0.003, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6},
		"weight decay": {LR: 0.01, WeightDecay: 0.1},
	}
	r := rand.New(rand.NewPCG(9, 10))
	vec := func(k int, scale float32) []float32 { return normalVec(r, k, scale) }
	type pcase struct {
		LR, Beta1, Beta2, Eps, WeightDecay float64
		W, B                               []float32
		GW, GB                             [][]float32
	}
	in := map[string]pcase{}
	for name, o := range cases {
		a := o.adamW()
		c := pcase{LR: o.LR, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: o.WeightDecay, W: vec(n, 1), B: vec(nb, 0.1)}
		for range steps {
			c.GW, c.GB = append(c.GW, vec(n, 0.5)), append(c.GB, vec(nb, 0.05))
		}
		in[name] = c
	}
	script := `
import json, sys, torch
out = {}
for name, c in json.load(sys.stdin).items():
    w = torch.nn.Parameter(torch.tensor(c["W"], dtype=torch.float32))
    b = torch.nn.Parameter(torch.tensor(c["B"], dtype=torch.float32))
    opt = torch.optim.Adam([{"params": [w]}, {"params": [b], "weight_decay": 0.0}], lr=c["LR"], betas=(c["Beta1"], c["Beta2"]),
        eps=c["Eps"], weight_decay=c["WeightDecay"])
    for gw, gb in zip(c["GW"], c["GB"]):
        w.grad = torch.tensor(gw, dtype=torch.float32)
        b.grad = torch.tensor(gb, dtype=torch.float32)
        opt.step()
    out[name] = {k: [p.detach().tolist(), opt.state[p]["exp_avg"].tolist(), opt.state[p]["exp_avg_sq"].tolist()] for k, p in (("W", w), ("B", b))}
print(json.dumps(out))
`
	var want map[string]map[string][][]float64
	runTorch(t, py, script, in, &want)
	dev, ops, s := optimDevice(t)
	for name, o := range cases {
		pc := in[name]
		w, b := optimSteps(t, dev, ops, s, o, o.LR, pc.W, pc.B, pc.GW, pc.GB)
		for pname, p := range map[string]*testParam{"W": w, "B": b} {
			for j, v := range append([]kernels.F32{p.W}, p.state...) {
				tol := []float64{1e-6, 1e-6, 2e-5}[j]
				if e := relErr(download(t, s, v), want[name][pname][j]); !(e <= tol) {
					t.Errorf("%s: %s tensor %d (weights, exp_avg, exp_avg_sq): relative error %g against torch; want <= %g", name, pname, j, e, tol)
				}
			}
		}
	}
}

// runTorch runs the Python script with in as JSON on its stdin and decodes its stdout into out.
func runTorch(t *testing.T, py, script string, in, out any) {
	t.Helper()
	inb, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(inb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch: %v: %s", err, stderr.Bytes())
	}
	if err := json.Unmarshal(outb, out); err != nil {
		t.Fatal(err)
	}
}

// optimDevice opens the CPU device, its ops and a stream for an optimizer's steps.
func optimDevice(t *testing.T) (gpu.Device, kernels.Ops, gpu.Stream) {
	t.Helper()
	dev := openCPU(t)
	ops, err := kernels.For(dev)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return dev, ops, s
}

// normalVec is k normal values times scale.
func normalVec(r *rand.Rand, k int, scale float32) []float32 {
	v := make([]float32, k)
	for i := range v {
		v[i] = scale * float32(r.NormFloat64())
	}
	return v
}

// optimSteps makes a weight (decayed) and a bias (not) with their optimizer state on dev and takes
// o's steps with their gradients gw and gb at rate lr; it returns both.
func optimSteps(t *testing.T, dev gpu.Device, ops kernels.Ops, s gpu.Stream, o Optimizer, lr float64, w, b []float32, gw, gb [][]float32) (*testParam, *testParam) {
	t.Helper()
	pw, pb := newTestParam(t, dev, s, kindWeight, w), newTestParam(t, dev, s, kindBias, b)
	for _, p := range []*testParam{pw, pb} {
		for range o.Slots() {
			p.state = append(p.state, deviceF32(t, dev, s, make([]float32, p.W.Len)))
		}
	}
	for step := range gw {
		for _, x := range []struct {
			p *testParam
			g []float32
		}{{pw, gw[step]}, {pb, gb[step]}} {
			put(t, s, x.p.G, x.g)
			if err := o.Update(ops, s, &x.p.Param, x.p.state, lr, step+1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pw, pb
}
