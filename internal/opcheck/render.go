package opcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/transforms"
)

// RenderBatch is a good call of kernels.Ops.RenderRecords made from real JPEGs, with the pixels
// it must write: N samples of shape C x H x W, each a record of ApplyCoefficients in Src (kind
// 1) or the pixels of Apply (kind 0: the samples that take the host path, and a copy of every
// third sample's pixels), and Want, Apply's pixels of every sample, which Render of a record
// equals byte for byte. Slot is the largest RecordScratch of its records.
type RenderBatch struct {
	Name       string
	N, C, H, W int
	Src        []byte
	Offsets    []int32
	Want       []byte
	Slot       int
}

// renderChains are the Chains of RenderBatches: the training crop at 224 and at a size that
// takes every reduced scale, the evaluation geometry at small sizes, the other filters, padded
// crops flipped and turned (every orientation of the output).
var renderChains = []struct {
	name  string
	p     *transforms.Chain
	seeds int
}{
	{"RandomResizedCrop(224)+flip", transforms.Compose(transforms.RandomResizedCrop(224), transforms.HorizontalFlip(0.5)), 2},
	{"RandomResizedCrop(24)+flip", transforms.Compose(transforms.RandomResizedCrop(24), transforms.HorizontalFlip(0.5)), 3},
	{"Resize(40)+CenterCrop(32)", transforms.Compose(transforms.Resize(40), transforms.CenterCrop(32)), 1},
	{"Resize(8)+CenterCrop(8)", transforms.Compose(transforms.Resize(8), transforms.CenterCrop(8)), 1},
	{"CenterCrop(600)+Resize(50)", transforms.Compose(transforms.CenterCrop(600), transforms.Resize(50)), 1},
	{"bicubic Resize(60)+CenterCrop(48)", transforms.Compose(transforms.ResizeFilter(60, transforms.Bicubic), transforms.CenterCrop(48)), 1},
	{"Lanczos Resize(30)+CenterCrop(30)", transforms.Compose(transforms.ResizeFilter(30, transforms.Lanczos), transforms.CenterCrop(30)), 1},
	{"RandomCrop(96, 8)+flips+quarter turns", transforms.Compose(transforms.RandomCrop(96, 8), transforms.VerticalFlip(0.5),
		transforms.RandomRotate90(), transforms.HorizontalFlip(0.5)), 2},
}

// RenderBatches returns batches of RenderRecords over the JPEGs of Go's image/testdata (4:2:0 to
// 4:4:4, 4:1:1, 4:1:0, progressive, restart intervals, RGB, gray, CMYK, which takes the host
// path), those of the jpeg fork's testdata, and a 500x375 photo-like image made here with its
// gray twin and each EXIF orientation: one batch for every Chain of renderChains and seed, with 3
// output channels and (for the first seed) 1.
func RenderBatches(t testing.TB) []RenderBatch {
	t.Helper()
	corpus := renderCorpus(t)
	var batches []RenderBatch
	r, rec := rng.NewSample(), make([]byte, 1<<22)
	for _, rc := range renderChains {
		w := rc.p.NewWorker()
		for seed := range rc.seeds {
			for _, c := range []int{3, 1} {
				if c == 1 && seed > 0 {
					continue
				}
				b := RenderBatch{Name: fmt.Sprintf("%s, seed %d, %d channels", rc.name, seed, c), C: c}
				for i, data := range corpus {
					s, err := rc.p.OutShape(transforms.Shape{C: c, H: 375, W: 500})
					if err != nil {
						t.Fatal(err)
					}
					b.H, b.W = s.H, s.W
					want := make([]byte, s.Len())
					r.Reset(uint64(seed), 0, i)
					if err := w.Apply(want, transforms.Input{Encoded: data}, r.Rand); err != nil {
						continue // the truncated file and the like
					}
					r.Reset(uint64(seed), 0, i)
					n, err := w.ApplyCoefficients(rec, s, transforms.Input{Encoded: data}, r.Rand)
					switch {
					case errors.Is(err, transforms.ErrHostPath):
						b.add(0, want, want)
						continue
					case err != nil:
						t.Fatalf("%s: image %d: ApplyCoefficients: %v", b.Name, i, err)
					}
					need, err := w.RecordScratch(rec[:n])
					if err != nil {
						t.Fatalf("%s: image %d: RecordScratch: %v", b.Name, i, err)
					}
					b.Slot = max(b.Slot, need)
					b.add(1, rec[:n], want)
					if i%3 == 0 {
						b.add(0, want, want)
					}
				}
				batches = append(batches, b)
			}
		}
	}
	return batches
}

// add appends a sample of kind whose bytes in Src are b, its pixels want.
func (b *RenderBatch) add(kind int32, data, want []byte) {
	b.Offsets = append(b.Offsets, int32(len(b.Src)), kind)
	b.Src = append(b.Src, data...)
	b.Src = append(b.Src, make([]byte, -len(b.Src)&3)...) // records start 4-aligned, as a loader lays them
	b.Want = append(b.Want, want...)
	b.N++
}

// renderCorpus reads the JPEGs of RenderBatches.
func renderCorpus(t testing.TB) [][]byte {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	goroot, err := exec.Command("go", "env", "GOROOT").Output() // runtime.GOROOT is deprecated
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	var files []string
	for _, pattern := range []string{
		filepath.Join(strings.TrimSpace(string(goroot)), "src", "image", "testdata", "*.jpeg"),
		filepath.Join(root, "transforms", "internal", "jpeg", "testdata", "*.jpg"),
	} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("opcheck: no JPEG found in Go's image/testdata nor transforms/internal/jpeg/testdata")
	}
	var c [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c = append(c, b)
	}
	rgb := image.NewRGBA(image.Rect(0, 0, 500, 375))
	gray := image.NewGray(rgb.Rect)
	for y := range 375 {
		for x := range 500 {
			v := func(c int) uint8 { return uint8((x*(c+1) + y*(3-c) + (x*y)%37 + (x^y)%13) / 2) }
			rgb.Set(x, y, color.RGBA{v(0), v(1), v(2), 255})
			gray.SetGray(x, y, color.Gray{uint8((x + 2*y + (x*y)%37) / 3)})
		}
	}
	photo := encode(t, rgb)
	c = append(c, photo, encode(t, gray))
	for o := 2; o <= 8; o++ {
		c = append(c, withOrientation(photo, o))
	}
	return c
}

func encode(t testing.TB, m image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withOrientation inserts an EXIF segment with orientation o after the JPEG's SOI marker.
func withOrientation(j []byte, o int) []byte {
	le := binary.LittleEndian
	tiff := make([]byte, 8+2+12+4)
	copy(tiff, "II*\x00")
	le.PutUint32(tiff[4:], 8)
	le.PutUint16(tiff[8:], 1)
	le.PutUint16(tiff[10:], 0x0112)
	le.PutUint16(tiff[12:], 3)
	le.PutUint32(tiff[14:], 1)
	le.PutUint16(tiff[18:], uint16(o))
	seg := append([]byte("Exif\x00\x00"), tiff...)
	out := []byte{0xff, 0xd8, 0xff, 0xe1, 0, 0}
	binary.BigEndian.PutUint16(out[4:], uint16(len(seg)+2))
	out = append(append(out, seg...), j[2:]...)
	return out
}

// RenderBad is a call of RenderRecords whose stream's error must wrap Want and name sample Sample
// ("sample 3:"): Batch with Slot bytes of workspace a sample.
type RenderBad struct {
	Name   string
	Batch  RenderBatch
	Slot   int
	Sample int
	Want   error
}

// RenderBadCalls are bad samples in the batch of Resize(40)+CenterCrop(32) (3 channels) of
// batches: a record with a bad field or cut short (transforms.ErrCorrupt), one of another number
// of pixels (transforms.ErrShape), a workspace slot one byte short of the largest record's need
// (kernels.ErrShape), pixels past the end of src and an offset before it (kernels.ErrShape), an
// unknown kind (kernels.ErrArgument).
func RenderBadCalls(t testing.TB, batches []RenderBatch) []RenderBad {
	t.Helper()
	var b RenderBatch
	for _, x := range batches {
		if x.Name == "Resize(40)+CenterCrop(32), seed 0, 3 channels" {
			b = x
		}
	}
	// The last record, and the sample that needs the most scratch.
	last, big, need := -1, -1, 0
	w := transforms.Compose().NewWorker()
	for i := range b.N {
		if b.Offsets[2*i+1] != 1 {
			continue
		}
		last = i
		n, err := w.RecordScratch(b.Src[b.Offsets[2*i]:])
		if err != nil {
			t.Fatal(err)
		}
		if n > need {
			big, need = i, n
		}
	}
	if last < 1 {
		t.Fatalf("opcheck: no batch of Resize(40)+CenterCrop(32) with records among %d", len(batches))
	}
	with := func(f func(b *RenderBatch)) RenderBatch {
		c := b
		c.Src, c.Offsets = bytes.Clone(b.Src), append([]int32(nil), b.Offsets...)
		f(&c)
		return c
	}
	le := binary.LittleEndian
	rec := int(b.Offsets[2*last])
	return []RenderBad{
		{"magic", with(func(c *RenderBatch) { c.Src[rec] = 'X' }), b.Slot, last, transforms.ErrCorrupt},
		{"block count", with(func(c *RenderBatch) { le.PutUint32(c.Src[rec+12:], le.Uint32(c.Src[rec+12:])-1) }), b.Slot, last, transforms.ErrCorrupt},
		{"pair index", with(func(c *RenderBatch) {
			nb := int(le.Uint32(c.Src[rec+12:]))
			c.Src[rec+112+int(c.Src[rec+21])*184+5*nb+(-nb&3)+3] = 64
		}), b.Slot, last, transforms.ErrCorrupt},
		{"cut short", with(func(c *RenderBatch) { c.Src = c.Src[:rec+100] }), b.Slot, last, transforms.ErrCorrupt},
		{"pixels", with(func(c *RenderBatch) { c.Src[rec+20] = 1 }), b.Slot, last, transforms.ErrShape},
		{"workspace", b, need - 1, big, kernels.ErrShape},
		{"pixels past src", with(func(c *RenderBatch) { c.Offsets[0], c.Offsets[1] = int32(len(c.Src)-5), 0 }), b.Slot, 0, kernels.ErrShape},
		{"negative offset", with(func(c *RenderBatch) { c.Offsets[2] = -4 }), b.Slot, 1, kernels.ErrShape},
		{"kind", with(func(c *RenderBatch) { c.Offsets[3] = 2 }), b.Slot, 1, kernels.ErrArgument},
	}
}

// RenderOn runs ops.RenderRecords over batch b on a new stream of dev, with slot bytes of
// workspace a sample, and returns the pixels and the stream's error: the one run of the CPU op
// set's tests and of the CUDA parity tests.
func RenderOn(t testing.TB, dev gpu.Device, ops kernels.Ops, b RenderBatch, slot int) ([]byte, error) {
	t.Helper()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	upload := func(data []byte) gpu.Buffer { return Upload(t, dev, s, data) }
	dst := kernels.Bytes(upload(make([]byte, b.N*b.C*b.H*b.W))).Slice(0, b.N*b.C*b.H*b.W)
	src := kernels.Bytes(upload(b.Src))
	offs := kernels.Int32s(upload(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b.Offsets))), 4*len(b.Offsets)))).Slice(0, len(b.Offsets))
	ws := kernels.Bytes(upload(make([]byte, b.N*slot))).Slice(0, b.N*slot)
	if err := ops.RenderRecords(s, dst, src, offs, ws, b.N, b.C, b.H, b.W); err != nil {
		t.Fatalf("%s: RenderRecords = %v", b.Name, err)
	}
	got := make([]byte, dst.Len)
	if err := s.CopyD2H(got, dst.Buf, 0); err != nil {
		t.Fatal(err)
	}
	return got, s.Synchronize(context.Background())
}

// Upload copies b into a new buffer of dev (at least a byte) through s.
func Upload(t testing.TB, dev gpu.Device, s gpu.Stream, b []byte) gpu.Buffer {
	t.Helper()
	buf, err := dev.Alloc(max(len(b), 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 {
		if err := s.CopyH2D(buf, 0, b); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}
