package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
)

// jpegFolder writes an ImageFolder of classes x perClass small JPEGs of varying sizes.
func jpegFolder(t *testing.T, classes, perClass int) string {
	t.Helper()
	root := t.TempDir()
	for c := range classes {
		dir := filepath.Join(root, string(rune('a'+c)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perClass {
			img := image.NewRGBA(image.Rect(0, 0, 48+4*i, 36))
			for y := range 36 {
				for x := range 48 + 4*i {
					img.Set(x, y, color.RGBA{uint8(x * 5), uint8(y * 7), uint8(c*90 + i), 255})
				}
			}
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, string(rune('0'+i))+".jpg"), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// mnistDir writes n IDX images of h x w with labels i%10 as the MNIST training split.
func mnistDir(t *testing.T, n, h, w int) string {
	t.Helper()
	dir := t.TempDir()
	img := binary.BigEndian.AppendUint32(nil, 0x803)
	for _, d := range []int{n, h, w} {
		img = binary.BigEndian.AppendUint32(img, uint32(d))
	}
	lab := binary.BigEndian.AppendUint32(nil, 0x801)
	lab = binary.BigEndian.AppendUint32(lab, uint32(n))
	for i := range n {
		for p := range h * w {
			img = append(img, byte(i*31+p*7))
		}
		lab = append(lab, byte(i%10))
	}
	for name, b := range map[string][]byte{"train-images-idx3-ubyte": img, "train-labels-idx1-ubyte": lab} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rgbOf decodes an image file into HWC RGB bytes.
func rgbOf(t *testing.T, b []byte) ([]byte, int, int) {
	t.Helper()
	im, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r := im.Bounds()
	out := make([]byte, 0, r.Dx()*r.Dy()*3)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.RGBAModel.Convert(im.At(x, y)).(color.RGBA)
			out = append(out, c.R, c.G, c.B)
		}
	}
	return out, r.Dx(), r.Dy()
}

func meanAbsDiff(a, b []byte) float64 {
	s := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += max(d, -d)
	}
	return float64(s) / float64(len(a))
}

// TestPackRoundTrip packs datasets and reads every sample back through datasets.Open("shards:...").
func TestPackRoundTrip(t *testing.T) {
	pngs := photoFolder(t, 2, 4, nil)
	jpegs := jpegFolder(t, 2, 3)
	mnist := mnistDir(t, 12, 5, 7)
	tests := []struct {
		name, data string
		args       []string
		check      func(t *testing.T, src, got loaders.Sample)
	}{
		{"raw from png, exact", pngs, []string{"--format", "raw"}, func(t *testing.T, src, got loaders.Sample) {
			want, w, h := rgbOf(t, src.Input.Encoded)
			in := got.Input
			if in.W != w || in.H != h || in.C != 3 || !bytes.Equal(in.Pixels, want) {
				t.Errorf("raw sample %s = %dx%dx%d; want the PNG's %dx%dx3 pixels exactly", src.Key, in.W, in.H, in.C, w, h)
			}
		}},
		{"raw zstd from mnist, exact", "mnist:" + mnist, []string{"--format", "raw", "--compress", "zstd"}, func(t *testing.T, src, got loaders.Sample) {
			a, b := src.Input, got.Input
			if a.H != b.H || a.W != b.W || a.C != b.C || !bytes.Equal(a.Pixels, b.Pixels) {
				t.Errorf("raw sample = %dx%dx%d; want %dx%dx%d with the same pixels", b.H, b.W, b.C, a.H, a.W, a.C)
			}
		}},
		{"raw gzip bounded", jpegs, []string{"--format", "raw", "--compress", "gzip", "--max-side", "20"}, func(t *testing.T, src, got loaders.Sample) {
			_, w, h := rgbOf(t, src.Input.Encoded)
			ww, wh := bound(w, h, 20)
			if in := got.Input; in.W != ww || in.H != wh || max(in.W, in.H) != 20 || len(in.Pixels) != ww*wh*3 {
				t.Errorf("bounded raw sample %s = %dx%d; want %dx%d (from %dx%d)", src.Key, in.W, in.H, ww, wh, w, h)
			}
		}},
		{"jpeg passes through", jpegs, []string{"--format", "jpeg"}, func(t *testing.T, src, got loaders.Sample) {
			if !bytes.Equal(src.Input.Encoded, got.Input.Encoded) {
				t.Errorf("jpeg sample %s was re-encoded; want the original bytes", src.Key)
			}
		}},
		{"jpeg from png within tolerance", pngs, []string{"--format", "jpeg", "--compress", "zstd"}, func(t *testing.T, src, got loaders.Sample) {
			want, w, h := rgbOf(t, src.Input.Encoded)
			px, gw, gh := rgbOf(t, got.Input.Encoded)
			if gw != w || gh != h {
				t.Fatalf("jpeg sample %s = %dx%d; want %dx%d", src.Key, gw, gh, w, h)
			}
			if d := meanAbsDiff(px, want); d > 6 {
				t.Errorf("jpeg sample %s differs from the PNG by %.2f per channel on average; want <= 6", src.Key, d)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			out := t.TempDir()
			args := append([]string{"pack", "--data", tc.data, "--out", out, "--workers", "3", "--json", "-q"}, tc.args...)
			stdout, errOut, code := stoke(t, args...)
			if code != 0 {
				t.Fatalf("stoke %v exit %d: %s", args, code, errOut)
			}
			var r packResult
			lastJSON(t, stdout, &r)
			// The index locates every sample (and the frames of a compressed shard), so that
			// readers need not scan the shards.
			var ix struct {
				ShardList []struct {
					NSamples int        `json:"nsamples"`
					Classes  int        `json:"classes"`
					Sizes    []int64    `json:"sizes"`
					Frames   [][2]int64 `json:"frames"`
				} `json:"shardlist"`
			}
			if b, err := os.ReadFile(filepath.Join(out, datasets.IndexName)); err != nil || json.Unmarshal(b, &ix) != nil {
				t.Fatalf("index: %v", err)
			}
			compressed := slices.Contains(tc.args, "zstd") || slices.Contains(tc.args, "gzip")
			for k, e := range ix.ShardList {
				if len(e.Sizes) != e.NSamples || e.Classes < 1 || (e.Frames != nil) != compressed {
					t.Errorf("index entry %d: %d sizes for %d samples, classes %d, %d frames (compressed %v)", k, len(e.Sizes), e.NSamples, e.Classes, len(e.Frames),
						compressed)
				}
			}
			src, err := datasets.Open(tc.data, "train")
			if err != nil {
				t.Fatal(err)
			}
			defer closeDataset(src)
			got, err := datasets.Open(r.Spec, "train")
			if err != nil {
				t.Fatalf("datasets.Open(%q) = %v", r.Spec, err)
			}
			defer closeDataset(got)
			if got.Len() != src.Len() || r.Samples != src.Len() {
				t.Fatalf("packed %d, read back %d samples; want %d", r.Samples, got.Len(), src.Len())
			}
			for i := range src.Len() {
				s, err := src.Sample(t.Context(), i)
				if err != nil {
					t.Fatal(err)
				}
				g, err := got.Sample(t.Context(), i)
				if err != nil {
					t.Fatal(err)
				}
				if g.Label != s.Label {
					t.Errorf("sample %d label = %d; want %d", i, g.Label, s.Label)
				}
				tc.check(t, s, g)
			}
		})
	}
}

func TestPackShards(t *testing.T) {
	root := photoFolder(t, 2, 5, nil)
	out := t.TempDir()
	stdout, errOut, code := stoke(t, "pack", "--data", root, "--out", out, "--format", "raw", "--shard-size", "8000", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r packResult
	lastJSON(t, stdout, &r)
	// Each sample is about 40x30x3 = 3600 bytes: three at most before a shard passes 8000 bytes.
	if len(r.Shards) < 3 || r.Bytes <= 0 {
		t.Errorf("pack --shard-size 8000 wrote %d shards (%d bytes); want at least 3", len(r.Shards), r.Bytes)
	}
	if _, err := os.Stat(filepath.Join(out, "index.json")); err != nil {
		t.Errorf("index: %v", err)
	}
	ds, err := datasets.Open(r.Spec, "")
	if err != nil {
		t.Fatal(err)
	}
	defer closeDataset(ds)
	if ds.Len() != 10 {
		t.Errorf("shards hold %d samples; want 10", ds.Len())
	}
}

func TestPackErrors(t *testing.T) {
	bad := photoFolder(t, 1, 2, map[string]string{"a/broken.png": "\x89PNG\r\n\x1a\nnot really"})
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"pack", "--data", "x"}, 2, "--data and --out are required"},
		{[]string{"pack", "--data", "x", "--out", "y", "--format", "webp"}, 2, `--format "webp"`},
		{[]string{"pack", "--data", "x", "--out", "y", "--compress", "lz4"}, 2, `--compress "lz4"`},
		{[]string{"pack", "--data", "x", "--out", "y", "--max-side", "-1"}, 2, "--max-side -1"},
		{[]string{"pack", "--data", bad, "--out", t.TempDir(), "--format", "raw"}, 1, "broken.png"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := stoke(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("stoke %v = exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
			}
		})
	}
}

func TestBound(t *testing.T) {
	tests := []struct{ w, h, max, ww, wh int }{
		{500, 375, 256, 256, 192},
		{375, 500, 256, 192, 256},
		{100, 50, 256, 100, 50},
		{100, 50, 0, 100, 50},
		{1000, 1, 10, 10, 1},
	}
	for _, tc := range tests {
		if w, h := bound(tc.w, tc.h, tc.max); w != tc.ww || h != tc.wh {
			t.Errorf("bound(%d, %d, %d) = %d, %d; want %d, %d", tc.w, tc.h, tc.max, w, h, tc.ww, tc.wh)
		}
	}
}
