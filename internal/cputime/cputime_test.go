package cputime

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessGrowsWithWork spins until the process has been charged 20 ms of CPU. On a loaded
// machine that can take many times 20 ms of wall time, so the bound is generous; a Process that
// does not move (or moves faster than the machine's cores can run) fails.
func TestProcessGrowsWithWork(t *testing.T) {
	c0, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatal("no CPU time on a unix system")
		}
		t.Skip("no CPU time here")
	}
	start := time.Now()
	x := 1.0
	for {
		for range 100000 {
			x = x*1.0000001 + 1e-9
		}
		c1, _ := Process()
		d, wall := c1-c0, time.Since(start)
		if d < 0 {
			t.Fatalf("CPU time went back by %v", -d)
		}
		if d > time.Duration(runtime.NumCPU())*wall+10*time.Millisecond {
			t.Fatalf("%v of CPU in %v of wall time on %d CPUs", d, wall, runtime.NumCPU())
		}
		if d >= 20*time.Millisecond {
			return
		}
		if wall > 30*time.Second {
			t.Fatalf("spinning for %v was charged only %v of CPU (x=%v)", wall, d, x)
		}
	}
}

// TestThreadGrowsWithWork: a goroutine locked to its thread is charged the CPU it spins, and not
// what another goroutine spins meanwhile.
func TestThreadGrowsWithWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := Thread()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("no thread CPU time on linux")
		}
		t.Skip("no thread CPU time here")
	}
	done := make(chan struct{})
	go func() { // a neighbour's spinning, which the thread must not be charged
		defer close(done)
		y := 1.0
		for range 20_000_000 {
			y = y*1.0000001 + 1e-9
		}
		_ = y
	}()
	start := time.Now()
	x := 1.0
	for {
		for range 100000 {
			x = x*1.0000001 + 1e-9
		}
		c1, _ := Thread()
		d, wall := c1-c0, time.Since(start)
		if d < 0 || d > wall+5*time.Millisecond {
			t.Fatalf("%v of thread CPU in %v of wall time (x=%v)", d, wall, x)
		}
		if d >= 20*time.Millisecond {
			break
		}
		if wall > 30*time.Second {
			t.Fatalf("spinning for %v was charged only %v of thread CPU", wall, d)
		}
	}
	<-done
}
