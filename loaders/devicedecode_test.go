package loaders

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/transforms"
)

// photoJPEG encodes a w x h image of smooth gradients and a little texture, as a camera's JPEG
// might be: gray when gray is set, else YCbCr 4:2:0.
func photoJPEG(t testing.TB, w, h int, seed int, gray bool) []byte {
	t.Helper()
	var im image.Image
	if gray {
		g := image.NewGray(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				g.SetGray(x, y, color.Gray{uint8((x*3 + y*5 + seed*11 + (x*y)%7) % 256)})
			}
		}
		im = g
	} else {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c.SetRGBA(x, y, color.RGBA{uint8(x*255/w + seed), uint8(y*255/h + (x*y)%11), uint8((x + y + seed*7) % 256), 255})
			}
		}
		im = c
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, im, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// deviceDataset is JPEG photos of several sizes, a gray one, and a PNG (which takes the host
// path), labelled by index.
func deviceDataset(t testing.TB) *Memory {
	var set []Sample
	for i := range 11 {
		enc := photoJPEG(t, 60+17*i, 48+23*(i%4), i, i == 5)
		if i == 8 {
			enc = loadertest.PNG(t, 70, 50, 3)
		}
		set = append(set, Sample{Input: transforms.Input{Encoded: enc}, Label: i % 3})
	}
	return NewMemory(Info{Name: "photos", NumClasses: 3}, set)
}

// TestDeviceDecodeBatches: a Loader whose transform decodes with DeviceDecode yields the batches
// of the same Loader with FastDecode byte for byte (the device renders what Apply makes), over
// JPEGs of several sizes and scales, a gray one and a PNG in the same batches, with flips, over
// two epochs; the JPEGs went to the device (but a few whose records are longer than their places)
// and the PNG took the host path.
func TestDeviceDecodeBatches(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := deviceDataset(t)
	chain := transforms.Compose(transforms.RandomResizedCrop(64), transforms.HorizontalFlip(0.5))
	cfg := Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 9, Transform: chain}
	fast := newLoader(t, ds, cfg)
	cfg.Transform = chain.WithDecode(transforms.DeviceDecode)
	dev := newLoader(t, ds, cfg)
	for e := range 2 {
		want, got := epoch(t, fast, e, -1), epoch(t, dev, e, -1)
		if len(got) != len(want) {
			t.Fatalf("epoch %d: %d batches; want %d", e, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i].images, want[i].images) || !slices.Equal(got[i].labels, want[i].labels) {
				t.Fatalf("epoch %d batch %d differs from FastDecode's", e, i)
			}
		}
	}
	s := dev.Stats()
	// The PNG takes the host path in both epochs, and so may a JPEG whose crop's record is longer
	// than its place.
	if s.DeviceDecoded+s.HostPath != 22 || s.HostPath < 2 || s.DeviceDecoded < 16 {
		t.Errorf("DeviceDecoded %d, HostPath %d; want 22 in all, the PNG's 2 and at most a few others on the host", s.DeviceDecoded, s.HostPath)
	}
	if s.RecordBytes <= 0 || s.RecordBytes >= s.DeviceDecoded*int64(dev.Shape().Len()) {
		t.Errorf("RecordBytes %d for %d records of at most %d bytes", s.RecordBytes, s.DeviceDecoded, dev.Shape().Len()-3)
	}
	if runtime.GOOS == "linux" && s.HostCPU <= 0 {
		t.Errorf("HostCPU %v after two epochs", s.HostCPU)
	}
	if fs := fast.Stats(); fs.DeviceDecoded != 0 || fs.HostPath != 0 {
		t.Errorf("a FastDecode Loader counts %d device decoded and %d host path samples", fs.DeviceDecoded, fs.HostPath)
	}
}

// TestDeviceDecodeHostPath: records longer than their place (an output of few pixels, a large
// photo resized whole) take the host path, and the batches are still FastDecode's; a corrupt JPEG
// is the sample's error, not a host path, and Skip leaves it out as with FastDecode.
func TestDeviceDecodeHostPath(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := deviceDataset(t)
	chain := transforms.Compose(transforms.Resize(6), transforms.CenterCrop(6))
	cfg := Config{Batch: 3, Workers: 1, Transform: chain}
	want := epoch(t, newLoader(t, ds, cfg), 0, -1)
	cfg.Transform = chain.WithDecode(transforms.DeviceDecode)
	dev := newLoader(t, ds, cfg)
	got := epoch(t, dev, 0, -1)
	for i := range want {
		if !bytes.Equal(got[i].images, want[i].images) {
			t.Fatalf("batch %d differs from FastDecode's", i)
		}
	}
	if s := dev.Stats(); s.DeviceDecoded != 0 || s.HostPath != 11 {
		t.Errorf("DeviceDecoded %d, HostPath %d; want 0 and 11: a 6x6x3 place holds no record", s.DeviceDecoded, s.HostPath)
	}

	// A 6-megapixel photo resized whole into 64x64 decodes at 1/8, where a block is a pixel and
	// its record (5 bytes a block besides its coefficients) is longer than its place: the host
	// path, the device's memory as it was reserved.
	smooth := func(w, h int) []byte {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c.SetRGBA(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), 128, 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, c, &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	big := NewMemory(Info{Name: "big", NumClasses: 1}, []Sample{
		{Input: transforms.Input{Encoded: smooth(3000, 2000)}},
		{Input: transforms.Input{Encoded: smooth(100, 80)}},
	})
	chain = transforms.Compose(transforms.Resize(64), transforms.CenterCrop(64))
	cfg = Config{Batch: 2, Workers: 2, Transform: chain}
	want = epoch(t, newLoader(t, big, cfg), 0, -1)
	cfg.Transform = chain.WithDecode(transforms.DeviceDecode)
	dev = newLoader(t, big, cfg)
	if got = epoch(t, dev, 0, -1); !bytes.Equal(got[0].images, want[0].images) {
		t.Error("the batch of a 6-megapixel photo differs from FastDecode's")
	}
	if s := dev.Stats(); s.DeviceDecoded != 1 || s.HostPath != 1 {
		t.Errorf("DeviceDecoded %d, HostPath %d; want the small photo on the device, the large one on the host", s.DeviceDecoded, s.HostPath)
	}

	bad := deviceDataset(t)
	enc := bad.samples[2].Input.Encoded
	bad.samples[2].Input.Encoded = enc[:len(enc)/2]
	chain = transforms.Compose(transforms.RandomResizedCrop(24))
	cfg = Config{Batch: 4, Workers: 2, Transform: chain.WithDecode(transforms.DeviceDecode), OnError: Skip}
	dev = newLoader(t, bad, cfg)
	got = epoch(t, dev, 0, -1)
	cfg.Transform = chain
	want = epoch(t, newLoader(t, bad, cfg), 0, -1)
	if len(got) != len(want) || got[0].indices[2] != 3 {
		t.Fatalf("batches %v; want FastDecode's with sample 2 left out", got)
	}
	for i := range want {
		if !bytes.Equal(got[i].images, want[i].images) {
			t.Fatalf("batch %d differs from FastDecode's", i)
		}
	}
	var se *SampleError
	if s := dev.Stats(); s.Skipped != 1 || !errors.As(s.LastSkipped, &se) || se.Index != 2 || !errors.Is(s.LastSkipped, transforms.ErrCorrupt) {
		t.Errorf("skipped %d, last %v; want sample 2, corrupt", s.Skipped, s.LastSkipped)
	}
}

// TestDeviceDecodeConfig: host steps over the batch's pixels are refused with a device decode.
func TestDeviceDecodeConfig(t *testing.T) {
	ds := deviceDataset(t)
	chain := transforms.Compose(transforms.RandomResizedCrop(24)).WithDecode(transforms.DeviceDecode)
	for name, cfg := range map[string]Config{
		"mix":     {Batch: 4, Transform: chain, Mix: transforms.Mix{MixUpAlpha: 0.2}},
		"collate": {Batch: 4, Transform: chain, Collate: func(*HostBatch) error { return nil }},
	} {
		if _, err := New(ds, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New = %v; want ErrConfig", name, err)
		}
	}
}

// TestDeviceDecodeComputeStream: with a consumer stream, work enqueued on it after a batch sees
// the rendered images (it waits for the render, not only for the copy), and the buffers are
// reused only after that work.
func TestDeviceDecodeComputeStream(t *testing.T) {
	loadertest.NoLeaks(t)
	dev, compute := cpuStream(t)
	ds := deviceDataset(t)
	// Large outputs, whose rendering takes a while after the copy.
	chain := transforms.Compose(transforms.Resize(256), transforms.CenterCrop(256))
	want := epoch(t, newLoader(t, ds, Config{Batch: 6, Workers: 2, Transform: chain}), 0, -1)
	l := newLoader(t, ds, Config{Batch: 6, Workers: 2, Device: dev, Stream: compute, Prefetch: 1, Transform: chain.WithDecode(transforms.DeviceDecode)})
	seen := make([][]byte, l.BatchesPerEpoch()) // written by the compute stream only
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		n, k := b.N*b.Shape.Len(), b.Seq
		if err := compute.Host(func() error {
			img, _ := gpu.HostBytes(b.Images) // at once: the render must be done before
			seen[k] = bytes.Clone(img[:n])
			time.Sleep(200 * time.Microsecond) // a slow step: the loader must not overwrite its input
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	if err := compute.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if !bytes.Equal(seen[k], want[k].images) {
			t.Errorf("batch %d as the compute stream saw it differs from FastDecode's", k)
		}
	}
}
