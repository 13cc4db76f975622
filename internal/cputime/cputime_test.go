package cputime

import (
	"runtime"
	"testing"
	"time"
)

func TestProcessGrowsWithWork(t *testing.T) {
	c0, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatal("no CPU time on a unix system")
		}
		t.Skip("no CPU time here")
	}
	x := 1.0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x = x*1.0000001 + 1e-9
	}
	c1, _ := Process()
	if d := c1 - c0; d < 20*time.Millisecond || d > 10*time.Second {
		t.Errorf("50 ms of spinning took %v of CPU (x=%v)", d, x)
	}
}
