package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// problem is one multiply with its operands laid out as Sgemm receives them.
type problem struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
}

func (p problem) String() string {
	return fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d alpha=%g beta=%g lda=%d ldb=%d ldc=%d",
		p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.beta, p.lda, p.ldb, p.ldc)
}

// gap is written into the padding between rows so that tests can see it is never touched.
const gap = float32(-12345)

// newProblem fills A, B and C with random values in [-1, 1) and the padding with gap.
func newProblem(r *rand.Rand, transA, transB bool, m, n, k, pad int, alpha, beta float32) problem {
	p := problem{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	mat := func(rows, cols int) ([]float32, int) {
		ld := max(1, cols+pad)
		s := make([]float32, max(0, (rows-1)*ld+cols))
		for i := range s {
			if i%ld < cols {
				s[i] = r.Float32()*2 - 1
			} else {
				s[i] = gap
			}
		}
		return s, ld
	}
	if transA {
		p.a, p.lda = mat(k, m)
	} else {
		p.a, p.lda = mat(m, k)
	}
	if transB {
		p.b, p.ldb = mat(n, k)
	} else {
		p.b, p.ldb = mat(k, n)
	}
	p.c, p.ldc = mat(m, n)
	return p
}

func (p problem) at(x []float32, ld int, trans bool, i, j int) float64 {
	if trans {
		i, j = j, i
	}
	return float64(x[i*ld+j])
}

// reference returns the float64 result and, per element, the error a float32 computation may make.
func (p problem) reference() (want, tol []float64) {
	// op(A) by rows and op(B) by columns, as float64, so that each element is one dot product.
	opA := make([]float64, p.m*p.k)
	opBT := make([]float64, p.n*p.k)
	for l := range p.k {
		for i := range p.m {
			opA[i*p.k+l] = p.at(p.a, p.lda, p.transA, i, l)
		}
		for j := range p.n {
			opBT[j*p.k+l] = p.at(p.b, p.ldb, p.transB, l, j)
		}
	}
	want = make([]float64, p.m*p.n)
	tol = make([]float64, p.m*p.n)
	// Rounding error bound of a k-term float32 dot product, scaling and update, with margin.
	u := float64(p.k+4) * 2 * 0x1p-24
	for i := range p.m {
		ai := opA[i*p.k : (i+1)*p.k]
		for j := range p.n {
			bj := opBT[j*p.k : (j+1)*p.k]
			var s, abs float64
			for l, x := range ai {
				x *= bj[l]
				s += x
				abs += math.Abs(x)
			}
			w := float64(p.alpha) * s
			bound := math.Abs(float64(p.alpha)) * abs
			if p.beta != 0 {
				cv := float64(p.beta) * float64(p.c[i*p.ldc+j])
				w += cv
				bound += math.Abs(cv)
			}
			want[i*p.n+j] = w
			tol[i*p.n+j] = u*bound + 1e-30
		}
	}
	return want, tol
}

// verify compares got (the C after the multiply) with the reference and checks the padding.
func (p problem) verify(t *testing.T, label string, got []float32) {
	t.Helper()
	want, tol := p.reference()
	p.compare(t, label, got, want, tol)
}

// compare checks got against a reference computed once for several runs.
func (p problem) compare(t *testing.T, label string, got []float32, want, tol []float64) {
	t.Helper()
	bad := 0
	for i := range p.m {
		for j := range p.n {
			g := float64(got[i*p.ldc+j])
			w := want[i*p.n+j]
			if !(math.Abs(g-w) <= tol[i*p.n+j]) {
				if bad < 5 {
					t.Errorf("%s: %v: C[%d][%d] = %g; want %g (tolerance %g)", label, p, i, j, g, w, tol[i*p.n+j])
				}
				bad++
			}
		}
		for j := p.n; j < p.ldc && i*p.ldc+j < len(got); j++ {
			if got[i*p.ldc+j] != gap {
				t.Errorf("%s: %v: padding C[%d][%d] = %g; want it untouched (%g)", label, p, i, j, got[i*p.ldc+j], gap)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %v: %d wrong elements in all", label, p, bad)
	}
}

func (p problem) run(kern *kernel, threads int) []float32 {
	c := append([]float32(nil), p.c...)
	multiply(kern, p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, c, p.ldc, threads)
	return c
}

var shapes = []struct{ m, n, k int }{
	{1, 1, 1}, {1, 1, 7}, {1, 17, 3}, {13, 1, 5}, {2, 3, 4}, {5, 7, 9},
	{6, 16, 1}, {6, 16, 8}, {12, 32, 5}, {25, 65, 193}, {7, 17, 33}, {12, 32, 64}, {23, 29, 31},
	{64, 64, 64}, {65, 47, 400}, {200, 40, 20}, {37, 70, 520}, {130, 10, 256},
	{391, 19, 13}, {3, 4100, 5},
}

// TestKernels checks every kernel this CPU runs against the float64 reference on all shapes,
// transposes and paddings, serially and split over several goroutines.
func TestKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, kern := range supported {
		t.Run(kern.name, func(t *testing.T) {
			for _, s := range shapes {
				for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
					pad := r.IntN(3) * 3
					p := newProblem(r, tr[0], tr[1], s.m, s.n, s.k, pad, 1.5, -0.75)
					want, tol := p.reference()
					for _, threads := range []int{1, 3} {
						p.compare(t, fmt.Sprintf("%s threads=%d", kern.name, threads), p.run(kern, threads), want, tol)
					}
				}
			}
		})
	}
}

// TestAlphaBeta covers the scalar cases, including beta == 0 over a C full of NaN (which must be
// ignored) and alpha == 0 (A and B not read).
func TestAlphaBeta(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name        string
		alpha, beta float32
		nanC        bool
	}{
		{"alpha=1 beta=0", 1, 0, false},
		{"alpha=1 beta=1", 1, 1, false},
		{"alpha=-2 beta=0.5", -2, 0.5, false},
		{"alpha=0.25 beta=-1", 0.25, -1, false},
		{"beta=0 NaN C", 1.5, 0, true},
		{"beta=-0 NaN C", 1.5, float32(math.Copysign(0, -1)), true},
		{"alpha=0 beta=0.5", 0, 0.5, false},
		{"alpha=0 beta=0 NaN C", 0, 0, true},
		{"alpha=0 beta=1", 0, 1, false},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, kern := range supported {
		for _, tc := range tests {
			t.Run(kern.name+"/"+tc.name, func(t *testing.T) {
				for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {7, 19, 300}, {70, 90, 170}} {
					p := newProblem(r, false, true, s.m, s.n, s.k, 2, tc.alpha, tc.beta)
					if tc.nanC {
						for i := range p.c {
							if p.c[i] != gap {
								p.c[i] = nan
							}
						}
					}
					for _, threads := range []int{1, 2} {
						p.verify(t, fmt.Sprintf("threads=%d", threads), p.run(kern, threads))
					}
				}
			})
		}
	}
}

// TestSgemm goes through the exported entry point, which also handles k == 0 and alpha == 0.
func TestSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name           string
		transA, transB bool
		m, n, k        int
		alpha, beta    float32
	}{
		{"split NN", false, false, 130, 150, 70, 1, 0},
		{"split TN", true, false, 150, 130, 70, 1, 1},
		{"split NT", false, true, 70, 150, 130, -1, 0},
		{"split TT", true, true, 150, 70, 130, 0.5, 2},
		{"k=0 scales C", false, false, 5, 6, 0, 1, 3},
		{"k=0 beta=0", true, true, 5, 6, 0, 1, 0},
		{"m=0", false, false, 0, 6, 4, 1, 0},
		{"n=0", false, false, 6, 0, 4, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newProblem(r, tc.transA, tc.transB, tc.m, tc.n, tc.k, 1, tc.alpha, tc.beta)
			c := append([]float32(nil), p.c...)
			Sgemm(p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, c, p.ldc)
			p.verify(t, "Sgemm", c)
		})
	}
}

// TestDeterministic checks bit-for-bit equality across repeated runs and across partitions of C
// among any number of goroutines.
func TestDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, kern := range supported {
		for _, s := range []struct{ m, n, k int }{{128, 256, 300}, {300, 64, 200}, {97, 131, 515}} {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", kern.name, s.m, s.n, s.k), func(t *testing.T) {
				p := newProblem(r, false, false, s.m, s.n, s.k, 0, 1, 0.5)
				want := p.run(kern, 1)
				for _, threads := range []int{2, 3, 7, 2} {
					got := p.run(kern, threads)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("threads=%d: C[%d] = %x; want %x (one goroutine)", threads, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
						}
					}
				}
			})
		}
	}
}

// TestConcurrent runs Sgemm from several goroutines at once (sharing the helper goroutines and
// the cores) and checks each result bit for bit against a serial run.
func TestConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const callers = 4
	var ps [callers]problem
	var want [callers][]float32
	for i := range ps {
		ps[i] = newProblem(r, i%2 == 1, i/2 == 1, 100+7*i, 120, 150, 1, 1, 0.5)
		want[i] = ps[i].run(active, 1)
	}
	for round := range 3 {
		var got [callers][]float32
		var wg sync.WaitGroup
		for i := range ps {
			got[i] = append([]float32(nil), ps[i].c...)
			wg.Go(func() {
				p := ps[i]
				Sgemm(p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, got[i], p.ldc)
			})
		}
		wg.Wait()
		for i := range ps {
			for j := range got[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("round %d, caller %d: C[%d] = %g; want %g (serial run)", round, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
}

func TestForRows(t *testing.T) {
	wide := &kernel{name: "wide", mr: 12, narrow: &kernel{name: "narrow", mr: 8}}
	tests := []struct {
		m    int
		want string
	}{{1, "narrow"}, {12, "wide"}, {24, "wide"}, {32, "narrow"}, {64, "narrow"}, {128, "wide"}, {800, "wide"}}
	for _, tc := range tests {
		if got := wide.forRows(tc.m).name; got != tc.want {
			t.Errorf("forRows(%d) = %s; want %s", tc.m, got, tc.want)
		}
	}
	if got := wide.narrow.forRows(64); got != wide.narrow {
		t.Errorf("forRows on a kernel without a narrow variant = %s; want itself", got.name)
	}
}

// TestFMAKernelsAgree checks that the assembly kernels, which differ only in tile shape and all
// use FMA in the same order, give bit-identical results.
func TestFMAKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range []struct{ m, n, k int }{{64, 196, 800}, {37, 70, 520}, {128, 10, 256}} {
		p := newProblem(r, false, true, s.m, s.n, s.k, 1, 1.5, 0.5)
		var want []float32
		for _, kern := range supported {
			if kern == generic {
				continue
			}
			got := p.run(kern, 2)
			if want == nil {
				want = got
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%dx%dx%d: %s: C[%d] = %g; want %g (%s)", s.m, s.n, s.k, kern.name, i, got[i], want[i], supported[0].name)
				}
			}
		}
	}
}

// TestGrid checks that the partition of C covers every tile exactly once and uses no more
// goroutines than allowed.
func TestGrid(t *testing.T) {
	for _, kern := range supported {
		for _, tc := range []struct{ m, n, threads int }{{128, 512, 2}, {25088, 64, 2}, {5, 700, 8}, {784, 512, 7}, {1, 1, 4}} {
			pm, pn := grid(kern, tc.m, tc.n, tc.threads)
			if pm < 1 || pn < 1 || pm*pn > tc.threads {
				t.Errorf("grid(%s, %d, %d, %d) = %d, %d; want 1 <= pm*pn <= %d", kern.name, tc.m, tc.n, tc.threads, pm, pn, tc.threads)
				continue
			}
			for _, d := range []struct{ p, t, n int }{{pm, kern.mr, tc.m}, {pn, kern.nr, tc.n}} {
				next := 0
				for i := range d.p {
					lo, hi := split(i, d.p, tiles(d.n, d.t), d.t, d.n)
					if lo != next || hi < lo || (i < d.p-1 && hi%d.t != 0) {
						t.Errorf("split(%d, %d, tiles, %d, %d) = %d, %d; want a run starting at %d ending on a tile edge", i, d.p, d.t, d.n, lo, hi, next)
					}
					next = hi
				}
				if next != d.n {
					t.Errorf("splits of %d in %d runs end at %d; want %d", d.n, d.p, next, d.n)
				}
			}
		}
	}
}

func TestPanics(t *testing.T) {
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 12)
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"negative m", func() { Sgemm(false, false, -1, 2, 2, 1, a, 2, b, 2, 0, c, 2) }, "negative dimension"},
		{"small lda", func() { Sgemm(false, false, 3, 4, 3, 1, a, 2, b, 4, 0, c, 4) }, "lda=2"},
		{"small lda trans", func() { Sgemm(true, false, 3, 4, 3, 1, a, 2, b, 4, 0, c, 4) }, "lda=2"},
		{"small ldb", func() { Sgemm(false, false, 3, 4, 3, 1, a, 3, b, 3, 0, c, 4) }, "ldb=3"},
		{"small ldb trans", func() { Sgemm(false, true, 3, 4, 3, 1, a, 3, b, 2, 0, c, 4) }, "ldb=2"},
		{"small ldc", func() { Sgemm(false, false, 3, 4, 3, 1, a, 3, b, 4, 0, c, 3) }, "ldc=3"},
		{"short a", func() { Sgemm(false, false, 5, 2, 3, 1, a, 3, b, 2, 0, c, 2) }, "len(a)=12"},
		{"short b", func() { Sgemm(false, false, 1, 2, 7, 1, a, 7, b, 2, 0, c, 2) }, "len(b)=12"},
		{"short c", func() { Sgemm(false, false, 2, 6, 2, 1, a, 2, b, 6, 0, c, 7) }, "len(c)=12"},
		{"zero ld", func() { Sgemm(false, false, 0, 0, 0, 1, nil, 0, nil, 1, 0, nil, 1) }, "lda=0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, "gemm: ") || !strings.Contains(msg, tc.want) {
					t.Errorf("panic = %v; want a \"gemm: \" message containing %q", r, tc.want)
				}
			}()
			tc.call()
		})
	}
}

// TestNoAllocs checks that a warmed-up multiply, serial or split, allocates nothing.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	r := rand.New(rand.NewPCG(9, 10))
	p := newProblem(r, false, false, 96, 200, 300, 0, 1, 0)
	for _, threads := range []int{1, 2} {
		p.run(active, threads)
		c := append([]float32(nil), p.c...)
		allocs := testing.AllocsPerRun(20, func() {
			multiply(active, p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, c, p.ldc, threads)
		})
		if allocs != 0 {
			t.Errorf("multiply(threads=%d) allocates %v times per call; want 0", threads, allocs)
		}
	}
}

// FuzzSgemm compares every kernel with the reference on shapes and flags the fuzzer picks.
func FuzzSgemm(f *testing.F) {
	f.Add(uint8(7), uint8(17), uint8(33), uint8(0), uint64(1))
	f.Add(uint8(1), uint8(1), uint8(1), uint8(3), uint64(2))
	f.Add(uint8(64), uint8(10), uint8(200), uint8(5), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, flags uint8, seed uint64) {
		if m == 0 || n == 0 {
			return // nothing to compute; Sgemm returns before multiply
		}
		r := rand.New(rand.NewPCG(seed, 11))
		beta := []float32{0, 1, -0.5, 2}[flags>>2&3]
		p := newProblem(r, flags&1 != 0, flags&2 != 0, int(m), int(n), int(k), int(flags>>4&3), 0.5, beta)
		for _, kern := range supported {
			p.verify(t, kern.name, p.run(kern, 1+int(flags>>6)))
		}
	})
}

// sliceSource is a Source over a row-major matrix in a slice.
type sliceSource struct {
	b  []float32
	ld int
}

func (s sliceSource) Row(dst []float32, i, j0 int) { copy(dst, s.b[i*s.ld+j0:]) }

// TestSource checks that a multiply whose B comes from a Source gives the same bits as the one
// that reads B from the slice, for every kernel, transpose, shape and split.
func TestSource(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, kern := range supported {
		for _, s := range append(shapes, struct{ m, n, k int }{64, 2100, 400}) {
			for _, tb := range []bool{false, true} {
				for _, threads := range []int{1, 3} {
					p := newProblem(r, false, tb, s.m, s.n, s.k, 2, 1, 0.5)
					want := p.run(kern, threads)
					got := append([]float32(nil), p.c...)
					whole := part{kern: kern, transB: tb, m1: p.m, n1: p.n, k: p.k, alpha: p.alpha, beta: p.beta,
						a: p.a, lda: p.lda, src: sliceSource{p.b, p.ldb}, c: got, ldc: p.ldc}
					whole.multiply(threads)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %v threads %d: C[%d] = %v from the source, %v from the slice", kern.name, p, threads, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	// The exported entry point, on the active kernel.
	p := newProblem(r, true, true, 37, 70, 520, 1, 1, 0)
	got := append([]float32(nil), p.c...)
	SgemmSource(true, true, p.m, p.n, p.k, p.alpha, p.a, p.lda, sliceSource{p.b, p.ldb}, p.beta, got, p.ldc)
	p.verify(t, "SgemmSource", got)
}

// TestTranspose checks Transpose on sizes around its 8x8 blocks, with leading dimensions wider
// than the matrices: every element lands in place and the gaps are left alone.
func TestTranspose(t *testing.T) {
	for _, rows := range []int{1, 7, 8, 9, 16, 23} {
		for _, cols := range []int{1, 5, 8, 15, 16, 33} {
			lds, ldd := cols+3, rows+2
			src := make([]float32, rows*lds)
			for i := range src {
				src[i] = float32(i)
			}
			dst := make([]float32, cols*ldd)
			for i := range dst {
				dst[i] = -1
			}
			Transpose(dst, ldd, src, lds, rows, cols)
			for j := range cols {
				for i := range ldd {
					want := float32(-1)
					if i < rows {
						want = src[i*lds+j]
					}
					if got := dst[j*ldd+i]; got != want {
						t.Fatalf("%dx%d: dst[%d][%d] = %v, want %v", rows, cols, j, i, got, want)
					}
				}
			}
		}
	}
}
