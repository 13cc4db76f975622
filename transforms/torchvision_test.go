package transforms

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stoke-ml/stoke/internal/pyoracle"
)

// stokePython is $STOKE_PYTHON, the interpreter with torch and torchvision 0.14 that CI sets; the
// parity tests skip without it (another python3's torchvision may be another version) and fail
// when it is set but does not work.
func stokePython(t *testing.T) string {
	t.Helper()
	if os.Getenv("STOKE_PYTHON") == "" {
		t.Skip("STOKE_PYTHON is unset: the parity tests against torchvision need a python3 with torch and torchvision 0.14")
	}
	return pyoracle.Python(t, "torch", "torchvision")
}

// fixedAug applies one operation of the augmentation spaces at a fixed magnitude, as
// torchvision's _apply_op does; post first adds a pixel step that does nothing, so that a
// translation takes the pixel path instead of becoming a crop.
type fixedAug struct {
	op   augOp
	mag  float64
	post bool
}

func (f fixedAug) String() string { return fmt.Sprintf("%v(%g, post=%v)", f.op, f.mag, f.post) }

func (f fixedAug) Plan(p *Plan, _ *rand.Rand) error {
	if f.post {
		p.Pixels(func(Image) {})
	}
	planAugOp(p, f.op, f.mag)
	return nil
}

// fixedOp adds one pixelOp as it is.
type fixedOp pixelOp

func (f fixedOp) String() string { return fmt.Sprintf("op%d", f.kind) }

func (f fixedOp) Plan(p *Plan, _ *rand.Rand) error {
	p.post = append(p.post, pixelOp(f))
	return nil
}

const torchvisionScript = `
import sys, json, torch, numpy as np
from torchvision.transforms import functional as F, InterpolationMode
from torchvision.transforms.autoaugment import _apply_op, TrivialAugmentWide, RandAugment, AutoAugment
torch.set_num_threads(1)
spec = json.load(open(sys.argv[1]))
out = open(sys.argv[2], "wb")
for c in spec["cases"]:
    im = spec["images"][c["image"]]
    t = torch.from_numpy(np.fromfile(im["path"], dtype=np.uint8).reshape(im["c"], im["h"], im["w"]).copy())
    k = c["kind"]
    if k == "op":
        r = _apply_op(t, c["name"], c["mag"], interpolation=InterpolationMode.NEAREST, fill=None)
    elif k == "hue":
        r = F.adjust_hue(t, c["mag"])
    elif k == "gray":
        r = F.rgb_to_grayscale(t, num_output_channels=t.shape[0])
    elif k == "blur":
        r = F.gaussian_blur(t, [c["size"], c["size"]], [c["mag"], c["mag"]])
    elif k == "affine":
        a = c["affine"]
        r = F.affine(t, angle=a[0], translate=[int(a[1]), int(a[2])], scale=a[3], shear=[a[4], a[5]], interpolation=InterpolationMode.NEAREST)
    elif k == "perspective":
        r = F.perspective(t, c["start"], c["end"], interpolation=InterpolationMode.BILINEAR, fill=[0.0] * t.shape[0])
    elif k == "erase":
        i, j, h, w = c["box"]
        r = F.erase(t, i, j, h, w, torch.tensor(c["value"], dtype=torch.uint8)[:, None, None])
    out.write(r.contiguous().numpy().tobytes())
tables = {}
h, w = spec["table_hw"]
for name, space in [("wide", TrivialAugmentWide()._augmentation_space(31)),
                    ("rand", RandAugment()._augmentation_space(31, (h, w))),
                    ("auto", AutoAugment()._augmentation_space(10, (h, w)))]:
    tables[name] = {op: [float(x) for x in m.reshape(-1).tolist()] if m.ndim > 0 else [] for op, (m, signed) in space.items()}
json.dump(tables, open(sys.argv[3], "w"))
`

type tvImage struct {
	Path string `json:"path"`
	C    int    `json:"c"`
	H    int    `json:"h"`
	W    int    `json:"w"`
	in   Input
}

type tvCase struct {
	Kind  string  `json:"kind"`
	Name  string  `json:"name,omitempty"`
	Mag   float64 `json:"mag"`
	Image int     `json:"image"`
	Size  int     `json:"size,omitempty"`
	Box   []int   `json:"box,omitempty"`
	Value []int   `json:"value,omitempty"`
	// Affine: angle, tx, ty, scale, shear x, shear y, as F.affine takes them.
	Affine []float64 `json:"affine,omitempty"`
	// Start and End: the corners of perspective.
	Start [][2]float64 `json:"start,omitempty"`
	End   [][2]float64 `json:"end,omitempty"`
	t     Transform
	exact bool // must match every byte
}

// TestTorchvisionParity applies each augmentation operation with fixed parameters to the same
// uint8 images here and through torchvision 0.14's functional ops (via _apply_op, as
// TrivialAugmentWide, RandAugment and AutoAugment call them), and compares every byte: exact
// for the integer operations and translations; for the float ones at most 1/255 off, on at most
// 0.5% of the bytes (float32 sums in another order can cross a truncation; on torch 1.13 none do:
// every byte matches). It also
// checks that the magnitude tables equal torchvision's for every op and bin.
func TestTorchvisionParity(t *testing.T) {
	py := stokePython(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 11))
	noise := hwc(40, 52, 3, func(y, x, c int) byte { return byte(r.IntN(256)) })
	smooth := hwc(45, 38, 3, func(y, x, c int) byte {
		return byte(40 + 3*x + 2*y + 25*c + int(20*math.Sin(float64(x*y)/40)))
	})
	gray := hwc(33, 41, 1, func(y, x, c int) byte { return byte(r.IntN(200) + 30) })
	images := []*tvImage{{in: noise}, {in: smooth}, {in: gray}}
	for i, im := range images {
		im.C, im.H, im.W = im.in.C, im.in.H, im.in.W
		im.Path = filepath.Join(dir, fmt.Sprintf("im%d.raw", i))
		if err := os.WriteFile(im.Path, chw(im.in), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var cases []*tvCase
	add := func(c *tvCase) { cases = append(cases, c) }
	wide, std := augSpace{bins: 31, wide: true}, augSpace{bins: 31}
	for img := range images {
		w, h := images[img].W, images[img].H
		for op := augIdentity; op <= augInvert; op++ {
			var mags []float64
			switch {
			case !op.hasMagnitude():
				mags = []float64{0}
			case op == augPosterize:
				mags = []float64{8, 6, 4, 3, 2, 1}
			case op == augSolarize:
				mags = []float64{wide.magnitude(op, 0, w, h), wide.magnitude(op, 9, w, h), wide.magnitude(op, 20, w, h), 128.5}
			default:
				for _, i := range []int{3, 9, 17, 30} {
					mags = append(mags, wide.magnitude(op, i, w, h), -wide.magnitude(op, i, w, h))
				}
				mags = append(mags, std.magnitude(op, 9, w, h), -std.magnitude(op, 30, w, h))
			}
			for _, m := range mags {
				integer := op == augIdentity || op == augTranslateX || op == augTranslateY || op == augPosterize ||
					op == augSolarize || op == augInvert || op == augEqualize
				add(&tvCase{Kind: "op", Name: op.String(), Mag: m, Image: img, t: fixedAug{op: op, mag: m}, exact: integer})
				if op == augTranslateX || op == augTranslateY {
					add(&tvCase{Kind: "op", Name: op.String(), Mag: m, Image: img, t: fixedAug{op: op, mag: m, post: true}, exact: true})
				}
			}
		}
		for _, hue := range []float64{-0.5, -0.31, -0.05, 0.02, 0.25, 0.5} {
			add(&tvCase{Kind: "hue", Mag: hue, Image: img, t: fixedOp{kind: opHue, f: hue}})
		}
		add(&tvCase{Kind: "gray", Image: img, t: fixedOp{kind: opGrayscale}})
		for _, b := range []struct {
			size  int
			sigma float64
		}{{3, 0.1}, {3, 0.8}, {5, 1.3}, {9, 2}, {23, 1.7}} {
			add(&tvCase{Kind: "blur", Size: b.size, Mag: b.sigma, Image: img, t: fixedOp{kind: opBlur, n: [4]int{b.size}, f: b.sigma}})
		}
		for _, a := range [][6]float64{{0, 0, 0, 1, 0, 0}, {17.5, 3, -2, 1, 0, 0}, {-40, 0, 0, 0.8, 10, 0}, {5, -4, 6, 1.3, -7, 12}, {180, 1, 1, 0.5, 0, -30}} {
			add(&tvCase{Kind: "affine", Affine: a[:], Image: img, t: fixedOp{kind: opAffine, m: affineMatrix(0, 0, a[0], a[1], a[2], a[3], a[4], a[5])}})
		}
		for _, e := range [][4][2]float64{{{3, 2}, {float64(w - 5), 1}, {float64(w - 2), float64(h - 4)}, {1, float64(h - 1)}},
			{{0, 0}, {float64(w - 1), 0}, {float64(w - 1), float64(h - 1)}, {0, float64(h - 1)}},
			{{float64(w / 4), float64(h / 5)}, {float64(w - 1), 0}, {float64(w - w/3), float64(h - 1)}, {2, float64(h - h/4)}}} {
			start := perspectiveCorners(w, h)
			c, ok := perspectiveCoeffs(start, e)
			if !ok {
				t.Fatalf("perspective %v: singular", e)
			}
			add(&tvCase{Kind: "perspective", Start: start[:], End: e[:], Image: img, t: fixedOp{kind: opPerspective, m: c}})
		}
		box := []int{5, 7, 11, 20}
		add(&tvCase{Kind: "erase", Box: box, Value: []int{124, 116, 104}[:images[img].C], Image: img,
			t: fixedOp{kind: opErase, n: [4]int{5, 7, 11, 20}, v: [3]byte{124, 116, 104}}, exact: true})
	}
	for _, c := range cases {
		if c.Kind == "erase" && images[c.Image].C == 1 {
			c.t = fixedOp{kind: opErase, n: [4]int{5, 7, 11, 20}, v: [3]byte{124, 124, 124}}
		}
	}

	spec := map[string]any{"images": images, "cases": cases, "table_hw": []int{noise.H, noise.W}}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	specPath, outPath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "out.raw")
	tablePath, script := filepath.Join(dir, "tables.json"), filepath.Join(dir, "tv.py")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(torchvisionScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, script, specPath, outPath, tablePath).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", py, err, out)
	}
	want, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}

	type tally struct{ cases, bytes, off, off1, maxd int }
	byKind := map[string]*tally{}
	var order []string
	for _, c := range cases {
		im := images[c.Image]
		n := im.C * im.H * im.W
		if len(want) < n {
			t.Fatalf("torchvision wrote too little")
		}
		ref := want[:n]
		want = want[n:]
		got := make([]byte, n)
		if err := Compose(c.t).NewWorker().Apply(got, im.in, nil); err != nil {
			t.Fatalf("%v: %v", c.t, err)
		}
		off, maxd := 0, 0
		for i := range got {
			if d := absDiff(got[i], ref[i]); d != 0 {
				off++
				maxd = max(maxd, d)
			}
		}
		key := c.Kind + " " + c.Name
		if c.Kind == "op" {
			key = c.Name
		}
		if fa, ok := c.t.(fixedAug); ok && fa.post {
			key += " (pixel step)"
		}
		k := byKind[key]
		if k == nil {
			k = &tally{}
			byKind[key] = k
			order = append(order, key)
		}
		k.cases++
		k.bytes += n
		k.off += off
		if maxd <= 1 {
			k.off1 += off
		}
		k.maxd = max(k.maxd, maxd)
		switch {
		case c.exact && off != 0:
			t.Errorf("%v on image %d: %d of %d bytes differ from torchvision (max %d); want none", c.t, c.Image, off, n, maxd)
		case maxd > 1 || float64(off) > 0.005*float64(n):
			t.Errorf("%v on image %d: %d of %d bytes differ from torchvision, max by %d; want at most 0.5%% of them, by at most 1", c.t, c.Image, off, n, maxd)
		}
	}
	if len(want) != 0 {
		t.Fatalf("torchvision wrote %d bytes more than the cases", len(want))
	}
	for _, key := range order {
		k := byKind[key]
		t.Logf("%-24s %3d cases: %6d of %7d bytes differ (%.3f%%), max diff %d", key, k.cases, k.off, k.bytes, 100*float64(k.off)/float64(k.bytes), k.maxd)
	}

	// The magnitude tables, every op and bin, for the noise image's size.
	tb, err := os.ReadFile(tablePath)
	if err != nil {
		t.Fatal(err)
	}
	var tables map[string]map[string][]float64
	if err := json.Unmarshal(tb, &tables); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]augSpace{"wide": wide, "rand": std, "auto": {bins: 10}} {
		for op := augIdentity; op <= augInvert; op++ {
			tv, ok := tables[name][op.String()]
			if !ok {
				if op != augInvert || name != "auto" {
					continue
				}
			}
			if len(tv) == 0 {
				if op.hasMagnitude() {
					t.Errorf("%s %v: torchvision has no magnitudes; Go draws some", name, op)
				}
				continue
			}
			if !op.hasMagnitude() || len(tv) != s.bins {
				t.Errorf("%s %v: torchvision has %d magnitudes; Go %d bins (has magnitude %v)", name, op, len(tv), s.bins, op.hasMagnitude())
				continue
			}
			for i, v := range tv {
				if got := s.magnitude(op, i, noise.W, noise.H); got != v {
					t.Errorf("%s %v bin %d: magnitude %v; torchvision %v", name, op, i, got, v)
				}
			}
		}
	}
}
