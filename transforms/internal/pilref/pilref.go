// Package pilref gives tests PIL's view of JPEG files, the reference of the exact decode mode: a
// corpus of test JPEGs with PIL's decode of each and, where torchvision is installed, the
// output of torchvision's evaluation transform, all computed by pilref.py in Python.
//
// The interpreter is $STOKE_PYTHON, else /usr/bin/python3; tests skip when it cannot import
// PIL. Only tests import this package.
package pilref

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Python returns the interpreter with PIL, or skips t.
func Python(t testing.TB) string {
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

// Pixels is an RGB image, HWC.
type Pixels struct {
	Pix  []byte
	W, H int
}

// Image is a JPEG file and PIL's view of it.
type Image struct {
	Name string // the file's name: its origin and kind
	Data []byte
	RGB  Pixels // PIL's decode, convert("RGB")
	// Eval[224] and Eval[32] are torchvision's Resize(size*8/7) and CenterCrop(size) of RGB
	// (transforms.Eval's geometry); absent without torchvision.
	Eval map[int]Pixels
	// Bicubic is torchvision's Resize(232, bicubic) and CenterCrop(224) of RGB (swin_t's
	// weights' transform); zero without torchvision.
	Bicubic Pixels
}

// Corpus returns the test JPEGs and PIL's view of them: Go's image/testdata JPEGs (4:2:0,
// 4:2:2, 4:4:0, 4:4:4, 4:1:1, 4:1:0, progressive, restart intervals, RGB, CMYK, gray), the
// jpeg fork's testdata (cjpeg's restart files), PIL's own encodes of two of Go's images
// (4:2:0, 4:2:2, 4:4:4, quality 50, progressive, gray, CMYK, odd, tiny and 2-pixel-wide sizes;
// named "pil/..."), and photos JPEGs of the photo folder $STOKE_PHOTOS
// (CLASS/NAME.jpg, spread over the classes; named "photo/..."), when set.
func Corpus(t testing.TB, photos int) []Image {
	t.Helper()
	py := Python(t)
	_, self, _, _ := runtime.Caller(0)
	here := filepath.Dir(self)
	dir := t.TempDir()
	var files []string
	add := func(pattern, prefix string, n int) {
		m, _ := filepath.Glob(pattern)
		if n < len(m) { // n spread over all of them (over every class of a photo folder)
			pick := make([]string, n)
			for i := range pick {
				pick[i] = m[i*len(m)/n]
			}
			m = pick
		}
		for _, f := range m {
			if strings.Contains(f, "truncated") {
				continue // PIL pads a truncated file with gray; the fork reports it
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, prefix+filepath.Base(f))
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
	add(filepath.Join(strings.TrimSpace(string(out)), "src", "image", "testdata", "*.jpeg"), "", 1000)
	add(filepath.Join(here, "..", "jpeg", "testdata", "*.jpg"), "", 1000)
	if p := os.Getenv("STOKE_PHOTOS"); p != "" && photos > 0 {
		if err := os.Mkdir(filepath.Join(dir, "photo"), 0o755); err != nil {
			t.Fatal(err)
		}
		add(filepath.Join(p, "*", "*.jpg"), "photo/", photos)
	}
	script := filepath.Join(here, "pilref.py")
	run := func(args ...string) {
		cmd := exec.Command(py, append([]string{script}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s %s: %v\n%s", py, script, args[0], err, out)
		}
	}
	gen := filepath.Join(dir, "pil")
	run("gen", gen, filepath.Join(dir, "video-001.jpeg"), filepath.Join(dir, "video-005.gray.jpeg"))
	m, _ := filepath.Glob(filepath.Join(gen, "*.jpg"))
	files = append(files, m...)
	run(append([]string{"ref"}, files...)...)
	var imgs []Image
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		im := Image{Name: strings.TrimPrefix(f, dir+"/"), Data: data, RGB: read(t, f+".rgb"), Eval: map[int]Pixels{}}
		for _, size := range []int{224, 32} {
			if p := fmt.Sprintf("%s.eval%d.rgb", f, size); exists(p) {
				im.Eval[size] = read(t, p)
			}
		}
		if p := f + ".bicubic224.rgb"; exists(p) {
			im.Bicubic = read(t, p)
		}
		imgs = append(imgs, im)
	}
	slices.SortFunc(imgs, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return imgs
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// read reads one of pilref.py's outputs: "W H\n" then W*H*3 bytes.
func read(t testing.TB, path string) Pixels {
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
	return Pixels{Pix: b[i+1:], W: w, H: h}
}

// Kind is the group an image of the corpus is reported in: "photo" (real photographs), "cmyk",
// "gray", "rgb", "progressive", "restart", or its chroma subsampling ("4:2:0", "4:2:2",
// "4:4:0", "4:4:4", "4:1:1", "4:1:0"), read from the file.
func Kind(im Image) string {
	n := im.Name
	switch {
	case strings.HasPrefix(n, "photo/"):
		return "photo"
	case strings.Contains(n, "cmyk"):
		return "cmyk"
	case strings.Contains(n, "gray"):
		return "gray"
	case strings.Contains(n, "rgb"):
		return "rgb"
	case strings.Contains(n, "prog"):
		return "progressive"
	case strings.Contains(n, "restart"):
		return "restart"
	}
	return Subsampling(im.Data)
}

// Subsampling reads the chroma subsampling of a 3-component JPEG's frame header ("4:2:0" ...),
// or "" when there is none.
func Subsampling(b []byte) string {
	for i := 2; i+10 < len(b); i++ {
		if b[i] != 0xff || (b[i+1] != 0xc0 && b[i+1] != 0xc1 && b[i+1] != 0xc2) {
			continue
		}
		seg := b[i+4:]
		if len(seg) < 15 || seg[5] != 3 {
			return ""
		}
		y, c := seg[7], seg[10]
		h, v := int(y>>4)/max(int(c>>4), 1), int(y&15)/max(int(c&15), 1)
		switch [2]int{h, v} {
		case [2]int{1, 1}:
			return "4:4:4"
		case [2]int{2, 1}:
			return "4:2:2"
		case [2]int{2, 2}:
			return "4:2:0"
		case [2]int{1, 2}:
			return "4:4:0"
		case [2]int{4, 1}:
			return "4:1:1"
		case [2]int{4, 2}:
			return "4:1:0"
		}
		return fmt.Sprintf("%dx%d", h, v)
	}
	return ""
}

// Stats accumulates absolute differences between samples.
type Stats struct {
	N, Within1, Equal int
	Sum               float64
	Max               int
}

// Add counts |a-b|.
func (s *Stats) Add(a, b byte) {
	d := int(a) - int(b)
	if d < 0 {
		d = -d
	}
	s.N++
	s.Sum += float64(d)
	s.Max = max(s.Max, d)
	if d <= 1 {
		s.Within1++
	}
	if d == 0 {
		s.Equal++
	}
}

// Merge adds o's counts to s.
func (s *Stats) Merge(o Stats) {
	s.N += o.N
	s.Within1 += o.Within1
	s.Equal += o.Equal
	s.Sum += o.Sum
	s.Max = max(s.Max, o.Max)
}

// Mean is the mean absolute difference, in levels of 255.
func (s Stats) Mean() float64 { return s.Sum / float64(max(s.N, 1)) }

// FracWithin1 is the fraction of samples that differ by at most 1.
func (s Stats) FracWithin1() float64 { return float64(s.Within1) / float64(max(s.N, 1)) }

// FracEqual is the fraction of equal samples.
func (s Stats) FracEqual() float64 { return float64(s.Equal) / float64(max(s.N, 1)) }

func (s Stats) String() string {
	return fmt.Sprintf("mean %.4f/255, max %3d, within 1 %8.4f%%, equal %8.4f%% (%d samples)",
		s.Mean(), s.Max, 100*s.FracWithin1(), 100*s.FracEqual(), s.N)
}
