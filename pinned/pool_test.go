package pinned

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countingAllocator wraps Heap and counts live blocks.
type countingAllocator struct {
	live  atomic.Int64
	fails int // Alloc fails after this many successes when > 0
	n     atomic.Int64
}

func (c *countingAllocator) Alloc(size int) (Block, error) {
	if c.fails > 0 && c.n.Add(1) > int64(c.fails) {
		return Block{}, errors.New("out of memory")
	}
	b, err := Heap().Alloc(size)
	if err == nil {
		c.live.Add(1)
	}
	return b, err
}

func (c *countingAllocator) Free(b Block) error {
	c.live.Add(-1)
	return nil
}

// skipIfInvariants skips tests that check the errors returned for deliberate misuse: built with
// stoke_invariants, misuse panics instead (TestInvariantsPanic covers that).
func skipIfInvariants(t *testing.T) {
	t.Helper()
	if invariantsPanic {
		t.Skip("misuse panics with the stoke_invariants tag")
	}
}

func newPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatalf("NewPool(%+v) error: %v", cfg, err)
	}
	return p
}

func TestConfig(t *testing.T) {
	tests := []struct {
		cfg       Config
		wantSlots int
		wantErr   error
	}{
		{Config{SlotSize: 1}, 4, nil},
		{Config{SlotSize: 1, Prefetch: 5, InFlight: 2}, 8, nil},
		{Config{SlotSize: 0}, 0, ErrSize},
		{Config{SlotSize: 1, Prefetch: -1}, 0, ErrSize},
		{Config{SlotSize: 1, InFlight: -1}, 0, ErrSize},
		// Counts that overflow Slots or cannot be allocated are refused, not a panic in make.
		{Config{SlotSize: 1, Prefetch: math.MaxInt}, 0, ErrSize},
		{Config{SlotSize: 1, InFlight: math.MaxInt / 2}, 0, ErrSize},
		{Config{SlotSize: 1, Prefetch: MaxSlots, InFlight: 1}, 0, ErrSize},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%+v.Validate() = %v; want %v", tt.cfg, err, tt.wantErr)
		}
		if err == nil {
			if got := tt.cfg.Slots(); got != tt.wantSlots {
				t.Errorf("%+v.Slots() = %d; want %d", tt.cfg, got, tt.wantSlots)
			}
		}
		if _, perr := NewPool(tt.cfg); !errors.Is(perr, tt.wantErr) {
			t.Errorf("NewPool(%+v) error = %v; want %v", tt.cfg, perr, tt.wantErr)
		}
	}
}

func TestNewPoolAllocFailureFreesEverything(t *testing.T) {
	a := &countingAllocator{fails: 2}
	_, err := NewPool(Config{SlotSize: 64, Allocator: a})
	if err == nil || !strings.Contains(err.Error(), "slot 2 of 4") {
		t.Fatalf("NewPool with failing allocator error = %v; want one naming slot 2 of 4", err)
	}
	if got := a.live.Load(); got != 0 {
		t.Errorf("live blocks after failed NewPool = %d; want 0", got)
	}
}

func TestLifecycle(t *testing.T) {
	skipIfInvariants(t)
	ctx := context.Background()
	a := &countingAllocator{}
	p := newPool(t, Config{SlotSize: 16, Prefetch: 1, InFlight: 1, Allocator: a})
	s, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		want error
		st   State
	}{
		{"in flight before ready", s.InFlight, ErrState, Filling},
		{"ready", s.Ready, nil, Ready},
		{"ready twice", s.Ready, ErrState, Ready},
		{"in flight", s.InFlight, nil, InFlight},
		{"ready while in flight", s.Ready, ErrState, InFlight},
	}
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.want) {
			t.Fatalf("%s = %v; want %v", st.name, err, st.want)
		}
		if got, err := s.State(); got != st.st || err != nil {
			t.Fatalf("after %s: State() = %v, %v; want %v, nil", st.name, got, err, st.st)
		}
	}
	if len(s.Bytes()) != 16 {
		t.Errorf("len(Bytes()) = %d; want 16", len(s.Bytes()))
	}
	if err := s.Release(); err != nil {
		t.Fatalf("Release() = %v; want nil", err)
	}
	stale := []struct {
		name string
		do   func() error
	}{
		{"release twice", s.Release},
		{"ready after release", s.Ready},
		{"in flight after release", s.InFlight},
		{"state after release", func() error { _, err := s.State(); return err }},
	}
	for _, st := range stale {
		if err := st.do(); !errors.Is(err, ErrReleased) {
			t.Errorf("%s = %v; want %v", st.name, err, ErrReleased)
		}
	}
	if s.Bytes() != nil {
		t.Errorf("Bytes() of a released slot != nil")
	}
	// Reacquire every slot: the old handle stays stale even when its slot comes back.
	var held []Slot
	for range p.Len() {
		h, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	if err := s.Release(); !errors.Is(err, ErrReleased) {
		t.Errorf("stale handle Release() after reacquire = %v; want %v", err, ErrReleased)
	}
	if err := (Slot{}).Release(); !errors.Is(err, ErrState) {
		t.Errorf("zero Slot Release() = %v; want %v", err, ErrState)
	}
	for _, h := range held {
		if err := h.Release(); err != nil {
			t.Errorf("Release() = %v; want nil", err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close() = %v; want nil", err)
	}
	if got := a.live.Load(); got != 0 {
		t.Errorf("live blocks after Close = %d; want 0", got)
	}
}

func TestPoison(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, Config{SlotSize: 32, Allocator: Heap(), Poison: true})
	defer p.Close()
	s, _ := p.Acquire(ctx)
	mem := s.Bytes()
	copy(mem, "payload")
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if want := bytes.Repeat([]byte{PoisonByte}, 32); !bytes.Equal(mem, want) {
		t.Errorf("released slot memory = %x; want all %#x", mem, PoisonByte)
	}
}

func TestAcquireBlocksAndCancels(t *testing.T) {
	skipIfInvariants(t)
	p := newPool(t, Config{SlotSize: 8, Prefetch: 1, InFlight: 1, Allocator: Heap()})
	ctx := context.Background()
	var held []Slot
	for range p.Len() {
		s, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire on an exhausted pool = %v; want %v", err, context.DeadlineExceeded)
	}
	got := make(chan Slot)
	go func() {
		s, err := p.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	time.Sleep(5 * time.Millisecond)
	held[1].Release()
	s := <-got
	if s.Index() != held[1].Index() {
		t.Errorf("Acquire after Release got slot %d; want %d", s.Index(), held[1].Index())
	}
	st := p.Stats()
	if st.MaxInUse != 3 || st.Filling != 3 || st.Acquired != 4 || st.AcquireWait <= 0 {
		t.Errorf("Stats() = %+v; want MaxInUse 3, Filling 3, Acquired 4, AcquireWait > 0", st)
	}
	// Close wakes a blocked Acquire and reports the leaked slots.
	done := make(chan error)
	go func() { _, err := p.Acquire(ctx); done <- err }()
	time.Sleep(5 * time.Millisecond)
	err := p.Close()
	if !errors.Is(err, ErrLeaked) || !strings.Contains(err.Error(), "3 of 3 slots") {
		t.Errorf("Close() with 3 slots held = %v; want ErrLeaked naming 3 of 3 slots", err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire blocked across Close = %v; want %v", err, ErrClosed)
	}
	if _, err := p.Acquire(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v; want %v", err, ErrClosed)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}

func TestReleaseAfterCloseFreesLeakedSlots(t *testing.T) {
	skipIfInvariants(t)
	a := &countingAllocator{}
	p := newPool(t, Config{SlotSize: 8, Allocator: a})
	s, _ := p.Acquire(context.Background())
	s.Ready()
	s.InFlight()
	if err := p.Close(); !errors.Is(err, ErrLeaked) || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("Close() = %v; want ErrLeaked naming the in-flight slot", err)
	}
	if got := a.live.Load(); got != 1 {
		t.Errorf("live blocks after Close with one slot in flight = %d; want 1 (its copy may still read it)", got)
	}
	if err := s.Release(); err != nil {
		t.Errorf("Release() after Close = %v; want nil", err)
	}
	if got := a.live.Load(); got != 0 {
		t.Errorf("live blocks after releasing the leaked slot = %d; want 0", got)
	}
}

// TestPoolStress: many producers cycle slots with random delays; no slot is ever held twice and
// no more than Len() are out at once.
func TestPoolStress(t *testing.T) {
	p := newPool(t, Config{SlotSize: 64, Prefetch: 2, InFlight: 2, Allocator: Heap()})
	ctx := context.Background()
	var out atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 200 {
				s, err := p.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n := out.Add(1); n > int32(p.Len()) {
					t.Errorf("%d slots out; want <= %d", n, p.Len())
				}
				mark := bytes.Repeat([]byte{byte(g), byte(i)}, 32)
				copy(s.Bytes(), mark)
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
				}
				s.Ready()
				s.InFlight()
				if !bytes.Equal(s.Bytes(), mark) {
					t.Errorf("slot %d overwritten while held by goroutine %d", s.Index(), g)
				}
				out.Add(-1)
				if err := s.Release(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if st := p.Stats(); st.Free != p.Len() || st.Acquired != 1600 {
		t.Errorf("Stats() after stress = %+v; want all %d free, 1600 acquired", st, p.Len())
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}
