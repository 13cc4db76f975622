package pinned_test

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/pinned"
)

// A slot's lifecycle: acquire, fill, mark ready, hand to the copier, release after the copy.
func ExamplePool() {
	ctx := context.Background()
	pool, err := pinned.NewPool(pinned.Config{SlotSize: 1 << 20, Prefetch: 2, InFlight: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	slot, err := pool.Acquire(ctx) // blocks while all Slots() are in use
	if err != nil {
		fmt.Println(err)
		return
	}
	copy(slot.Bytes(), "a batch of images and labels")
	slot.Ready()
	slot.InFlight() // the copier enqueued the copy that reads it
	// ... once the copy's event has completed:
	fmt.Println(slot.Release())
	_, err = slot.State() // the handle is stale now
	fmt.Println(err)

	st := pool.Stats()
	fmt.Println(st.Slots, st.Free)
	// Output:
	// <nil>
	// pinned: slot 0: state: slot already released
	// 4 4
}
