//go:build cuda

package cuda

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPTXCompileAndCache needs NVRTC but no GPU: scripts/cuda-check.sh runs it against the NVRTC
// of each CUDA version it checks.
func TestPTXCompileAndCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir()) // os.UserCacheDir on macOS
	ptx, err := ptxFor("compute_90", 13000)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ptx, ".target sm_90") {
		t.Errorf("ptxFor(compute_90) has no .target sm_90 line")
	}
	for _, name := range cudaKernels {
		if !strings.Contains(ptx, ".entry "+name+"(") {
			t.Errorf("ptxFor(compute_90) lacks kernel %s", name)
		}
	}
	if got, want := strings.Count(ptx, ".entry "), len(cudaKernels); got != want {
		t.Errorf("ptx has %d kernels; cudaKernels lists %d", got, want)
	}

	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "stoke", "kernels", "ops-*-compute_90-driver13000.ptx"))
	if len(files) != 1 {
		t.Fatalf("cache files %v; want one for compute_90, driver 13000", files)
	}
	// A second call must come from the cache: mark the cached copy and look for the mark.
	if err := os.WriteFile(files[0], []byte(ptx+"// cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := ptxFor("compute_90", 13000)
	if err != nil || !strings.HasSuffix(again, "// cached\n") {
		t.Errorf("second ptxFor = %d bytes, %v; want the cached copy", len(again), err)
	}
	// Another driver is another key: compiled afresh, cached beside it.
	other, err := ptxFor("compute_90", 12090)
	if err != nil || strings.HasSuffix(other, "// cached\n") {
		t.Errorf("ptxFor(driver 12090) = cached copy of driver 13000, %v; want a fresh compile", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "stoke", "kernels", "ops-*.ptx")); len(files) != 2 {
		t.Errorf("cache files %v; want two", files)
	}
}

func TestPTXCompileError(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, err := ptxFor("compute_1", 13000)
	if err == nil || !strings.Contains(err.Error(), "cuda: nvrtc compile") {
		t.Errorf("ptxFor(compute_1) = %v; want an nvrtc compile error", err)
	}
}

func TestNVRTCArch(t *testing.T) {
	tests := []struct{ cc, want string }{
		{"9.0", "compute_90"},
		{"8.0", "compute_80"},
		{"8.6", "compute_86"},
		{"99.9", ""}, // newer than any NVRTC: the newest it knows, checked below
	}
	for _, tt := range tests {
		got, err := nvrtcArch(tt.cc)
		if err != nil {
			t.Errorf("nvrtcArch(%q) = %v", tt.cc, err)
			continue
		}
		if tt.want != "" && got != tt.want {
			t.Errorf("nvrtcArch(%q) = %q; want %q", tt.cc, got, tt.want)
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(got, "compute_")); tt.want == "" && (err != nil || n < 90) {
			t.Errorf("nvrtcArch(%q) = %q; want the newest architecture (at least compute_90)", tt.cc, got)
		}
	}
	for _, cc := range []string{"1.0", "nine", "9"} {
		if got, err := nvrtcArch(cc); err == nil {
			t.Errorf("nvrtcArch(%q) = %q, nil; want an error", cc, got)
		}
	}
}

// TestCUDALoadRefused needs no GPU: a library that is not the one asked for (here libc) is
// refused, naming the first function it lacks, and one the loader cannot find with its message.
func TestCUDALoadRefused(t *testing.T) {
	for _, tt := range []struct{ soname, want string }{
		{"libc.so.6", "cannot load NVRTC: libc.so.6 has no function nvrtcAddNameExpression"},
		{"libstoke-absent.so.1", "cannot load NVRTC: libstoke-absent.so.1: cannot open shared object file"},
	} {
		l := &cudaLib{name: "NVRTC", soname: tt.soname, load: nvrtcLib.load}
		if err := l.Load(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("load %s as NVRTC = %v; want an error containing %q", tt.soname, err, tt.want)
		}
	}
}
