package jpeg

import (
	"bytes"
	"fmt"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// python is the interpreter with PIL that the reference tests run: $STOKE_PYTHON, else
// /usr/bin/python3. The tests skip when neither imports PIL.
func python(t testing.TB) string {
	t.Helper()
	py := os.Getenv("STOKE_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := exec.Command(py, "-c", "import PIL").Run(); err != nil {
		t.Skipf("no Python with PIL (%s: %v); set STOKE_PYTHON", py, err)
	}
	return py
}

// refImage is a JPEG file and PIL's decode of it (convert("RGB"), HWC).
type refImage struct {
	name string
	data []byte
	rgb  []byte
	w, h int
}

// pilCorpus gathers the test JPEGs (Go's image/testdata: 4:2:0, 4:2:2, 4:4:0, 4:4:4, 4:1:1,
// 4:1:0, progressive, restart intervals, RGB, CMYK, gray; this package's testdata: cjpeg's
// restart files; and PIL's own encodes of two of them: 4:2:0, 4:2:2, 4:4:4, progressive, gray,
// CMYK, odd and tiny sizes) and PIL's decode of each, through transforms/testdata/pilref.py.
func pilCorpus(t testing.TB) []refImage {
	t.Helper()
	py := python(t)
	dir := t.TempDir()
	var files []string
	add := func(pattern string) {
		m, _ := filepath.Glob(pattern)
		for _, f := range m {
			if strings.Contains(f, "truncated") {
				continue // PIL pads a truncated file with gray; the fork reports it
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, filepath.Base(f))
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, dst)
		}
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	goroot := strings.TrimSpace(string(out))
	add(filepath.Join(goroot, "src", "image", "testdata", "*.jpeg"))
	add(filepath.Join("testdata", "*.jpg"))
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "pilref.py"))
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "pil")
	run := func(args ...string) {
		cmd := exec.Command(py, append([]string{script}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", py, args[0], err, out)
		}
	}
	run("gen", gen, filepath.Join(dir, "video-001.jpeg"), filepath.Join(dir, "video-005.gray.jpeg"))
	m, _ := filepath.Glob(filepath.Join(gen, "*.jpg"))
	files = append(files, m...)
	run(append([]string{"ref"}, files...)...)
	var imgs []refImage
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rgb, w, h := readRef(t, f+".rgb")
		imgs = append(imgs, refImage{name: strings.TrimPrefix(f, dir+"/"), data: data, rgb: rgb, w: w, h: h})
	}
	slices.SortFunc(imgs, func(a, b refImage) int { return strings.Compare(a.name, b.name) })
	return imgs
}

// readRef reads one of pilref.py's outputs: "W H\n" then W*H*3 bytes.
func readRef(t testing.TB, path string) ([]byte, int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w, h int
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		t.Fatalf("%s: no header", path)
	}
	if _, err := fmt.Sscanf(string(b[:i]), "%d %d", &w, &h); err != nil || len(b)-i-1 != w*h*3 {
		t.Fatalf("%s: header %q, %d bytes", path, b[:i], len(b)-i-1)
	}
	return b[i+1:], w, h
}

// diffStats accumulates |a-b| over samples.
type diffStats struct {
	n, within1, exact int
	sum               float64
	max               int
}

func (s *diffStats) add(a, b byte) {
	d := int(a) - int(b)
	if d < 0 {
		d = -d
	}
	s.n++
	s.sum += float64(d)
	s.max = max(s.max, d)
	if d <= 1 {
		s.within1++
	}
	if d == 0 {
		s.exact++
	}
}

func (s *diffStats) merge(o diffStats) {
	s.n += o.n
	s.within1 += o.within1
	s.exact += o.exact
	s.sum += o.sum
	s.max = max(s.max, o.max)
}

func (s diffStats) String() string {
	return fmt.Sprintf("mean %.4f/255, max %d, within 1 %.4f%%, equal %.4f%%",
		s.sum/float64(max(s.n, 1)), s.max, 100*float64(s.within1)/float64(max(s.n, 1)), 100*float64(s.exact)/float64(max(s.n, 1)))
}

// compareExact compares the exact decode m of a w x h image over region r with PIL's rgb.
func compareExact(m *Image, rgb []byte, w int, r image.Rectangle) diffStats {
	var s diffStats
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			for c := range 3 {
				p := m.Planes[min(c, m.Comps-1)]
				s.add(p.Pix[(y-p.Y0)*p.Stride+x-p.X0], rgb[(y*w+x)*3+c])
			}
		}
	}
	return s
}

// TestExactMatchesPIL decodes every image of the corpus in exact mode, whole and through a
// region, and compares with PIL's decode. libjpeg-turbo's islow IDCT, fancy upsampling and
// colour conversion are integer code ported bit for bit, so every image must be equal to PIL's
// on all but a few samples; the per-image figures are logged (go test -v).
func TestExactMatchesPIL(t *testing.T) {
	var dec Decoder
	var all diffStats
	for _, im := range pilCorpus(t) {
		t.Run(im.name, func(t *testing.T) {
			whole := image.Rect(0, 0, im.w, im.h)
			region := image.Rect(im.w/3, im.h/4, im.w/3+im.w/2, im.h/4+im.h/3)
			for _, r := range []image.Rectangle{{}, region} {
				if r.Empty() && r != (image.Rectangle{}) {
					continue
				}
				m, err := dec.Decode(im.data, Options{Exact: true, Region: r})
				if err != nil {
					t.Fatal(err)
				}
				if m.Width != im.w || m.Height != im.h {
					t.Fatalf("Decode size = %dx%d; PIL says %dx%d", m.Width, m.Height, im.w, im.h)
				}
				cmp := whole
				if !r.Empty() {
					cmp = r
				}
				s := compareExact(m, im.rgb, im.w, cmp)
				if r.Empty() {
					all.merge(s)
					t.Logf("exact vs PIL: %v", s)
				}
				if s.max > 1 || float64(s.exact) < 0.999*float64(s.n) {
					t.Errorf("region %v: exact vs PIL: %v; want max <= 1, >= 99.9%% equal", r, s)
				}
			}
		})
	}
	t.Logf("all images, exact vs PIL: %v", all)
}

// checkExactPlanes checks the shape of an exact decode: 1 or 3 full-resolution planes that
// hold their W x H samples.
func checkExactPlanes(t *testing.T, m *Image) {
	t.Helper()
	if m.Comps != 1 && (m.Comps != 3 || !m.RGB) {
		t.Fatalf("exact Decode: %d comps, RGB %v; want 1, or 3 RGB", m.Comps, m.RGB)
	}
	for i := range m.Comps {
		p := m.Planes[i]
		if p.SubX != 1 || p.SubY != 1 || p.W <= 0 || p.H <= 0 || p.X0+p.W > m.Width || p.Y0+p.H > m.Height ||
			p.Stride < p.W || len(p.Pix) < (p.H-1)*p.Stride+p.W {
			t.Fatalf("exact Decode plane %d: %+v of a %dx%d image", i, Plane{X0: p.X0, Y0: p.Y0, W: p.W, H: p.H, Stride: p.Stride, SubX: p.SubX, SubY: p.SubY}, m.Width, m.Height)
		}
	}
}

// TestRangeLimit compares rangeLimit with the table libjpeg builds (jdmaster.c's
// prepare_range_limit_table), indexed as jpeg_idct_islow does.
func TestRangeLimit(t *testing.T) {
	var table [5*256 + 128]byte // sample_range_limit, from -256
	simple := table[256:]
	for i := range 256 {
		simple[i] = byte(i)
	}
	post := simple[128:] // IDCT_range_limit
	for i := 128; i < 512; i++ {
		post[i] = 255
	}
	copy(post[4*256-128:], simple[:128])
	for x := int32(-5000); x <= 5000; x++ {
		if got, want := rangeLimit(x), post[x&1023]; got != want {
			t.Fatalf("rangeLimit(%d) = %d; want %d", x, got, want)
		}
	}
}
