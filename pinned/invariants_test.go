//go:build stoke_invariants

package pinned

import (
	"context"
	"errors"
	"testing"
)

func TestInvariantsPanic(t *testing.T) {
	p := newPool(t, Config{SlotSize: 8, Allocator: Heap()})
	defer p.Close()
	s, _ := p.Acquire(context.Background())
	s.Release()
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || !errors.Is(err, ErrReleased) {
			t.Errorf("double Release with stoke_invariants recovered %v; want a panic with ErrReleased", r)
		}
	}()
	s.Release()
	t.Errorf("double Release with stoke_invariants returned; want a panic")
}
