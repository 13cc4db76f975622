package pinned

import (
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLockedFallbackRealLimit lowers RLIMIT_MEMLOCK below the allocation for real and checks that
// mlock fails and the allocator falls back. Root normally ignores the limit (CAP_IPC_LOCK), so
// the allocation runs on an OS thread that has dropped that capability (credentials are per
// thread on Linux; the thread is discarded afterwards).
func TestLockedFallbackRealLimit(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	const size = 4 << 20
	low := old
	low.Cur = 64 << 10
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Skipf("cannot lower RLIMIT_MEMLOCK: %v", err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)

	type result struct {
		b   Block
		err error
	}
	res := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread with dropped capabilities exits with us
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err == nil {
			data[0].Effective &^= 1 << unix.CAP_IPC_LOCK
			unix.Capset(&hdr, &data[0])
		}
		b, err := Locked().Alloc(size)
		res <- result{b, err}
	}()
	r := <-res
	if r.err != nil {
		t.Fatalf("Locked().Alloc(%d) under a %d-byte limit: %v; want a fallback", size, low.Cur, r.err)
	}
	defer Locked().Free(r.b)
	if r.b.Pinned {
		t.Skip("mlock succeeded despite the lowered limit (capability could not be dropped)")
	}
	if !strings.Contains(r.b.Reason, "65536 bytes") || !strings.Contains(r.b.Reason, "ulimit -l") {
		t.Errorf("Reason = %q; want the current limit (65536 bytes) and how to raise it", r.b.Reason)
	}
	r.b.Bytes[size-1] = 1 // the fallback memory is usable
}
