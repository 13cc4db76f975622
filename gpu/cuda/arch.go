//go:build cuda

package cuda

/*
#include <nvrtc.h>

static int stoke_num_archs(void) {
	int n = 0;
	return nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS ? n : 0;
}
static void stoke_archs(int *out) { nvrtcGetSupportedArchs(out); }
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
)

// nvrtcArch is the virtual architecture to compile for on a device of compute capability cc
// ("9.0"): the device's own when this NVRTC knows it, else the newest older one it knows, whose
// PTX the driver JIT-compiles for the device (a GPU newer than the toolkit).
func nvrtcArch(cc string) (string, error) {
	major, minor, ok := strings.Cut(cc, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("cuda: compute capability %q", cc)
	}
	want := ma*10 + mi
	if err := nvrtcLib.Load(); err != nil {
		return "", err
	}
	n := int(C.stoke_num_archs())
	if n == 0 {
		return "", fmt.Errorf("cuda: nvrtc lists no supported architectures")
	}
	archs := make([]C.int, n)
	C.stoke_archs(&archs[0])
	best := 0
	for _, a := range archs {
		if int(a) <= want && int(a) > best {
			best = int(a)
		}
	}
	if best == 0 {
		return "", fmt.Errorf("cuda: compute capability %s is older than every architecture this NVRTC supports (oldest sm_%d)", cc, int(archs[0]))
	}
	return fmt.Sprintf("compute_%d", best), nil
}
