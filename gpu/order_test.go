package gpu

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestRandomCrossStreamOrder enqueues random host functions, events and cross-stream waits on
// several streams, with random delays inside the functions, and checks the execution log: every
// stream runs its work in order, and work enqueued after s.Wait(e) runs after everything that was
// enqueued before e on e's stream.
func TestRandomCrossStreamOrder(t *testing.T) {
	for seed := range uint64(5) {
		d := openCPU(t)
		const nStreams, nOps = 4, 300
		streams := make([]Stream, nStreams)
		for i := range streams {
			streams[i] = newStream(t, d)
		}
		rnd := rand.New(rand.NewPCG(seed, 2))
		var mu sync.Mutex
		pos := map[int]int{} // op id -> position in the execution log
		type mark struct {
			ev    Event
			after int // id of the last host op enqueued on its stream before the event; -1 if none
		}
		var marks []mark
		lastOp := make([]int, nStreams)
		for i := range lastOp {
			lastOp[i] = -1
		}
		mustFollow := map[int][]int{} // op id -> op ids that must have run before it
		pendingWaits := make([][]int, nStreams)
		id := 0
		for range nOps {
			s := rnd.IntN(nStreams)
			switch k := rnd.IntN(10); {
			case k < 6:
				op := id
				id++
				delay := time.Duration(rnd.IntN(50)) * time.Microsecond
				streams[s].Host(func() error {
					time.Sleep(delay)
					mu.Lock()
					pos[op] = len(pos)
					mu.Unlock()
					return nil
				})
				deps := append([]int(nil), pendingWaits[s]...)
				if lastOp[s] >= 0 {
					deps = append(deps, lastOp[s])
				}
				mustFollow[op] = deps
				lastOp[s] = op
			case k < 8:
				e, err := streams[s].Record()
				if err != nil {
					t.Fatal(err)
				}
				marks = append(marks, mark{e, lastOp[s]})
			default:
				if len(marks) == 0 {
					continue
				}
				m := marks[rnd.IntN(len(marks))]
				if err := streams[s].Wait(m.ev); err != nil {
					t.Fatal(err)
				}
				if m.after >= 0 {
					pendingWaits[s] = append(pendingWaits[s], m.after)
				}
			}
		}
		for _, s := range streams {
			if err := s.Synchronize(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for op, deps := range mustFollow {
			for _, dep := range deps {
				if pos[dep] >= pos[op] {
					t.Errorf("seed %d: op %d ran at %d, before op %d (at %d) that it must follow", seed, op, pos[op], dep, pos[dep])
				}
			}
		}
		for _, s := range streams {
			s.Close()
		}
	}
}
