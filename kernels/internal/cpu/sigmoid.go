package cpu

// sigmoidParts returns s = σ(x) = 1/(1 + e^-x) and t = 1 - s = σ(-x), each one float32
// division of expf's e = e^-|x| (0 below -87.33, as PyTorch 2.x's float32 kernels flush
// there): for x >= 0, s = 1/(1+e) and t = e/(1+e); for x < 0 the two swap. So neither side
// loses its small values to 1 - s's cancellation: σ'(x) = s·t is accurate in both tails. NaN
// gives NaN; every operation is rounded as sigmoid_amd64.s rounds it (no fused multiply-add).
func sigmoidParts(x float32) (s, t float32) {
	e := expf(-max(x, -x))
	d := 1 + e
	if x < 0 {
		return e / d, 1 / d
	}
	return 1 / d, e / d
}

// sigmoid is y[i] = σ(x[i]); y may alias x.
func sigmoid(y, x []float32) {
	for i := sigmoidSIMD(y, x); i < len(x); i++ {
		y[i], _ = sigmoidParts(x[i])
	}
}

// sigmoidGrad is dx[i] = dy[i]·σ(x[i])·σ(-x[i]), sigmoid's derivative; dx may alias dy.
func sigmoidGrad(dx, dy, x []float32) {
	for i := sigmoidGradSIMD(dx, dy, x); i < len(x); i++ {
		s, t := sigmoidParts(x[i])
		dx[i] = dy[i] * (s * t)
	}
}

// silu is y[i] = x[i]·σ(x[i]); y may alias x.
func silu(y, x []float32) {
	for i := siluSIMD(y, x); i < len(x); i++ {
		s, _ := sigmoidParts(x[i])
		y[i] = x[i] * s
	}
}

// siluGrad is dx[i] = dy[i]·σ(x[i])·(1 + x[i]·σ(-x[i])), silu's derivative; dx may alias dy.
func siluGrad(dx, dy, x []float32) {
	for i := siluGradSIMD(dx, dy, x); i < len(x); i++ {
		s, t := sigmoidParts(x[i])
		dx[i] = dy[i] * (s * (1 + float32(x[i]*t)))
	}
}
