//go:build cuda

package cuda

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
)

// standIn opens the CUDA device and skips unless it is the CPU stand-in of internal/cudainc/sim
// (on a GPU these checks are compute-sanitizer's).
func standIn(t *testing.T) (*cudaOps, gpu.Stream, gpu.Device) {
	t.Helper()
	dev, err := gpu.Open("cuda")
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	if !strings.Contains(dev.Info().Name, "stand-in") {
		t.Skipf("%s is not the CPU stand-in", dev.Info().Name)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := cudaFor(dev) // the backend itself, without the checks of For
	if err != nil {
		t.Fatal(err)
	}
	return ops.(*cudaOps), s, dev
}

// TestCUDAStandInChecks: the stand-in refuses a launch whose arguments do not match the kernel's
// signature, and a kernel that writes past its buffer aborts the process with a report naming
// the kernel, block and thread (run in a child process).
func TestCUDAStandInChecks(t *testing.T) {
	t.Setenv("STOKE_CUDA_EXACT_ALLOC", "1") // the guard page right after the buffer's last byte
	if os.Getenv("STOKE_STANDIN_OOB") == "1" {
		o, s, dev := standIn(t)
		buf, err := dev.Alloc(4 * 1000)
		if err != nil {
			t.Fatal(err)
		}
		p, _, _ := Pointer(buf)
		cs, _, _ := DriverStream(s)
		// One element too many: the kernel's bounds check is right, the count is wrong.
		if err := o.launchN(cs, "fill_f32", 1001, parg(p), iarg(1001), farg(1)); err != nil {
			t.Fatal(err)
		}
		_ = s.Synchronize(context.Background())
		t.Fatal("the out-of-bounds write went unnoticed")
	}
	o, s, dev := standIn(t)
	buf, err := dev.Alloc(4 * 10)
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := Pointer(buf)
	cs, _, _ := DriverStream(s)
	if err := o.launchN(cs, "fill_f32", 10, parg(p), iarg(10)); err == nil {
		t.Error("launch of fill_f32 with 2 of its 3 arguments succeeded; want an error")
	}
	if err := o.launchN(cs, "fill_f32", 10, parg(p), iarg(10), farg(1), iarg(0)); err == nil {
		t.Error("launch of fill_f32 with 4 arguments succeeded; want an error")
	}
	if err := o.launchN(cs, "fill_f32", 10, parg(p), iarg(10), farg(1)); err != nil {
		t.Errorf("launch of fill_f32 with its 3 arguments = %v", err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestCUDAStandInChecks$")
	cmd.Env = append(os.Environ(), "STOKE_STANDIN_OOB=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child that writes past its buffer exited 0:\n%s", out)
	}
	for _, want := range []string{"invalid write", "by kernel fill_f32", "thread (", "0 bytes past the end of a 4000-byte device allocation"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's report lacks %q:\n%.2000s", want, out)
		}
	}
}
