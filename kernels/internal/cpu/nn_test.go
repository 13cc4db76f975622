package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bn64 is the training-mode batch norm in float64: per channel over N and HW, biased variance.
func bn64(x, gamma, beta []float64, g BNGeom, eps float64) (y, mean, variance []float64) {
	y = make([]float64, len(x))
	mean, variance = make([]float64, g.C), make([]float64, g.C)
	m := float64(g.N * g.HW)
	for c := range g.C {
		for n := range g.N {
			for i := range g.HW {
				mean[c] += x[(n*g.C+c)*g.HW+i] / m
			}
		}
		for n := range g.N {
			for i := range g.HW {
				d := x[(n*g.C+c)*g.HW+i] - mean[c]
				variance[c] += d * d / m
			}
		}
		for n := range g.N {
			for i := range g.HW {
				k := (n*g.C+c)*g.HW + i
				y[k] = (x[k]-mean[c])/math.Sqrt(variance[c]+eps)*gamma[c] + beta[c]
			}
		}
	}
	return y, mean, variance
}

func TestBatchNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const eps, mom = 1e-5, 0.1
	for _, g := range []BNGeom{{N: 3, C: 4, HW: 5}, {N: 7, C: 3, HW: 1}, {N: 2, C: 17, HW: 36}} {
		x, gamma, beta := randVec(r, g.N*g.C*g.HW), randVec(r, g.C), randVec(r, g.C)
		for i := range x {
			x[i] = 2*x[i] + 0.5 // mean and variance away from 0 and 1
		}
		runMean, runVar := randVec(r, g.C), make([]float32, g.C)
		for i := range runVar {
			runVar[i] = 1 + float32(i)
		}
		rm0, rv0 := append([]float32(nil), runMean...), append([]float32(nil), runVar...)
		y, sm, si := make([]float32, len(x)), make([]float32, g.C), make([]float32, g.C)
		BatchNormTrain(y, x, gamma, beta, runMean, runVar, sm, si, g, mom, eps)
		wy, wm, wv := bn64(to64(x), to64(gamma), to64(beta), g, eps)
		closeTo(t, "y", y, wy, 1e-5)
		closeTo(t, "saved mean", sm, wm, 1e-6)
		m := float64(g.N * g.HW)
		wantRM, wantRV, wantInv := make([]float64, g.C), make([]float64, g.C), make([]float64, g.C)
		for c := range g.C {
			wantRM[c] = (1-mom)*float64(rm0[c]) + mom*wm[c]
			wantRV[c] = (1-mom)*float64(rv0[c]) + mom*wv[c]*m/(m-1)
			wantInv[c] = 1 / math.Sqrt(wv[c]+eps)
		}
		closeTo(t, "saved inverse std", si, wantInv, 1e-5)
		closeTo(t, "running mean", runMean, wantRM, 1e-6)
		closeTo(t, "running var", runVar, wantRV, 1e-5)

		// Gradients of L = <y, dy> against central differences of the reference.
		dy := randVec(r, len(x))
		dx, dgamma, dbeta := make([]float32, len(x)), make([]float32, g.C), make([]float32, g.C)
		BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, sm, si, g)
		loss := func(x, gamma, beta []float64) float64 {
			y, _, _ := bn64(x, gamma, beta, g, eps)
			return dot64(y, to64(dy))
		}
		closeTo(t, "dx", dx, numGrad(to64(x), func(v []float64) float64 { return loss(v, to64(gamma), to64(beta)) }), 2e-4)
		closeTo(t, "dgamma", dgamma, numGrad(to64(gamma), func(v []float64) float64 { return loss(to64(x), v, to64(beta)) }), 1e-4)
		closeTo(t, "dbeta", dbeta, numGrad(to64(beta), func(v []float64) float64 { return loss(to64(x), to64(gamma), v) }), 1e-4)
		dgamma2, dbeta2 := make([]float32, g.C), make([]float32, g.C)
		BatchNormBackward(nil, dgamma2, dbeta2, dy, x, gamma, sm, si, g)
		closeTo(t, "dgamma without dx", dgamma2, to64(dgamma), 0)

		// Evaluation uses the running statistics.
		ye := make([]float32, len(x))
		BatchNormEval(ye, x, gamma, beta, runMean, runVar, g, eps)
		want := make([]float64, len(x))
		for n := range g.N {
			for c := range g.C {
				for i := range g.HW {
					k := (n*g.C+c)*g.HW + i
					want[k] = (float64(x[k])-float64(runMean[c]))/math.Sqrt(float64(runVar[c])+eps)*float64(gamma[c]) + float64(beta[c])
				}
			}
		}
		closeTo(t, "eval y", ye, want, 1e-5)
	}
}

func TestAddAndGlobalAvgPool(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	x, y := randVec(r, 100), randVec(r, 100)
	z := make([]float32, 100)
	Add(z, x, y)
	for i := range z {
		if z[i] != x[i]+y[i] {
			t.Fatalf("Add z[%d] = %v; want %v", i, z[i], x[i]+y[i])
		}
	}
	const rows, inner = 6, 49
	in := randVec(r, rows*inner)
	out := make([]float32, rows)
	GlobalAvgPool(out, in, inner)
	gap := func(v []float64) []float64 {
		o := make([]float64, rows)
		for i := range rows {
			for j := range inner {
				o[i] += v[i*inner+j] / inner
			}
		}
		return o
	}
	closeTo(t, "GlobalAvgPool", out, gap(to64(in)), 1e-6)
	dy := randVec(r, rows)
	dx := make([]float32, rows*inner)
	GlobalAvgPoolBackward(dx, dy, inner)
	closeTo(t, "dx", dx, numGrad(to64(in), func(v []float64) float64 { return dot64(gap(v), to64(dy)) }), 1e-5)
}

// ceSmooth64 is the mean cross-entropy against (1-eps)*onehot + eps/classes.
func ceSmooth64(logits []float64, labels []int32, n, classes int, eps float64) float64 {
	var loss float64
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - mx)
		}
		lse := math.Log(s) + mx
		for j, v := range row {
			q := eps / float64(classes)
			if j == int(labels[i]) {
				q += 1 - eps
			}
			loss -= q * (v - lse)
		}
	}
	return loss / float64(n)
}

func TestSoftmaxCrossEntropySmoothed(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const n, classes, eps = 5, 7, 0.1
	logits := randVec(r, n*classes)
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(r.IntN(classes))
	}
	d := make([]float32, len(logits))
	loss, bad := SoftmaxCrossEntropy(d, logits, labels, n, classes, eps)
	if bad != -1 {
		t.Fatalf("bad = %d", bad)
	}
	want := ceSmooth64(to64(logits), labels, n, classes, eps)
	if math.Abs(loss-want) > 1e-6*(1+want) {
		t.Fatalf("loss = %v; want %v", loss, want)
	}
	closeTo(t, "dlogits", d, numGrad(to64(logits), func(v []float64) float64 { return ceSmooth64(v, labels, n, classes, eps) }), 1e-4)
}

// TestSums checks the 16-way float64 sums (AVX2 on whole blocks of 16) against plain
// index-order sums, and against the same partial sums computed in Go bit for bit, on lengths
// around the blocks, split over runs as BatchNorm adds them.
func TestSums(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{1, 2, 3, 4, 15, 16, 17, 33, 196, 256} {
		x, y := randVec(r, n), randVec(r, n)
		var s, sq, p, gs, gsq, gp sums
		var ws, wsq, wp float64
		const mean, inv = 0.25, 1.5
		for _, part := range [][2]int{{0, n / 2}, {n / 2, n}} {
			xs, ys := x[part[0]:part[1]], y[part[0]:part[1]]
			s.add(xs)
			sq.addSquares(xs, mean)
			p.addProducts(ys, xs, mean, inv)
			for i := range xs { // the definition, in Go
				gs[i&15] += float64(xs[i])
				d := float64(xs[i]) - mean
				gsq[i&15] += float64(d * d)
				gp[i&15] += float64(float64(ys[i]) * float64(float32((xs[i]-mean)*inv)))
			}
		}
		for i, v := range x {
			ws += float64(v)
			wsq += (float64(v) - mean) * (float64(v) - mean)
			wp += float64(y[i]) * float64((v-mean)*inv)
		}
		for _, c := range []struct {
			name     string
			got, def sums
			want     float64
		}{{"add", s, gs, ws}, {"addSquares", sq, gsq, wsq}, {"addProducts", p, gp, wp}} {
			if c.got != c.def {
				t.Errorf("n=%d %s: partial sums %v; want %v", n, c.name, c.got, c.def)
			}
			if got := c.got.total(); math.Abs(got-c.want) > 1e-12*(1+math.Abs(c.want)) {
				t.Errorf("n=%d %s = %v; want %v", n, c.name, got, c.want)
			}
		}
	}
}

// TestBNElementwise holds scaleShift and bnDx (AVX2 on blocks of 16) to their definitions, each
// operation rounded in order, bit for bit, on lengths around the blocks.
func TestBNElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	const a, b, k, bmean, mean, inv, bx = 1.25, -0.3, 0.7, 0.01, 0.2, 1.9, -0.05
	for _, n := range []int{1, 15, 16, 17, 40, 256} {
		x, dy := randVec(r, n), randVec(r, n)
		y, dx := make([]float32, n), make([]float32, n)
		scaleShift(y, x, a, b)
		bnDx(dx, dy, x, k, bmean, mean, inv, bx)
		for i := range x {
			if want := float32(x[i]*a) + b; math.Float32bits(y[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d scaleShift[%d] = %v; want %v", n, i, y[i], want)
			}
			xhat := float32((x[i] - mean) * inv)
			if want := k * (dy[i] - bmean - float32(xhat*bx)); math.Float32bits(dx[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d bnDx[%d] = %v; want %v", n, i, dx[i], want)
			}
		}
	}
}
