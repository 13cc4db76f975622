package gpu

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestCPUDeviceMemory: the CPU device holds its live buffers to the memory the host had available
// when it opened, as a GPU holds them to its own: an allocation past it is ErrOutOfMemory (and
// allocates nothing), freeing a buffer gives its bytes back, and a double free gives nothing.
func TestCPUDeviceMemory(t *testing.T) {
	d, err := Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cpu := d.(*cpuDevice)
	if runtime.GOOS != "linux" {
		t.Skip("the available memory is read from /proc and the cgroup files")
	}
	if cpu.avail <= 0 || cpu.avail > d.Info().Memory {
		t.Errorf("available memory %d; want within the host's %d", cpu.avail, d.Info().Memory)
	}
	if _, err := d.Alloc(int(cpu.avail + 1)); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc past the available memory = %v; want ErrOutOfMemory", err)
	}
	cpu.avail = 1 << 20
	a, err := d.Alloc(600 << 10)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Alloc(600 << 10)
	if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "600.0 KiB in use, 1.0 MiB available") {
		t.Fatalf("a second 600 KiB of 1 MiB = %v; want ErrOutOfMemory saying what is in use", err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); !errors.Is(err, ErrFreed) {
		t.Fatalf("double free = %v", err)
	}
	if used := cpu.used.Load(); used != 0 {
		t.Fatalf("%d bytes in use after the only buffer was freed (twice)", used)
	}
	b, err := d.Alloc(1 << 20)
	if err != nil {
		t.Fatalf("the whole memory once freed: %v", err)
	}
	b.Free()
}
