package pinned

import (
	"runtime"
	"testing"
)

func TestSystemMemory(t *testing.T) {
	m := SystemMemory()
	if runtime.GOOS != "linux" {
		t.Skip("SystemMemory reads /proc and the cgroup files")
	}
	// Every machine that runs the tests has between 256 MiB and 64 TiB.
	if m < 256<<20 || m > 64<<40 {
		t.Fatalf("SystemMemory() = %d; want a plausible machine size", m)
	}
}
