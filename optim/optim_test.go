package optim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
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
	pyoracle.Run(t, py, script, in, &want)
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

func newTestParam(t *testing.T, dev gpu.Device, s gpu.Stream, decay bool, w []float32) *testParam {
	t.Helper()
	return &testParam{Param: Param{W: deviceF32(t, dev, s, w), G: deviceF32(t, dev, s, make([]float32, len(w))), Decay: decay}}
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
	if err := s.CopyH2D(v.Buf, 4*v.Off, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(host))), 4*len(host))); err != nil {
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

// TestNew: the names stoke train and the recipes take give their optimizers with the
// settings stated once (PyTorch's AdamW defaults, torchvision's RMSprop recipe), a recipe's is
// New's at its scaled rate, and an unknown name is a configuration error.
func TestNew(t *testing.T) {
	for name, want := range map[string]Optimizer{
		"sgd":     SGD{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4},
		"adam":    Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4},
		"adamw":   AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4},
		"rmsprop": RMSprop{LR: 0.1, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9, WeightDecay: 1e-4},
	} {
		got, err := New(name, 0.1, 0.9, 1e-4)
		if err != nil || got != want {
			t.Errorf("New(%s) = %#v, %v; want %#v", name, got, err, want)
		}
		r := models.Recipe{Optimizer: name, LR: 0.05, LRBatch: 64, WeightDecay: 1e-4}
		if ro, err := ForRecipe(r, 128); err != nil || ro != got {
			t.Errorf("recipe %s: %#v, %v; want New's %#v", name, ro, err, got)
		}
	}
	if sgd, _ := New("sgd", 0.1, 0, 0); sgd.(SGD).Nesterov {
		t.Error("sgd without momentum is Nesterov")
	}
	if _, err := New("adagrad", 0.1, 0.9, 0); !errors.Is(err, ErrUnknown) {
		t.Errorf("New(adagrad) = %v; want ErrUnknown", err)
	}
}

// TestAdamTorch: Adam's and AdamW's steps match torch.optim.Adam's and torch.optim.AdamW's (run
// through $STOKE_PYTHON) within 5e-7 relative (a few float32 roundings; 1.5e-7 measured), weights
// and state (exp_avg, exp_avg_sq, and with AMSGrad max_exp_avg_sq), over six steps of given
// gradients: with torch's defaults, other betas and eps, a weight decay of the weight and not of
// the bias (a parameter group with weight_decay 0), Adam's added to the gradient (L2) and AdamW's
// decoupled, and AMSGrad over a gradient that shrinks fourfold each step, so that max_exp_avg_sq
// ends above exp_avg_sq everywhere and steers the last steps. The kernel takes the betas in
// float64 so that 1-β rounds to float32 as torch's: from float32 betas, 1-0.999 was 0.00099998713
// and 1-0.9 0.100000024, and exp_avg_sq was 1.3e-5 off torch's, exp_avg 3e-7.
func TestAdamTorch(t *testing.T) {
	py := pyoracle.Python(t, "torch")
	const n, nb, steps = 24, 5, 6
	cases := map[string]Optimizer{
		"adam defaults":              Adam{LR: 0.01},
		"adam betas":                 Adam{LR: 0.003, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6},
		"adam weight decay":          Adam{LR: 0.01, WeightDecay: 0.1},
		"adam amsgrad":               Adam{LR: 0.01, WeightDecay: 1e-4, AMSGrad: true},
		"adam amsgrad betas":         Adam{LR: 0.003, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, AMSGrad: true},
		"adamw defaults":             AdamW{LR: 0.01},
		"adamw weight decay":         AdamW{LR: 0.01, WeightDecay: 0.1},
		"adamw amsgrad":              AdamW{LR: 0.01, AMSGrad: true},
		"adamw amsgrad weight decay": AdamW{LR: 0.003, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.05, AMSGrad: true},
	}
	r := rand.New(rand.NewPCG(9, 10))
	vec := func(k int, scale float32) []float32 { return normalVec(r, k, scale) }
	type pcase struct {
		Torch                              string // the torch.optim class
		LR, Beta1, Beta2, Eps, WeightDecay float64
		AMSGrad                            bool
		W, B                               []float32
		GW, GB                             [][]float32
	}
	in := map[string]pcase{}
	for _, name := range slices.Sorted(maps.Keys(cases)) { // the same draws every run
		o := cases[name]
		c := pcase{W: vec(n, 1), B: vec(nb, 0.1)}
		switch o := o.(type) {
		case Adam:
			a := o.adamW()
			c.Torch, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, c.AMSGrad = "Adam", o.LR, a.Beta1, a.Beta2, a.Eps, o.WeightDecay, o.AMSGrad
		case AdamW:
			a := o.withDefaults()
			c.Torch, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, c.AMSGrad = "AdamW", a.LR, a.Beta1, a.Beta2, a.Eps, a.WeightDecay, a.AMSGrad
		}
		gw, gb := vec(n, 0.5), vec(nb, 0.05)
		for range steps {
			if c.AMSGrad { // the same gradient, a quarter of the last step's
				c.GW, c.GB = append(c.GW, gw), append(c.GB, gb)
				gw, gb = scaled(gw, 0.25), scaled(gb, 0.25)
			} else {
				c.GW, c.GB = append(c.GW, vec(n, 0.5)), append(c.GB, vec(nb, 0.05))
			}
		}
		in[name] = c
	}
	script := `
import json, sys, torch
out = {}
for name, c in json.load(sys.stdin).items():
    w = torch.nn.Parameter(torch.tensor(c["W"], dtype=torch.float32))
    b = torch.nn.Parameter(torch.tensor(c["B"], dtype=torch.float32))
    opt = getattr(torch.optim, c["Torch"])([{"params": [w]}, {"params": [b], "weight_decay": 0.0}], lr=c["LR"],
        betas=(c["Beta1"], c["Beta2"]), eps=c["Eps"], weight_decay=c["WeightDecay"], amsgrad=c["AMSGrad"])
    for gw, gb in zip(c["GW"], c["GB"]):
        w.grad = torch.tensor(gw, dtype=torch.float32)
        b.grad = torch.tensor(gb, dtype=torch.float32)
        opt.step()
    keys = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if c["AMSGrad"] else [])
    out[name] = {k: [p.detach().tolist()] + [opt.state[p][s].tolist() for s in keys] for k, p in (("W", w), ("B", b))}
print(json.dumps(out))
`
	var want map[string]map[string][][]float64
	pyoracle.Run(t, py, script, in, &want)
	dev, ops, s := optimDevice(t)
	for name, o := range cases {
		pc := in[name]
		w, b := optimSteps(t, dev, ops, s, o, pc.LR, pc.W, pc.B, pc.GW, pc.GB)
		for pname, p := range map[string]*testParam{"W": w, "B": b} {
			got := append([]kernels.F32{p.W}, p.state...)
			if len(got) != len(want[name][pname]) {
				t.Fatalf("%s: %s: %d tensors of weights and state; torch has %d", name, pname, len(got), len(want[name][pname]))
			}
			for j, v := range got {
				if e := relErr(download(t, s, v), want[name][pname][j]); !(e <= 5e-7) {
					t.Errorf("%s: %s tensor %d (weights, exp_avg, exp_avg_sq, max_exp_avg_sq): relative error %g against torch; want <= 5e-7",
						name, pname, j, e)
				}
			}
			if pc.AMSGrad {
				above, v, vmax := 0, want[name][pname][2], want[name][pname][3]
				for i := range v {
					if vmax[i] > 1.001*v[i] {
						above++
					}
				}
				if above < len(v) {
					t.Errorf("%s: %s: torch's max_exp_avg_sq is above exp_avg_sq in %d of %d values; the gradients should exercise AMSGrad in all",
						name, pname, above, len(v))
				}
			}
		}
	}
}

// optimDevice opens the CPU device, its ops and a stream for an optimizer's steps.
func optimDevice(t *testing.T) (gpu.Device, kernels.Ops, gpu.Stream) {
	t.Helper()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
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

// scaled is v times a, a new slice.
func scaled(v []float32, a float32) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = a * x
	}
	return o
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
	pw, pb := newTestParam(t, dev, s, true, w), newTestParam(t, dev, s, false, b)
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
			if err := o.Update(ops, s, x.p.Param, x.p.state, lr, step+1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pw, pb
}

// TestState: a State steps every parameter at its group's rate (SGD: w -= lr·factor·g), keeps
// each parameter's momentum in its own zeroed slot, counts none for an optimizer without state,
// and names the parameter whose update fails.
func TestState(t *testing.T) {
	dev, ops, s := optimDevice(t)
	alloc := func(n int) (kernels.F32, error) { return deviceF32(t, dev, s, make([]float32, n)), nil }
	w1, w2 := deviceF32(t, dev, s, []float32{1, 2}), deviceF32(t, dev, s, []float32{3})
	g1, g2 := deviceF32(t, dev, s, []float32{1, -1}), deviceF32(t, dev, s, []float32{2})
	params := []Param{{Name: "a", W: w1, G: g1}, {Name: "b", W: w2, G: g2}}
	st, err := NewState(SGD{LR: 1, Momentum: 0.5}, ops, s, params, []float64{1, 0.25}, alloc)
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 2; step++ {
		if err := st.Step(ops, s, 0.1, step); err != nil {
			t.Fatal(err)
		}
	}
	// Two steps of momentum 0.5: v1 = g, v2 = 1.5g; w -= lr·factor·(v1 + v2) = 2.5·lr·factor·g.
	if got, want := download(t, s, w1), []float32{1 - 0.25, 2 + 0.25}; !slices.Equal(got, want) {
		t.Errorf("a: %v; want %v", got, want)
	}
	if got, want := download(t, s, w2), []float32{3 - 0.125}; !slices.Equal(got, want) {
		t.Errorf("b at a quarter of the rate: %v; want %v", got, want)
	}
	if st.Factor(1) != 0.25 {
		t.Errorf("b's factor %g; want 0.25", st.Factor(1))
	}
	if v := st.Slots(1); len(v) != 1 || !slices.Equal(download(t, s, v[0]), []float32{3}) {
		t.Errorf("b's momentum: %d slots; want one holding 1.5·2", len(v))
	}
	if plain, err := NewState(SGD{LR: 1}, ops, s, params, nil, alloc); err != nil || len(plain.Slots(0)) != 0 {
		t.Errorf("SGD without momentum: %v, %d slots; want none", err, len(plain.Slots(0)))
	}
	bad := []Param{{Name: "short", W: w1, G: g2}}
	if st, err := NewState(SGD{LR: 1}, ops, s, bad, nil, alloc); err != nil {
		t.Fatal(err)
	} else if err := st.Step(ops, s, 0.1, 1); err == nil || !strings.Contains(err.Error(), "short") {
		t.Errorf("a gradient shorter than its weights: %v; want an error naming the parameter", err)
	}
}

// TestParams: a bound module's trained tensors in state_dict order, the weights decayed and the
// bias not; a frozen tensor (bound without gradient memory) left out.
func TestParams(t *testing.T) {
	dev, _, s := optimDevice(t)
	mem := nn.NewArena(dev)
	t.Cleanup(func() { mem.Free() })
	m := nn.Sequential{nn.NewLinear(3, 2, true), nn.NewLinear(2, 1, true)}
	if err := nn.Bind(m, mem, s, 1); err != nil {
		t.Fatal(err)
	}
	frozen := m[1].(*nn.LinearLayer).Bias
	if err := frozen.Bind(frozen.Data(), kernels.F32{}); err != nil { // no gradient memory: frozen
		t.Fatal(err)
	}
	ps, err := Params(m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s %d %v", p.Name, p.W.Len, p.Decay))
	}
	if want := []string{"0.weight 6 true", "0.bias 2 false", "1.weight 2 true"}; !slices.Equal(got, want) {
		t.Errorf("Params = %q; want %q", got, want)
	}
}
