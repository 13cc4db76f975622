package nn_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

// TestScaledDotProductAttention: the fused op gives the composed ops' output (MatMul, Softmax,
// MatMul), and a bad call names the op and the shapes and wraps ErrShape.
func TestScaledDotProductAttention(t *testing.T) {
	e := newEnv(t)
	r := rand.New(rand.NewPCG(5, 6))
	randT := func(g *nn.Graph, shape ...int) *nn.Tensor {
		v := make([]float32, prod(shape))
		for i := range v {
			v[i] = float32(2 * r.NormFloat64())
		}
		return g.Constant(v, shape...)
	}
	g := e.graph(false)
	q, k, v := randT(g, 2, 3, 70, 16), randT(g, 2, 3, 150, 16), randT(g, 2, 3, 150, 16)
	const scale = 0.25
	fused := nn.ScaledDotProductAttention(q, k, v, scale)
	composed := nn.MatMul(nn.Softmax(nn.MatMul(nn.Scale(q, scale), nn.Transpose(k, 2, 3))), v)
	got, err := fused.Host(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := composed.Host(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("fused attention [%d] = %v; composed %v", i, got[i], want[i])
		}
	}
	for _, tc := range []struct {
		name    string
		q, k, v []int
	}{
		{"key and value differ", []int{2, 5, 4}, []int{2, 7, 4}, []int{2, 6, 4}},
		{"query's feature count", []int{2, 5, 3}, []int{2, 7, 4}, []int{2, 7, 4}},
		{"batch dimensions", []int{3, 5, 4}, []int{2, 7, 4}, []int{2, 7, 4}},
		{"rank 1", []int{4}, []int{4}, []int{4}},
		{"no key", []int{2, 5, 4}, []int{2, 0, 4}, []int{2, 0, 4}},
	} {
		g := e.graph(false)
		nn.ScaledDotProductAttention(randT(g, tc.q...), randT(g, tc.k...), randT(g, tc.v...), 1)
		err := g.Err()
		if err == nil || !strings.Contains(err.Error(), "scaled dot-product attention of query") {
			t.Errorf("%s: error %v; want one naming the op and shapes", tc.name, err)
		} else if tc.name != "no key" && !errors.Is(err, nn.ErrShape) {
			t.Errorf("%s: %v; want ErrShape", tc.name, err)
		}
	}
}
