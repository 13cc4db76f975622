package jpeg

import (
	"bytes"
	"image"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// withoutSIMD runs f with the Go code alone.
func withoutSIMD(f func()) {
	saved := avx2
	avx2 = false
	defer func() { avx2 = saved }()
	f()
}

// TestIDCTSIMDMatchesGo compares the AVX2 IDCT with idctRows + idctColsStore byte for byte on
// blocks like a decoder makes (a few low frequencies, the rest zero), dense blocks, blocks whose
// output clips both ways, and blocks of arbitrary int32s (where both wrap around identically).
func TestIDCTSIMDMatchesGo(t *testing.T) {
	if !avx2 {
		t.Skip("no SIMD IDCT on this CPU or build")
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	const stride = 11
	for trial := range 20000 {
		var b block
		switch trial % 4 {
		case 0: // sparse, photo-like
			b[0] = int32(rnd.IntN(2048)) - 1024
			for range rnd.IntN(10) {
				b[unzig[1+rnd.IntN(20)]] = int32(rnd.IntN(512)) - 256
			}
		case 1: // dense, every frequency
			for i := range b {
				b[i] = int32(rnd.IntN(4096)) - 2048
			}
		case 2: // large: outputs clip at 0 and 255
			for i := range b {
				b[i] = int32(rnd.IntN(1<<16)) - 1<<15
			}
		default:
			for i := range b {
				b[i] = int32(rnd.Uint32())
			}
		}
		want := make([]byte, 8*stride)
		wb := b
		withoutSIMD(func() {
			if idctSIMD(want, stride, &wb, false, blockSize-1) {
				t.Fatal("idctSIMD ran with avx2 off")
			}
		})
		idctRows(&wb)
		idctColsStore(want, stride, &wb)
		var bt block // b transposed, for idctAVX2T
		for i := range 8 {
			for j := range 8 {
				bt[j*8+i] = b[i*8+j]
			}
		}
		for _, transposed := range []bool{false, true} {
			in := b
			if transposed {
				in = bt
			}
			got := make([]byte, 8*stride)
			if !idctSIMD(got, stride, &in, transposed, blockSize-1) {
				t.Fatal("idctSIMD did not run")
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("transposed %v, block %v:\n got %v\nwant %v", transposed, b, got, want)
			}
		}
	}
}

// decodeBoth decodes data with the SIMD paths and without, and reports any difference in the
// result (both must fail alike, or both succeed with the same planes).
func decodeBoth(t *testing.T, data []byte, o Options) {
	t.Helper()
	var d1, d2 Decoder
	m1, err1 := d1.Decode(data, o)
	var m2 *Image
	var err2 error
	withoutSIMD(func() { m2, err2 = d2.Decode(data, o) })
	if (err1 == nil) != (err2 == nil) {
		t.Fatalf("%+v: SIMD error %v, Go error %v", o, err1, err2)
	}
	if err1 != nil {
		return
	}
	for i := range m1.Comps {
		p, q := m1.Planes[i], m2.Planes[i]
		for y := range p.H {
			if !bytes.Equal(p.Pix[y*p.Stride:y*p.Stride+p.W], q.Pix[y*q.Stride:y*q.Stride+q.W]) {
				t.Fatalf("%+v: plane %d row %d differs between the SIMD and the Go decode", o, i, y)
			}
		}
	}
}

func TestDecodeSIMDMatchesGo(t *testing.T) {
	if !avx2 {
		t.Skip("no SIMD IDCT on this CPU or build")
	}
	for name, data := range files(t) {
		t.Run(name, func(t *testing.T) {
			for _, o := range []Options{{}, {Region: image.Rect(9, 5, 33, 20)}, {Scale: 2}} {
				decodeBoth(t, data, o)
			}
		})
	}
}

// TestIDCTGenerated checks that idct_amd64.s is what idct_gen.py writes (go generate).
func TestIDCTGenerated(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run idct_gen.py")
	}
	out, err := exec.Command(py, "idct_gen.py").Output()
	if err != nil {
		t.Fatalf("idct_gen.py: %v", err)
	}
	have, err := os.ReadFile("idct_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(have)) {
		t.Error("idct_amd64.s differs from idct_gen.py's output: run go generate in transforms/internal/jpeg")
	}
}
