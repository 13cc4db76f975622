package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPacked checks that a multiply by a Packed A gives the bits of the multiply that packs A at
// every call, for every kernel, transpose, shape (several passes over k, partial slivers) and
// split, with B from a slice and from a Source.
func TestPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, kern := range supported {
		for _, s := range append(shapes, struct{ m, n, k int }{64, 2100, 400}) {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, threads := range []int{1, 3} {
						p := newProblem(r, ta, tb, s.m, s.n, s.k, 2, 1, 0.5)
						want := p.run(kern, threads)
						pa := pack(kern, ta, p.m, p.k, p.a, p.lda)
						for _, src := range []bool{false, true} {
							got := append([]float32(nil), p.c...)
							whole := part{kern: kern, packed: pa, transB: tb, m1: p.m, n1: p.n, k: p.k, alpha: p.alpha, beta: p.beta,
								b: p.b, ldb: p.ldb, c: got, ldc: p.ldc}
							if src {
								whole.b, whole.ldb, whole.src = nil, 0, sliceSource{p.b, p.ldb}
							}
							whole.multiply(threads)
							for i := range want {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("%s %v threads %d source %v: C[%d] = %v packed, %v unpacked", kern.name, p, threads, src, i, got[i], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
	// The exported entry points, on the active kernel: A may change after Pack.
	p := newProblem(r, false, true, 37, 70, 520, 1, 1, 0)
	a := append([]float32(nil), p.a...)
	pa := Pack(p.transA, p.m, p.k, a, p.lda)
	clear(a)
	if pa.Rows() != p.m || pa.Depth() != p.k {
		t.Fatalf("Rows, Depth = %d, %d; want %d, %d", pa.Rows(), pa.Depth(), p.m, p.k)
	}
	got := append([]float32(nil), p.c...)
	pa.Sgemm(p.transB, p.n, p.alpha, p.b, p.ldb, p.beta, got, p.ldc)
	p.verify(t, "Packed.Sgemm", got)
	got = append(got[:0], p.c...)
	pa.SgemmSource(p.transB, p.n, p.alpha, sliceSource{p.b, p.ldb}, p.beta, got, p.ldc)
	p.verify(t, "Packed.SgemmSource", got)
}

// TestPackedB checks that a multiply by a PackedB gives the bits of the multiply that packs B at
// every call, for every kernel (with its narrow variant, whose slivers are as wide), transpose,
// shape and split.
func TestPackedB(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, kern := range supported {
		for _, s := range append(shapes, struct{ m, n, k int }{64, 2100, 400}) {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, threads := range []int{1, 3} {
						p := newProblem(r, ta, tb, s.m, s.n, s.k, 2, 1, 0.5)
						pb := packB1(kern, tb, p.n, p.k, p.b, p.ldb)
						for _, k := range []*kernel{kern, kern.narrow} {
							if k == nil {
								continue
							}
							want := p.run(k, threads)
							got := append([]float32(nil), p.c...)
							whole := part{kern: k, packedB: pb, transA: ta, m1: p.m, n1: p.n, k: p.k, alpha: p.alpha, beta: p.beta,
								a: p.a, lda: p.lda, c: got, ldc: p.ldc}
							whole.multiply(threads)
							for i := range want {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("%s %v threads %d: C[%d] = %v packed, %v unpacked", k.name, p, threads, i, got[i], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
	// The exported entry point, on the active kernel: B may change after PackB.
	p := newProblem(r, true, true, 37, 70, 520, 1, 1, 0)
	b := append([]float32(nil), p.b...)
	pb := PackB(p.transB, p.n, p.k, b, p.ldb)
	clear(b)
	got := append([]float32(nil), p.c...)
	pb.Sgemm(p.transA, p.m, p.alpha, p.a, p.lda, p.beta, got, p.ldc)
	p.verify(t, "PackedB.Sgemm", got)
}
