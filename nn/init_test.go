package nn_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

// TestDistFill: each distribution's values have its mean, spread and bounds; the zero Dist
// fills nothing.
func TestDistFill(t *testing.T) {
	const n = 100000
	for _, tc := range []struct {
		name     string
		d        nn.Dist
		std, lim float64 // the distribution's standard deviation and bound (0: none)
	}{
		{"Const(0.25)", nn.Const(0.25), 0, 0.25},
		{"Normal(0.02)", nn.Normal(0.02), 0.02, 0},
		// Truncated to ±2 at std 1: the standard deviation of a normal cut at two of them.
		{"TruncNormal(1)", nn.TruncNormal(1), 0.8796, 2},
		{"Uniform(0.3)", nn.Uniform(0.3), 0.3 / math.Sqrt(3), 0.3},
	} {
		v := make([]float32, n)
		if !tc.d.Fill(v, rand.New(rand.NewPCG(1, 2))) {
			t.Errorf("%s: Fill reports the zero Dist", tc.name)
			continue
		}
		var sum, sq, top float64
		for _, x := range v {
			sum += float64(x)
			sq += float64(x) * float64(x)
			top = max(top, math.Abs(float64(x)))
		}
		mean := sum / n
		std := math.Sqrt(sq/n - mean*mean)
		if tc.std == 0 {
			if std != 0 || mean != 0.25 {
				t.Errorf("%s: mean %g, std %g; want all 0.25", tc.name, mean, std)
			}
			continue
		}
		if math.Abs(mean) > 5*tc.std/math.Sqrt(n) || math.Abs(std/tc.std-1) > 0.01 {
			t.Errorf("%s: mean %g, std %g; want 0 and %g", tc.name, mean, std, tc.std)
		}
		if tc.lim > 0 && top > tc.lim {
			t.Errorf("%s: |x| up to %g; want at most %g", tc.name, top, tc.lim)
		}
	}
	v := []float32{7}
	if (nn.Dist{}).Fill(v, rand.New(rand.NewPCG(1, 2))) || v[0] != 7 {
		t.Errorf("the zero Dist filled %v", v)
	}
}

// TestApplySetDist: Apply visits a model and its modules, a module before those it holds, in
// StateDict's order; Bind starts a tensor with the distribution SetDist gave it, the others by
// their Init.
func TestApplySetDist(t *testing.T) {
	m := &resnet{Conv1: nn.NewConv2d(3, 4, 3, nn.ConvOptions{Padding: 1}, false), Layer1: []*basicBlock{block(4, 8, 2), block(8, 8, 1)},
		FC: nn.NewLinear(8, 5, true)}
	var order []string
	err := nn.Apply(m, func(x nn.Module) {
		switch l := x.(type) {
		case *resnet:
			order = append(order, "resnet")
		case *basicBlock:
			order = append(order, "block")
		case *nn.Conv2dLayer:
			order = append(order, "conv")
			l.Weight.SetDist(nn.Const(0.5))
		case *nn.LinearLayer:
			order = append(order, "linear")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "resnet conv block conv conv conv block conv conv linear"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("Apply visited %s; want %s", got, want)
	}
	m.FC.Bias.SetDist(nn.Const(-1))
	e := newEnv(t)
	if err := nn.Bind(m, e.a, e.s, 1); err != nil {
		t.Fatal(err)
	}
	g := e.graph(false)
	for _, tc := range []struct {
		name string
		p    *nn.Tensor
		want func(float32) bool
	}{
		{"conv1.weight", m.Conv1.Weight, func(v float32) bool { return v == 0.5 }},
		{"layer1.1.conv2.weight", m.Layer1[1].Conv2.Weight, func(v float32) bool { return v == 0.5 }},
		{"fc.bias", m.FC.Bias, func(v float32) bool { return v == -1 }},
		{"fc.weight (He uniform)", m.FC.Weight, func(v float32) bool { return v != 0 && math.Abs(float64(v)) <= math.Sqrt(6.0/8) }},
		{"layer1.0.bn1.weight (ones)", m.Layer1[0].BN1.Weight, func(v float32) bool { return v == 1 }},
	} {
		host, err := g.Input(tc.p.Data(), tc.p.Shape()...).Host(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range host {
			if !tc.want(v) {
				t.Errorf("%s: bound with %v", tc.name, host)
				break
			}
		}
	}
	if d := m.FC.Weight.Dist(); d != (nn.Dist{}) {
		t.Errorf("fc.weight's Dist %v; want none", d)
	}
}
