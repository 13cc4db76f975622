package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// attn64 is scaled dot-product attention and its backward pass in float64, the whole score
// matrix at once: y, lse, and dq, dk, dv for the output gradient dy.
func attn64(q, k, v, dy []float64, g AttnGeom) (y, lse, dq, dk, dv []float64) {
	d, sc := g.D, float64(g.Scale)
	y, lse = make([]float64, g.Batch*g.LQ*d), make([]float64, g.Batch*g.LQ)
	dq, dk, dv = make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	p, dp := make([]float64, g.LK), make([]float64, g.LK)
	for b := range g.Batch {
		for i := range g.LQ {
			qi, yi, dyi := q[(b*g.LQ+i)*d:][:d], y[(b*g.LQ+i)*d:][:d], dy[(b*g.LQ+i)*d:][:d]
			mx := math.Inf(-1)
			for j := range g.LK {
				p[j] = sc * dot64(qi, k[(b*g.LK+j)*d:][:d])
				mx = max(mx, p[j])
			}
			var sum float64
			for j := range p {
				p[j] = math.Exp(p[j] - mx)
				sum += p[j]
			}
			lse[b*g.LQ+i] = mx + math.Log(sum)
			var delta float64
			for j := range p {
				p[j] /= sum
				for c := range d {
					yi[c] += p[j] * v[(b*g.LK+j)*d+c]
				}
			}
			for j := range p {
				dp[j] = dot64(dyi, v[(b*g.LK+j)*d:][:d])
				delta += p[j] * dp[j]
			}
			for j := range p {
				ds := p[j] * (dp[j] - delta) * sc
				for c := range d {
					kj := (b*g.LK+j)*d + c
					dq[(b*g.LQ+i)*d+c] += ds * k[kj]
					dk[kj] += ds * qi[c]
					dv[kj] += p[j] * dyi[c]
				}
			}
		}
	}
	return y, lse, dq, dk, dv
}

// TestAttention: the blocked forward and backward passes against the float64 reference, for
// shapes inside one block, across several query and key blocks with ragged last blocks, one key,
// and no query (dk and dv, which hold garbage, become 0).
func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, g := range []AttnGeom{
		{Batch: 2, LQ: 5, LK: 7, D: 3, Scale: 0.6},
		{Batch: 3, LQ: 130, LK: 300, D: 5, Scale: 0.45},
		{Batch: 1, LQ: 65, LK: 65, D: 64, Scale: 0.125},
		{Batch: 2, LQ: 3, LK: 1, D: 4, Scale: 2},
		{Batch: 2, LQ: 0, LK: 3, D: 2, Scale: 1},
	} {
		q, k, v, dy := randVec(r, g.Batch*g.LQ*g.D), randVec(r, g.Batch*g.LK*g.D), randVec(r, g.Batch*g.LK*g.D), randVec(r, g.Batch*g.LQ*g.D)
		wy, wlse, wdq, wdk, wdv := attn64(to64(q), to64(k), to64(v), to64(dy), g)
		y, lse := make([]float32, len(q)), make([]float32, g.Batch*g.LQ)
		Attention(y, lse, q, k, v, g)
		closeTo(t, "y", y, wy, 1e-5)
		closeTo(t, "lse", lse, wlse, 1e-5)
		dq, dk, dv := make([]float32, len(q)), randVec(r, len(k)), randVec(r, len(v))
		AttentionBackward(dq, dk, dv, dy, q, k, v, y, lse, g)
		closeTo(t, "dq", dq, wdq, 1e-4)
		closeTo(t, "dk", dk, wdk, 1e-4)
		closeTo(t, "dv", dv, wdv, 1e-4)
	}
}

// TestAttentionSameBitsAnyCores: the blocks and sums do not depend on the number of goroutines.
func TestAttentionSameBitsAnyCores(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	g := AttnGeom{Batch: 24, LQ: 97, LK: 140, D: 16, Scale: 0.25}
	q, k, v, dy := randVec(r, g.Batch*g.LQ*g.D), randVec(r, g.Batch*g.LK*g.D), randVec(r, g.Batch*g.LK*g.D), randVec(r, g.Batch*g.LQ*g.D)
	run := func(procs int) [][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		y, lse := make([]float32, len(q)), make([]float32, g.Batch*g.LQ)
		Attention(y, lse, q, k, v, g)
		dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
		AttentionBackward(dq, dk, dv, dy, q, k, v, y, lse, g)
		return [][]float32{y, lse, dq, dk, dv}
	}
	one, four := run(1), run(4)
	for i := range one {
		if !slices.Equal(one[i], four[i]) {
			t.Fatalf("output %d differs between 1 and 4 goroutines", i)
		}
	}
}

// TestExpShift: each value is expf's, bit for bit (the assembly's blocks of 8 and the Go loop's
// rest), and the sum is the lanes' then the rest's, as the doc says.
func TestExpShift(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	for _, n := range []int{0, 5, 8, 37, 128} {
		row := randVec(r, n)
		for i := range row {
			row[i] *= 30
		}
		if n > 3 {
			row[1], row[2], row[3] = float32(math.Inf(-1)), -200, float32(math.NaN())
		}
		const shift = 1.5
		got := slices.Clone(row)
		sum := expShift(got, shift)
		var lanes [8]float32
		k := n &^ 7
		var want float32
		for i, x := range row {
			e := expf(x - shift)
			if math.Float32bits(got[i]) != math.Float32bits(e) && !(got[i] != got[i] && e != e) { // NaN: any payload
				t.Fatalf("n %d: expShift [%d] = %v; want expf's %v", n, i, got[i], e)
			}
			if i < k {
				lanes[i%8] += e
			}
		}
		want = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]))
		for _, e := range got[k:] {
			want += e
		}
		if math.Float32bits(sum) != math.Float32bits(want) && !(sum != sum && want != want) {
			t.Fatalf("n %d: sum %v; want %v", n, sum, want)
		}
	}
}

// TestExpf: within 2 ulp of math.Exp over the range the softmax uses, 0 and +Inf past it.
func TestExpf(t *testing.T) {
	for x := float32(-87); x <= 88; x += 0.0137 {
		want := math.Exp(float64(x))
		if got := float64(expf(x)); math.Abs(got-want) > 2.5e-7*want {
			t.Fatalf("expf(%v) = %v; want %v", x, got, want)
		}
	}
	inf := float32(math.Inf(1))
	if expf(-inf) != 0 || expf(-100) != 0 || expf(inf) != inf || expf(0) != 1 {
		t.Fatalf("expf(-Inf, -100, +Inf, 0) = %v, %v, %v, %v; want 0, 0, +Inf, 1", expf(-inf), expf(-100), expf(inf), expf(0))
	}
	if nan := float32(math.NaN()); expf(nan) == expf(nan) {
		t.Fatal("expf(NaN) is not NaN")
	}
}

// BenchmarkAttention: the forward and backward passes of a small ViT's attention (models'
// vit_p4: batch 64, 4 heads, 50 tokens, head dimension 16).
func BenchmarkAttention(b *testing.B) {
	g := AttnGeom{Batch: 256, LQ: 50, LK: 50, D: 16, Scale: 0.25}
	r := rand.New(rand.NewPCG(1, 2))
	vals := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = r.Float32()*2 - 1
		}
		return x
	}
	n := g.Batch * g.LQ * g.D
	q, k, v, dy := vals(n), vals(n), vals(n), vals(n)
	y, lse, dq, dk, dv := make([]float32, n), make([]float32, g.Batch*g.LQ), make([]float32, n), make([]float32, n), make([]float32, n)
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			Attention(y, lse, q, k, v, g)
		}
	})
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			AttentionBackward(dq, dk, dv, dy, q, k, v, y, lse, g)
		}
	})
}

// TestRowMax: rowMax is the Go loop's maximum at every length around the SIMD blocks of 8, with
// the maximum in each position, and passes over NaN as x > mx does.
func TestRowMax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 40 {
		row := make([]float32, n)
		for i := range row {
			row[i] = r.Float32()*200 - 100
		}
		for pos := range n + 1 {
			x := slices.Clone(row)
			if pos < n {
				x[pos] = 1000
			}
			if n > 2 {
				x[(pos+1)%n] = float32(math.NaN())
			}
			want := float32(-50)
			for _, v := range x {
				if v > want {
					want = v
				}
			}
			if got := rowMax(x, -50); got != want {
				t.Fatalf("n %d, largest at %d: rowMax %v; the loop's %v", n, pos, got, want)
			}
		}
	}
}
