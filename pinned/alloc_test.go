package pinned

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func TestLockedAlloc(t *testing.T) {
	a := Locked()
	b, err := a.Alloc(10000)
	if err != nil {
		t.Fatalf("Locked().Alloc(10000) error: %v", err)
	}
	if len(b.Bytes) != 10000 {
		t.Errorf("len(Bytes) = %d; want 10000", len(b.Bytes))
	}
	if addr := uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes))); addr%4096 != 0 {
		t.Errorf("Locked block address %#x not page aligned", addr)
	}
	if b.Pinned != (b.Reason == "") {
		t.Errorf("Pinned = %v with Reason %q; want a Reason exactly when not pinned", b.Pinned, b.Reason)
	}
	for i := range b.Bytes {
		if b.Bytes[i] != 0 {
			t.Fatalf("Bytes[%d] = %d; want zeroed memory", i, b.Bytes[i])
		}
		b.Bytes[i] = byte(i)
	}
	if err := a.Free(b); err != nil {
		t.Errorf("Free() = %v; want nil", err)
	}
	for _, size := range []int{0, -1} {
		if _, err := a.Alloc(size); !errors.Is(err, ErrSize) {
			t.Errorf("Locked().Alloc(%d) = %v; want %v", size, err, ErrSize)
		}
		if _, err := Heap().Alloc(size); !errors.Is(err, ErrSize) {
			t.Errorf("Heap().Alloc(%d) = %v; want %v", size, err, ErrSize)
		}
	}
}

// TestLockedFallback: when mlock fails the allocator still returns usable memory, reports it
// unpinned, and says how to raise the limit; a pool built on it reports the same.
func TestLockedFallback(t *testing.T) {
	a := &lockedAllocator{lock: func([]byte) error { return errors.New("cannot allocate memory") }}
	p, err := NewPool(Config{SlotSize: 4096, Allocator: a})
	if err != nil {
		t.Fatalf("NewPool over a failing mlock: %v", err)
	}
	defer p.Close()
	st := p.Stats()
	if st.Pinned || p.Pinned() {
		t.Errorf("Stats().Pinned, Pinned() = %v, %v; want false, false when mlock fails", st.Pinned, p.Pinned())
	}
	for _, want := range []string{"cannot allocate memory", "RLIMIT_MEMLOCK", "ulimit -l", "limits.conf", "--ulimit memlock"} {
		if !strings.Contains(st.Reason, want) {
			t.Errorf("Stats().Reason = %q; want it to mention %q", st.Reason, want)
		}
	}
}

type fakeRegisterer struct {
	mu      sync.Mutex
	fail    bool
	live    map[*byte]int
	unknown int
}

func (f *fakeRegisterer) RegisterHost(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("driver says no")
	}
	f.live[unsafe.SliceData(b)] = len(b)
	return nil
}

func (f *fakeRegisterer) UnregisterHost(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[unsafe.SliceData(b)]; !ok {
		f.unknown++
	}
	delete(f.live, unsafe.SliceData(b))
	return nil
}

func TestRegistered(t *testing.T) {
	tests := []struct {
		name       string
		fail       bool
		wantPinned bool
		wantReason string
	}{
		{"registers", false, true, ""},
		{"registration fails", true, false, "driver says no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRegisterer{fail: tt.fail, live: map[*byte]int{}}
			p, err := NewPool(Config{SlotSize: 100, Allocator: Registered(Heap(), r)})
			if err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			if p.Pinned() != tt.wantPinned {
				t.Errorf("Pinned() = %v; want %v", p.Pinned(), tt.wantPinned)
			}
			if st.Pinned != tt.wantPinned || !strings.Contains(st.Reason, tt.wantReason) {
				t.Errorf("Stats() pinned, reason = %v, %q; want %v, containing %q", st.Pinned, st.Reason, tt.wantPinned, tt.wantReason)
			}
			if got, want := len(r.live), map[bool]int{true: 0, false: p.Len()}[tt.fail]; got != want {
				t.Errorf("registered blocks = %d; want %d", got, want)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if len(r.live) != 0 || r.unknown != 0 {
				t.Errorf("after Close: %d blocks still registered, %d unregistered that never were; want 0, 0", len(r.live), r.unknown)
			}
		})
	}
}
