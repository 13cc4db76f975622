package cpu

// The polynomial S of normalCDF: Φ(-a) = t·S(t)·e^(-a²/2) for a >= 0, t = 1/(1 + a/4),
// S(t) = ((geluS0·t + geluS1)·t + …)·t + geluS9, a least-squares fit (reweighted towards
// minimax) of S's relative error over a in [0, 14], to 1e-8 before float32's rounding. At
// t = 0 (a → ∞) S is 1/(4√(2π)); at t = 1 (a = 0), 1/2.
const (
	geluS0 = 0.01658014953136444
	geluS1 = -0.06279485672712326
	geluS2 = 0.05165864899754524
	geluS3 = 0.028427530080080032
	geluS4 = 0.01271863840520382
	geluS5 = 0.08665331453084946
	geluS6 = 0.07200063019990921
	geluS7 = 0.09551546722650528
	geluS8 = 0.09949258714914322
	geluS9 = 0.0997479036450386
)

// normalCDF returns Φ(x), the standard normal distribution function, and e = e^(-x²/2), both
// in float32 within 4e-7·(1+x²) relative (x²/2 rounded to float32 before expf; Φ(-a) by one
// formula for every a >= 0, no cancellation in the lower tail, Φ(a) = 1 - Φ(-a)), where
// math.Erf in float64 took a quarter of a small ViT's training step. e is expf's, 0 where
// x²/2 > 87.33 (|x| > 13.2): Φ(x)·x is then 0 too. NaN gives NaN. Every
// product is rounded before the sum (no fused multiply-add), as exp_amd64.s computes it.
func normalCDF(x float32) (phi, e float32) {
	a := max(x, -x) // |x|; NaN stays NaN
	t := 1 / (1 + float32(0.25*a))
	s := float32(geluS0*t) + geluS1
	s = float32(s*t) + geluS2
	s = float32(s*t) + geluS3
	s = float32(s*t) + geluS4
	s = float32(s*t) + geluS5
	s = float32(s*t) + geluS6
	s = float32(s*t) + geluS7
	s = float32(s*t) + geluS8
	s = float32(s*t) + geluS9
	e = expf(float32(a*a) * -0.5)
	q := float32(t*s) * e
	if x < 0 {
		return q, e
	}
	return 1 - q, e
}

// gelu is y[i] = x[i]·Φ(x[i]) (PyTorch's gelu, approximate='none'), in float32 by normalCDF;
// y may alias x.
func gelu(y, x []float32) {
	for i := geluSIMD(y, x); i < len(x); i++ {
		phi, _ := normalCDF(x[i])
		y[i] = x[i] * phi
	}
}

// geluGrad is dx[i] = dy[i]·(Φ(x[i]) + x[i]·e^(-x[i]²/2)/√(2π)), gelu's derivative; dx may
// alias dy.
func geluGrad(dx, dy, x []float32) {
	for i := geluGradSIMD(dx, dy, x); i < len(x); i++ {
		phi, e := normalCDF(x[i])
		dx[i] = dy[i] * (phi + float32(x[i]*float32(e*invSqrt2Pi)))
	}
}
