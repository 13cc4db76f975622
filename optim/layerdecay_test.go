package optim

import "testing"

// TestLayerDecayScale: the learning-rate factor decay^n is rounded once, as timm's
// layer_decay ** n (Python 3.11 on glibc printed these; math.Pow misses each by 1 to 6 ulp).
func TestLayerDecayScale(t *testing.T) {
	for _, c := range []struct {
		decay float64
		n     int
		want  float64
	}{
		{0.9, 0, 1}, {0.8, 1, 0.8}, {0.9, 4, 0.6561}, {0.9, 13, 0.2541865828329001}, {0.9, 40, 0.014780882941434608},
		{0.8, 12, 0.06871947673600004}, {0.8, 13, 0.054975581388800036}, {0.8, 21, 0.009223372036854787},
		{0.8, 39, 0.00016615349947311485}, {0.75, 12, 0.03167635202407837}, {0.7, 11, 0.019773267429999988},
		{0.7, 29, 3.219905755813174e-05}, {0.65, 13, 0.003697205891018715}, {0.65, 32, 1.0309258098174845e-06},
		{0.8, -2, 1.5624999999999998},
	} {
		if got := powRounded(c.decay, c.n); got != c.want {
			t.Errorf("%g^%d = %v; want %v", c.decay, c.n, got, c.want)
		}
	}
}
