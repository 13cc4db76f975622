package cli

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// photoFolder writes an ImageFolder with classes x perClass small PNGs, plus the extra files given
// (path relative to the root -> contents).
func photoFolder(t *testing.T, classes, perClass int, extra map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for c := range classes {
		dir := filepath.Join(root, string(rune('a'+c)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perClass {
			img := image.NewRGBA(image.Rect(0, 0, 40+i, 30))
			for y := range 30 {
				for x := range 40 + i {
					img.Set(x, y, color.RGBA{uint8(x * 6), uint8(y * 8), uint8(c * 90), 255})
				}
			}
			f, err := os.Create(filepath.Join(dir, string(rune('0'+i))+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBenchJSON(t *testing.T) {
	root := photoFolder(t, 2, 5, nil)
	out, errOut, code := stoke(t, "bench", "--data", root, "--size", "16", "--batch", "4", "--workers", "2", "--epochs", "2", "--warmup", "1", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("stdout = %q; want only the JSON line with -q", out)
	}
	var r benchResult
	lastJSON(t, out, &r)
	if r.Images != 20 || r.Epochs != 2 || r.Skipped != 0 {
		t.Errorf("images, epochs, skipped = %d, %d, %d; want 20, 2, 0 (warm-up not counted)", r.Images, r.Epochs, r.Skipped)
	}
	// Exactly the images and labels of the timed epochs: none of the warm-up's, none missing.
	if want := int64(20 * (3*16*16 + 4)); r.H2DBytes != want {
		t.Errorf("h2d_bytes = %d; want %d (the uint8 images and int32 labels of the timed epochs)", r.H2DBytes, want)
	}
	if r.Seconds <= 0 || r.ImagesPerS <= 0 || r.StallFraction < 0 || r.StallFraction > 1 {
		t.Errorf("figures = %+v; want positive time and rate, stall in [0,1]", r)
	}
	// The process's CPU time cannot exceed its cores times the wall time (slack: clock ticks).
	if limit := 1.5*r.Seconds*float64(runtime.NumCPU())*1e3/float64(r.Images) + 1; r.CPUMsPerImage < 0 || r.CPUMsPerImage > limit ||
		(runtime.GOOS == "linux" && r.CPUMsPerImage == 0) {
		t.Errorf("cpu_ms_per_image = %v; want in (0, %.2f]", r.CPUMsPerImage, limit)
	}
}

func TestBenchBadSamples(t *testing.T) {
	root := photoFolder(t, 2, 3, map[string]string{"a/garbage.png": "not a png at all", "b/empty.jpg": ""})
	_, errOut, code := stoke(t, "bench", "--data", root, "--size", "16", "--batch", "2", "--json", "-q")
	if code != 1 || !strings.Contains(errOut, "garbage.png") && !strings.Contains(errOut, "empty.jpg") {
		t.Errorf("default policy: exit %d, stderr %q; want 1 and the bad file named", code, errOut)
	}
	out, errOut, code := stoke(t, "bench", "--data", root, "--size", "16", "--batch", "2", "--on-error", "skip", "--json", "-q")
	if code != 0 {
		t.Fatalf("skip policy: exit %d: %s", code, errOut)
	}
	var r benchResult
	lastJSON(t, out, &r)
	if r.Skipped != 2 || r.Images != 6 {
		t.Errorf("skip policy: skipped %d, images %d; want 2 and 6", r.Skipped, r.Images)
	}
	_, errOut, code = stoke(t, "bench", "--data", root, "--size", "16", "--batch", "2", "--on-error", "skip", "--max-skipped", "1", "-q")
	if code != 1 || !strings.Contains(errOut, "skipped") {
		t.Errorf("past the limit: exit %d, stderr %q; want 1 and a too-many-skipped error", code, errOut)
	}
}

// TestBenchDeviceDecode: stoke bench --decode device sends the JPEGs of a folder to the device
// and its PNG down the host path, reports both counts, the records' bytes (fewer than the
// pixels', and so the bytes over the bus) and the host's share of the CPU.
func TestBenchDeviceDecode(t *testing.T) {
	root := jpegFolder(t, 2, 4)
	f, err := os.Create(filepath.Join(root, "a", "x.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, image.NewGray(image.Rect(0, 0, 50, 40))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, errOut, code := stoke(t, "bench", "--data", root, "--size", "32", "--batch", "4", "--epochs", "2", "--decode", "device", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchResult
	lastJSON(t, out, &r)
	if r.Images != 18 || r.DeviceDecoded+r.HostPath != r.Images || r.HostPath < 2 || r.DeviceDecoded < 12 {
		t.Errorf("images %d, device decoded %d, host path %d; want 18, the PNG's 2 on the host, the JPEGs (but a few) on the device",
			r.Images, r.DeviceDecoded, r.HostPath)
	}
	if px := float64(3 * 32 * 32); r.RecordBytesPerImage <= 0 || r.RecordBytesPerImage >= px {
		t.Errorf("record_bytes_per_image = %v; want in (0, %v)", r.RecordBytesPerImage, px)
	}
	if pixels := r.Images * (3*32*32 + 4 + 8); r.H2DBytes >= pixels {
		t.Errorf("h2d_bytes = %d; want fewer than the pixels' %d", r.H2DBytes, pixels)
	}
	if runtime.GOOS == "linux" && (r.HostCPUMsPerImage <= 0 || r.HostCPUMsPerImage > r.CPUMsPerImage) {
		t.Errorf("host_cpu_ms_per_image = %v; want in (0, cpu_ms_per_image %v]", r.HostCPUMsPerImage, r.CPUMsPerImage)
	}
}
