//go:build cuda

package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gorgonia.org/cu/nvrtc"
)

// opsSource is the CUDA C of every kernel of the CUDA op set.
//
//go:embed ops.cu
var opsSource string

// nvrtcOptions are the compiler options (scripts/cuda-check.sh compiles ops.cu through ptxFor).
// --fmad=false keeps a*b+c two roundings, as in Go, so elementwise ops match the CPU op set.
func nvrtcOptions(arch string) []string {
	return []string{"--gpu-architecture=" + arch, "--std=c++17", "--fmad=false"}
}

// ptxFor returns the PTX of opsSource for arch ("compute_90"), compiling it with NVRTC on a cache
// miss. The cache lives under os.UserCacheDir()/stoke/kernels, keyed by the hash of the source,
// the options and the NVRTC version, and by arch and driver version (cu.Version(): a new driver
// may JIT the same PTX differently, an old one may reject it); without a cache directory (or if
// writing fails) it compiles every time, which costs a second or two, not correctness. It needs
// NVRTC (loaded here) but no device.
func ptxFor(arch string, driver int) (string, error) {
	if err := nvrtcLib.Load(); err != nil {
		return "", err
	}
	major, minor, err := nvrtc.Version()
	if err != nil {
		return "", fmt.Errorf("cuda: nvrtc version: %w", err)
	}
	opts := nvrtcOptions(arch)
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00nvrtc %d.%d", opsSource, strings.Join(opts, " "), major, minor)))
	name := fmt.Sprintf("ops-%s-%s-driver%d.ptx", hex.EncodeToString(sum[:8]), arch, driver)
	var path string
	if dir, err := os.UserCacheDir(); err == nil {
		path = filepath.Join(dir, "stoke", "kernels", name)
		if ptx, err := os.ReadFile(path); err == nil && len(ptx) > 0 {
			return string(ptx), nil
		}
	}
	ptx, err := compile(opts)
	if err != nil {
		return "", err
	}
	if path != "" {
		writeCache(path, ptx)
	}
	return ptx, nil
}

func compile(opts []string) (string, error) {
	prog, err := nvrtc.CreateProgram(opsSource, "ops.cu")
	if err != nil {
		return "", fmt.Errorf("cuda: nvrtc create program: %w", err)
	}
	defer prog.Destroy()
	if err := prog.Compile(opts...); err != nil {
		log, _ := prog.GetLog()
		return "", fmt.Errorf("cuda: nvrtc compile ops.cu %v: %w\n%s", opts, err, log)
	}
	ptx, err := prog.GetPTX()
	if err != nil {
		return "", fmt.Errorf("cuda: nvrtc get ptx: %w", err)
	}
	return ptx, nil
}

// writeCache stores ptx atomically (a reader never sees half a file); failure only costs a
// recompilation next time, so it is not reported.
func writeCache(path, ptx string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ops-*.ptx")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(ptx)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		_ = os.Remove(tmp.Name())
	}
}
