package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// The tests here run the stoke binary, built once (without -race, whose shadow memory does not
// fit an address-space limit), under `ulimit -v`: a regression that allocates what a hostile
// header claims fails its test instead of taking the machine.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// stokeBin builds the stoke binary once for the package's tests.
func stokeBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "stoke-test-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "stoke")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/stoke").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// memLimitKB is the address-space limit of guarded runs: far below what the hostile inputs claim
// (gigabytes), well above what stoke needs for them.
const memLimitKB = 2 << 20

// guarded runs the stoke binary under `ulimit -v` with a deadline; a run past it fails the test
// (a hang is a bug here too). It returns stdout, stderr and the exit status.
func guarded(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, memLimitKB), stokeBin(t)}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("stoke %v: still running after 2 minutes (stderr %q)", args, errOut.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pngOfHeader is a PNG whose header says w x h at depth bits and colour type, with a little
// compressed data: a decoder that trusts the header allocates the whole image first.
func pngOfHeader(w, h int, depth, colour byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		b.Write(c)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	chunk("IHDR", append(ihdr, depth, colour, 0, 0, 0))
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, 1) // the bytes do not matter: only their presence
	zw.Write(make([]byte, 4096))
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

// jpegBomb is a small real JPEG whose frame header is patched to claim 65535 x 65535 pixels.
func jpegBomb(t *testing.T) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 64, 64)), nil); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	i := bytes.Index(out, []byte{0xff, 0xc0})
	if i < 0 {
		t.Fatal("no SOF0 in the encoded JPEG")
	}
	copy(out[i+5:], []byte{0xff, 0xff, 0xff, 0xff})
	return out
}

// zeroTarZstd is a zstd shard of a tar whose one member is n zero bytes: tiny on disk.
func zeroTarZstd(t *testing.T, n int64) []byte {
	var b bytes.Buffer
	zw, err := zstd.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 512)
	copy(hdr, "0.raw")
	copy(hdr[100:], "0000644\x00")
	copy(hdr[124:], fmt.Sprintf("%011o\x00", n))
	copy(hdr[136:], "00000000000\x00")
	hdr[156] = '0'
	copy(hdr[257:], "ustar\x0000")
	copy(hdr[148:], "        ")
	sum := 0
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:], fmt.Sprintf("%06o\x00 ", sum))
	zw.Write(hdr)
	io.CopyN(zw, zeroReader{}, n)
	zw.Write(make([]byte, 1024))
	zw.Close()
	return b.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestHostileSizes: inputs whose headers (or flags) claim gigabytes fail fast with a named error
// under an address-space limit of 2 GiB.
func TestHostileSizes(t *testing.T) {
	dir := t.TempDir()
	// MNIST: a 1 x 32768 x 32768 image file, gzip'd (1 GiB of zeros would be ~1 MB; a few MB
	// of them show the claim is not trusted).
	var img bytes.Buffer
	zw := gzip.NewWriter(&img)
	binary.Write(zw, binary.BigEndian, []uint32{0x803, 1, 32768, 32768})
	io.CopyN(zw, zeroReader{}, 8<<20)
	zw.Close()
	write(t, filepath.Join(dir, "mnist", "train-images-idx3-ubyte.gz"), img.Bytes())
	write(t, filepath.Join(dir, "mnist", "train-labels-idx1-ubyte"), []byte{0, 0, 8, 1, 0, 0, 0, 1, 3})
	// CIFAR: a batch file one record short (cut at a record boundary).
	write(t, filepath.Join(dir, "cifar", "data_batch_1.bin"), make([]byte, 9999*3073))
	// Images: a 16-bit 10000 x 10000 PNG (within the pixel limit, 800 MB decoded) and a
	// 65535 x 65535 JPEG.
	write(t, filepath.Join(dir, "png16", "a", "big.png"), pngOfHeader(10000, 10000, 16, 6))
	write(t, filepath.Join(dir, "jpegbomb", "a", "big.jpg"), jpegBomb(t))
	// A zstd shard that expands to 1 GiB.
	write(t, filepath.Join(dir, "bomb", "shard-0.tar.zst"), zeroTarZstd(t, 1<<30))
	photos := photoFolder(t, 2, 4, nil)

	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"idx header", []string{"bench", "--data", "mnist:" + filepath.Join(dir, "mnist")}, "declare items of over"},
		{"cifar short", []string{"bench", "--data", "cifar10:" + filepath.Join(dir, "cifar")}, "data_batch_1.bin"},
		{"16-bit png", []string{"bench", "--data", filepath.Join(dir, "png16"), "--size", "16", "--batch", "1"}, "decodes to 1100000000 bytes"},
		{"jpeg bomb bench", []string{"bench", "--data", filepath.Join(dir, "jpegbomb"), "--size", "16", "--batch", "1"}, "image too large"},
		{"jpeg bomb pack raw", []string{"pack", "--data", filepath.Join(dir, "jpegbomb"), "--out", filepath.Join(dir, "o1"), "--format", "raw"},
			"image too large"},
		{"jpeg bomb pack jpeg", []string{"pack", "--data", filepath.Join(dir, "jpegbomb"), "--out", filepath.Join(dir, "o2"), "--format", "jpeg"},
			"image too large"},
		{"zstd bomb", []string{"bench", "--data", "shards:" + filepath.Join(dir, "bomb", "*.zst"), "--size", "16"}, "expands past"},
		{"slots over the budget", []string{"bench", "--data", photos, "--size", "5000", "--batch", "64"}, "over the memory budget"},
		{"slots over --memory", []string{"bench", "--data", photos, "--size", "64", "--batch", "64", "--memory", "1M"}, "--memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := guarded(t, tc.args...)
			if code != 1 || !strings.Contains(errOut, tc.msg) || strings.Contains(errOut, "out of memory") {
				t.Errorf("stoke %v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, tc.msg)
			}
		})
	}
	// A CIFAR batch file holds 10000 records, never fewer.
	_, errOut, _ := guarded(t, "bench", "--data", "cifar10:"+filepath.Join(dir, "cifar"))
	if !strings.Contains(errOut, "9999 records, the format has 10000") {
		t.Errorf("short CIFAR file: stderr %q", errOut)
	}
}

// TestSpecialFiles: a FIFO named like an image, and devices given as shards, are named errors at
// once (a blocked open would hit the guard's deadline).
func TestSpecialFiles(t *testing.T) {
	root := photoFolder(t, 2, 3, nil)
	if err := syscall.Mkfifo(filepath.Join(root, "a", "fifo.png"), 0o644); err != nil {
		t.Skip(err)
	}
	_, errOut, code := guarded(t, "bench", "--data", root, "--size", "16", "--batch", "2")
	if code != 1 || !strings.Contains(errOut, "fifo.png is a FIFO") {
		t.Errorf("folder with a FIFO: exit %d, stderr %q; want 1 naming the FIFO", code, errOut)
	}
	out, errOut, code := guarded(t, "bench", "--data", root, "--size", "16", "--batch", "2", "--on-error", "skip", "--json")
	var r benchResult
	if code != 0 || json.Unmarshal([]byte(lastLine(out)), &r) != nil || r.Skipped != 1 || r.Images != 6 {
		t.Errorf("folder with a FIFO, --on-error skip: exit %d, stdout %q, stderr %q; want 6 images and 1 skipped", code, out, errOut)
	}
	for _, dev := range []string{"/dev/zero", "/dev/null"} {
		_, errOut, code := guarded(t, "bench", "--data", "shards:"+dev, "--size", "16")
		if code != 1 || !strings.Contains(errOut, "not a regular file") {
			t.Errorf("shards:%s: exit %d, stderr %q; want 1 and not a regular file", dev, code, errOut)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestSecondInterrupt: the first SIGINT asks the run to stop; the second ends the process at once,
// even in the middle of a training step that takes a second or more. The first SIGINT lands at a
// random point of a step: should the step end within the few milliseconds it takes to see the
// first message and send the second signal, the run stops cleanly before it, and the test tries
// again (at most 10 times).
func TestSecondInterrupt(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	for try := 1; ; try++ {
		code, took, err := interruptTwice(t, root)
		if err != nil {
			t.Fatal(err)
		}
		if code == 130 {
			if took > 3*time.Second {
				t.Errorf("the second SIGINT took %v to end the process", took)
			}
			return
		}
		if try == 10 {
			t.Fatalf("after the second SIGINT the process exited with %d, 10 times; want 130 at once", code)
		}
		t.Logf("try %d: the run ended (status %d) before the second SIGINT came", try, code)
	}
}

// TestModelTooLarge: a model whose arguments are each within bounds but whose tensors, with their
// gradients and optimizer state, cannot fit in the device's memory is refused before anything is
// allocated, with an error naming the model and the sizes (under ulimit -v: the check, not the
// limit, must stop it: the device's memory is the address-space limit when that is less than the
// machine's), instead of Go's "fatal error: out of memory".
func TestModelTooLarge(t *testing.T) {
	data := "mnist:" + mnistDir(t, 20, 16, 16)
	for _, model := range []string{
		"vit(image_size=16,patch_size=4,num_layers=1,num_heads=2,hidden_dim=32768,mlp_dim=32768)",
		"mlp --classes 10000000",
		"mlp --classes 1000000", // 2.9 GiB: within the machine's memory, over ulimit -v's 2 GiB
	} {
		args := append([]string{"train", "--data", data, "--epochs", "1", "--eval-on-train", "--model"}, strings.Fields(model)...)
		_, errOut, code := guarded(t, args...)
		if code != 1 || !strings.Contains(errOut, "choose a smaller model") || !strings.Contains(errOut, "out of device memory") {
			t.Errorf("train --model %s: exit %d, stderr %q; want 1 and the model's sizes", model, code, errOut)
		}
	}
}

// interruptTwice starts a slow training run, interrupts it, waits for its message and interrupts
// it again; it returns the exit status and the time from the second signal to the exit.
func interruptTwice(t *testing.T, root string) (int, time.Duration, error) {
	// A small learning rate and many epochs: the run must still be training when the signals come
	// (at the default rate this one diverges within a second on a fast machine, and ends by itself).
	cmd := exec.Command(stokeBin(t), "train", "--data", root, "--size", "320", "--model", "cnn", "--batch", "16", "--workers", "1", "--eval-on-train",
		"--lr", "0.0001", "--epochs", "1000")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go io.Copy(io.Discard, stdout)
	expect := func(what string) bool {
		deadline := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return false
				}
				if strings.Contains(l, what) {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	if !expect(" step/s") { // a progress line: the run is inside its steps, its handler installed
		return 0, 0, errors.New("no progress line before the first SIGINT")
	}
	cmd.Process.Signal(os.Interrupt)
	if !expect("interrupt again to quit at once") {
		return 0, 0, errors.New("no message after the first SIGINT")
	}
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	quit := expect("quitting now")
	err := cmd.Wait()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, 0, fmt.Errorf("after two SIGINTs: %v", err)
	}
	if ee.ExitCode() == 130 && !quit {
		return 0, 0, errors.New("exit 130 without its message")
	}
	return ee.ExitCode(), took, nil
}

// TestPackKilled kills (SIGKILL, or SIGINT every third run) stoke pack at random points: whatever is
// left in its folder either reads back as the whole dataset or is refused; never as a smaller one.
// An interrupted pack leaves no file at all.
func TestPackKilled(t *testing.T) {
	src := mnistDir(t, 600, 8, 8)
	out := filepath.Join(t.TempDir(), "out")
	// Time one whole pack, to kill the others anywhere from their start to past their end.
	start := time.Now()
	if _, errOut, code := guarded(t, "pack", "--data", "mnist:"+src, "--out", out, "--format", "raw", "--compress", "zstd", "--shard-size", "2560",
		"-q"); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	whole := min(time.Since(start), 2*time.Second) // a loaded machine does not make the loop long
	rng := rand.New(rand.NewPCG(1, 2))
	complete, refused := 0, 0
	for i := range 24 {
		// zstd shards of ~40 samples each: many shards, renames and an index to interrupt.
		cmd := exec.Command(stokeBin(t), "pack", "--data", "mnist:"+src, "--out", out, "--format", "raw", "--compress", []string{"none", "zstd"}[i%2],
			"--shard-size", "2560", "--overwrite", "-q")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(whole) * 5 / 4)))
		if i%3 == 0 {
			// SIGINT: the pack stops and removes what it wrote, lock file included.
			cmd.Process.Signal(os.Interrupt)
			err := cmd.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 1 {
				if entries, _ := os.ReadDir(out); len(entries) != 0 {
					t.Errorf("run %d: an interrupted pack left %d files such as %s", i, len(entries), entries[0].Name())
				}
			}
		} else {
			cmd.Process.Kill()
			cmd.Wait()
		}
		for _, spec := range []string{"shards:" + out, "shards:" + filepath.Join(out, "shard-*")} {
			ds, err := datasets.Open(spec, "train")
			if err != nil {
				refused++
				continue
			}
			n := ds.Len()
			closeDataset(ds)
			if n != 600 {
				t.Fatalf("run %d: %s reads back %d samples after SIGKILL; want all 600 or an error", i, spec, n)
			}
			complete++
		}
	}
	t.Logf("after 24 kills within %v of their start: %d read-backs complete, %d refused", whole*5/4, complete, refused)
	// A clean pack over the remains succeeds and reads back whole.
	if _, errOut, code := guarded(t, "pack", "--data", "mnist:"+src, "--out", out, "--format", "raw", "--overwrite", "-q"); code != 0 {
		t.Fatalf("pack over the remains: %s", errOut)
	}
	ds, err := datasets.Open("shards:"+out, "train")
	if err != nil || ds.Len() != 600 {
		t.Fatalf("read back: %v", err)
	}
	closeDataset(ds)
}

// TestPackExclusive: a pack refuses a folder another pack holds, a folder with a previous pack
// unless --overwrite, a folder with other files, and a folder that overlaps its input.
func TestPackExclusive(t *testing.T) {
	src := photoFolder(t, 2, 3, nil)
	out := filepath.Join(t.TempDir(), "out")
	held, err := createPackDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := guarded(t, "pack", "--data", src, "--out", out, "--overwrite"); code != 1 || !strings.Contains(errOut, "another pack") {
		t.Errorf("pack into a held folder: exit %d, stderr %q; want 1 and another pack", code, errOut)
	}
	held.Abort()

	// Two packs at once: exactly one writes the folder, and it reads back whole.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() { _, _, codes[i] = guarded(t, "pack", "--data", src, "--out", out, "-q") })
	}
	wg.Wait()
	if codes[0]+codes[1] != 1 {
		t.Errorf("two packs into one folder exit %v; want one 0 and one 1", codes)
	}
	ds, err := datasets.Open("shards:"+out, "train")
	if err != nil || ds.Len() != 6 {
		t.Fatalf("read back: %v", err)
	}
	closeDataset(ds)

	if _, errOut, code := guarded(t, "pack", "--data", src, "--out", out); code != 1 || !strings.Contains(errOut, "--overwrite") {
		t.Errorf("pack over a previous pack: exit %d, stderr %q; want 1 and --overwrite", code, errOut)
	}
	// --overwrite replaces the previous pack completely, whatever its compression.
	if _, errOut, code := guarded(t, "pack", "--data", src, "--out", out, "--compress", "zstd", "--overwrite"); code != 0 {
		t.Fatalf("pack --overwrite: %s", errOut)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*.tar")); len(m) != 0 {
		t.Errorf("after --overwrite with zstd, plain shards %v remain", m)
	}
	write(t, filepath.Join(out, "notes.txt"), []byte("mine"))
	if _, errOut, code := guarded(t, "pack", "--data", src, "--out", out, "--overwrite"); code != 1 || !strings.Contains(errOut, "notes.txt") {
		t.Errorf("pack --overwrite over a foreign file: exit %d, stderr %q; want 1 naming it", code, errOut)
	}

	// Input and output may not overlap.
	for _, args := range [][]string{
		{"--data", src, "--out", src},
		{"--data", src, "--out", filepath.Join(src, "packed")},
		{"--data", "folder:" + filepath.Join(src, "a"), "--out", src},
		{"--data", "shards:" + out, "--out", out, "--overwrite"},
		{"--data", "shards:" + filepath.Join(out, "shard-*"), "--out", out, "--overwrite"},
	} {
		if _, errOut, code := guarded(t, append([]string{"pack"}, args...)...); code != 2 || !strings.Contains(errOut, "overlap") {
			t.Errorf("pack %v: exit %d, stderr %q; want 2 and overlap", args, code, errOut)
		}
	}
	if ds, err := datasets.Open("shards:"+out, "train"); err != nil || ds.Len() != 6 {
		t.Errorf("the pack given as input was touched: %v", err)
	} else {
		closeDataset(ds)
	}
}

// TestJSONErrors: with --json, a failing command still ends stdout with one JSON object that says
// what went wrong and the exit status.
func TestJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bench", "--json", "--data", "nosuch:thing"}, 1, "unknown kind"},
		{[]string{"bench", "--json", "--data", "x", "--batch", "0"}, 2, "--batch 0"},
		{[]string{"train", "--json", "--bogus"}, 2, "-bogus"},
		{[]string{"pack", "--json", "-q", "--data", "x"}, 2, "--out are required"},
	} {
		out, _, code := stoke(t, tc.args...)
		var v struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}
		if err := json.Unmarshal([]byte(lastLine(out)), &v); err != nil || code != tc.code || v.Code != tc.code || !strings.Contains(v.Error, tc.msg) {
			t.Errorf("stoke %v: exit %d, stdout %q; want its last line {\"error\": ...%s..., \"code\": %d}", tc.args, code, out, tc.msg, tc.code)
		}
	}
}

// TestUsageMistakes: flags out of range are usage errors (status 2) naming the flag.
func TestUsageMistakes(t *testing.T) {
	root := photoFolder(t, 2, 2, nil)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"bench", "--data", root, "--max-skipped", "-1"}, "--max-skipped -1"},
		{[]string{"bench", "--data", root, "--workers", "100000"}, "100000 workers"},
		{[]string{"bench", "--data", root, "--size", "100000"}, "--size 100000"},
		{[]string{"bench", "--data", root, "--memory", "lots"}, `"lots"`},
		{[]string{"train", "--data", root, "--warmup-epochs", "NaN"}, "--warmup-epochs NaN"},
		{[]string{"train", "--data", root, "--lr", "-1"}, "--lr -1"},
		{[]string{"train", "--data", root, "--val-split", "1.5"}, "--val-split 1.5"},
		{[]string{"train", "--data", root, "--classes", "-3"}, "--classes -3"},
		{[]string{"train", "--data", root, "--epochs", "0"}, "--epochs 0"},
		{[]string{"pack", "--data", root, "--out", t.TempDir(), "--workers", "5000"}, "--workers 5000"},
		{[]string{"pack", "--data", root, "--out", t.TempDir(), "--on-error", "ignore"}, `--on-error "ignore"`},
	} {
		_, errOut, code := stoke(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.flag) {
			t.Errorf("stoke %v: exit %d, stderr %q; want 2 naming %s", tc.args, code, errOut, tc.flag)
		}
	}
	var m memoryValue
	for in, want := range map[string]memoryValue{"8G": 8 << 30, "512M": 512 << 20, "1.5GiB": 3 << 29, "1000": 1000, "none": -1} {
		if err := m.Set(in); err != nil || m != want {
			t.Errorf("--memory %s = %d, %v; want %d", in, m, err, want)
		}
	}
}

// TestOneLine: joined errors keep every part on one line; a panic's stack stays out.
func TestOneLine(t *testing.T) {
	err := errors.Join(errors.New("invalid transform [a]"), errors.New("bad size"))
	if got := oneLine(err); got != "invalid transform [a]; bad size" {
		t.Errorf("oneLine(joined) = %q", got)
	}
	if got := oneLine(errors.New("panic: boom\ngoroutine 7 [running]:\nmain.f()")); got != "panic: boom; [stack omitted]" {
		t.Errorf("oneLine(panic) = %q", got)
	}
}

// TestInterrupts sends real signals to the test process: the first cancels the context, the
// second calls exit(130).
func TestInterrupts(t *testing.T) {
	var msgs bytes.Buffer
	var mu sync.Mutex
	exited := make(chan int, 1)
	ctx, stop := interrupts(lockedWriter{&mu, &msgs}, func(code int) { exited <- code })
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first SIGINT did not cancel the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("the first SIGINT exited with %d", code)
	default:
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit(%d); want 130", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second SIGINT did not exit")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(msgs.String(), "interrupt again") || !strings.Contains(msgs.String(), "quitting now") {
		t.Errorf("messages %q", msgs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTrainEvaluatesHonestly: without a test split, train refuses to evaluate on its training data
// unless told, says so when told, and evaluates on a held-out part with --val-split.
func TestTrainEvaluatesHonestly(t *testing.T) {
	root := photoFolder(t, 2, 5, nil) // no test/ folder
	base := []string{"train", "--data", root, "--size", "8", "--batch", "4", "--epochs", "1", "--workers", "1"}
	_, errOut, code := stoke(t, base...)
	if code != 2 || !strings.Contains(errOut, "no test split") || !strings.Contains(errOut, "--val-split") {
		t.Errorf("train without a test split: exit %d, stderr %q; want 2 pointing to --val-split", code, errOut)
	}
	out, errOut, code := stoke(t, append(base, "--eval-on-train", "--json")...)
	var r struct {
		Eval    string   `json:"eval"`
		TestAcc *float64 `json:"test_acc"`
	}
	if code != 0 || json.Unmarshal([]byte(lastLine(out)), &r) != nil || r.Eval != "train" || !strings.Contains(out,
		"not a test accuracy") || strings.Contains(out, "test accuracy ") {
		t.Errorf("--eval-on-train: exit %d, stdout %q, stderr %q; want eval \"train\" and the warning", code, out, errOut)
	}
	out, errOut, code = stoke(t, append(base, "--val-split", "0.2", "--json")...)
	if code != 0 || json.Unmarshal([]byte(lastLine(out)), &r) != nil || r.Eval != "validation" || r.TestAcc == nil || !strings.Contains(out,
		"validation accuracy") {
		t.Errorf("--val-split: exit %d, stdout %q, stderr %q; want eval \"validation\"", code, out, errOut)
	}
	// Every sample bad, skipped without a limit: the run fails.
	bad := t.TempDir()
	for _, p := range []string{"a/0.png", "a/1.png", "b/0.png"} {
		write(t, filepath.Join(bad, p), []byte("not an image"))
	}
	_, errOut, code = stoke(t, "train", "--data", bad, "--size", "8", "--batch", "2", "--epochs", "1", "--eval-on-train", "--on-error", "skip", "--max-skipped",
		"0")
	if code != 1 || !strings.Contains(errOut, "skipped") {
		t.Errorf("train on nothing but bad samples: exit %d, stderr %q; want 1", code, errOut)
	}
	// Labels beyond the class limit size no model; --classes declares the count.
	ds := filepath.Join(t.TempDir(), "sh")
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(ds, "s-%04d.tar")})
	if err != nil {
		t.Fatal(err)
	}
	px := make([]byte, 4*4*3)
	for i, label := range []int{0, 1, 0, 5000000} {
		px[0] = byte(i)
		if err := w.Write(loaders.Sample{Input: transforms.Input{Pixels: append([]byte(nil), px...), H: 4, W: 4, C: 3}, Label: label}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = stoke(t, "train", "--data", "shards:"+ds, "--size", "4", "--batch", "2", "--epochs", "1", "--eval-on-train")
	if code != 1 || !strings.Contains(errOut, "--classes") || !strings.Contains(errOut, "5000000") {
		t.Errorf("train with label 5000000: exit %d, stderr %q; want 1 pointing to --classes", code, errOut)
	}
	_, errOut, code = stoke(t, "train", "--data", "shards:"+ds, "--size", "4", "--batch", "2", "--epochs", "1", "--eval-on-train", "--classes", "2")
	if code != 1 || !strings.Contains(errOut, "label 5000000 not in [0, 2)") {
		t.Errorf("train --classes 2 with label 5000000: exit %d, stderr %q; want 1 naming the label", code, errOut)
	}
	if _, errOut, code = stoke(t, "train", "--data", "shards:"+ds, "--size", "4", "--batch", "2", "--epochs", "1", "--eval-on-train", "--classes", "2",
		"--on-error", "skip"); code != 0 {
		t.Errorf("train --classes 2 --on-error skip: exit %d, stderr %q; want 0", code, errOut)
	}
}

// TestTrainSmallFaults: --size with MNIST, a checkpoint folder that does not exist, stale temporary
// checkpoints, resuming with another seed or batch size.
func TestTrainSmallFaults(t *testing.T) {
	mn := mnistDir(t, 20, 12, 12)
	// The test split: the training files under MNIST's test names.
	for from, to := range map[string]string{"train-images-idx3-ubyte": "t10k-images-idx3-ubyte", "train-labels-idx1-ubyte": "t10k-labels-idx1-ubyte"} {
		b, err := os.ReadFile(filepath.Join(mn, from))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(mn, to), b)
	}
	if _, errOut, code := stoke(t, "train", "--data", "mnist:"+mn, "--size", "8", "--batch", "4", "--epochs", "1"); code != 0 {
		t.Errorf("train on MNIST with --size 8: exit %d: %s", code, errOut)
	}
	out, errOut, code := stoke(t, "train", "--data", "mnist:"+mn, "--batch", "4", "--epochs", "1", "--checkpoint", filepath.Join(t.TempDir(), "missing",
		"ck.bin"))
	if code != 1 || strings.Contains(out, "epoch 1/1") || !strings.Contains(errOut, "missing") {
		t.Errorf("--checkpoint into a missing folder: exit %d, stdout %q, stderr %q; want 1 before the first epoch", code, out, errOut)
	}
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck.bin")
	write(t, ck+".tmp12345", []byte("left by a killed save"))
	write(t, filepath.Join(dir, ".ck.bin.tmp999"), []byte("left by a killed save"))
	args := []string{"train", "--data", "mnist:" + mn, "--batch", "4", "--checkpoint", ck}
	if _, errOut, code := stoke(t, append(args, "--epochs", "1")...); code != 0 {
		t.Fatalf("train with --checkpoint: %s", errOut)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(m) != 0 {
		t.Errorf("temporary checkpoints %v left", m)
	}
	for _, tc := range []struct{ flag, value, msg string }{{"--seed", "2", "seed"}, {"--batch", "5", "steps"}} {
		_, errOut, code := stoke(t, "train", "--data", "mnist:"+mn, "--batch", "4", tc.flag, tc.value, "--epochs", "2", "--resume", ck)
		if code != 1 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("resume with %s %s: exit %d, stderr %q; want 1 and %q", tc.flag, tc.value, code, errOut, tc.msg)
		}
	}
	fifo := filepath.Join(dir, "ck.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		_, errOut, code := guarded(t, "train", "--data", "mnist:"+mn, "--batch", "4", "--epochs", "2", "--resume", fifo)
		if code != 1 || !strings.Contains(errOut, "not a regular file") {
			t.Errorf("--resume from a FIFO: exit %d, stderr %q; want 1 at once", code, errOut)
		}
	}
	if _, errOut, code := stoke(t, "train", "--data", "mnist:"+mn, "--batch", "4", "--epochs", "2", "--resume", ck); code != 0 {
		t.Errorf("resume with the same seed and batch: %s", errOut)
	}
}

// TestPackValidatesInput: a truncated JPEG is not passed through; --on-error skip leaves it out
// and counts it.
func TestPackValidatesInput(t *testing.T) {
	src := jpegFolder(t, 2, 3)
	p := filepath.Join(src, "a", "1.jpg")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	write(t, p, b[:len(b)/2])
	_, errOut, code := stoke(t, "pack", "--data", src, "--out", t.TempDir(), "--format", "jpeg")
	if code != 1 || !strings.Contains(errOut, "1.jpg") {
		t.Errorf("pack of a truncated JPEG: exit %d, stderr %q; want 1 naming it", code, errOut)
	}
	out := filepath.Join(t.TempDir(), "o")
	stdout, errOut, code := stoke(t, "pack", "--data", src, "--out", out, "--format", "jpeg", "--on-error", "skip", "--json", "-q")
	var r packResult
	if code != 0 || json.Unmarshal([]byte(lastLine(stdout)), &r) != nil || r.Skipped != 1 || r.Samples != 5 {
		t.Fatalf("pack --on-error skip: exit %d, stdout %q, stderr %q; want 5 samples and 1 skipped", code, stdout, errOut)
	}
	ds, err := datasets.Open(r.Spec, "train")
	if err != nil || ds.Len() != 5 {
		t.Fatalf("read back %s: %v", r.Spec, err)
	}
	closeDataset(ds)
}
