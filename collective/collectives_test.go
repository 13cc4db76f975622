package collective

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestBroadcast(t *testing.T) {
	for _, w := range []int{2, 3, 4} {
		gs := startGroups(t, w, 5*time.Second)
		for _, g := range gs {
			g.ring.chunkBytes = 7
		}
		for root := range w {
			for _, n := range []int{0, 1, 6, 7, 8, 1000} {
				bufs := make([][]byte, w)
				errs := onAll(gs, func(g *Group) error {
					b := make([]byte, n)
					for i := range b {
						b[i] = byte(i*31 + g.Rank()*7)
					}
					bufs[g.Rank()] = b
					return g.Broadcast(context.Background(), b, root)
				})
				want := make([]byte, n)
				for i := range want {
					want[i] = byte(i*31 + root*7)
				}
				for r := range w {
					if errs[r] != nil {
						t.Fatalf("Broadcast(w=%d root=%d n=%d) on rank %d = %v", w, root, n, r, errs[r])
					}
					if !bytes.Equal(bufs[r], want) {
						t.Fatalf("Broadcast(w=%d root=%d n=%d): rank %d has %v; want root's %v", w, root, n, r, bufs[r], want)
					}
				}
			}
		}
	}
}

func TestBarrier(t *testing.T) {
	gs := startGroups(t, 3, 5*time.Second)
	done := make(chan int, 3)
	for _, g := range gs[:2] {
		go func() {
			if err := g.Barrier(context.Background()); err != nil {
				t.Error(err)
			}
			done <- g.Rank()
		}()
	}
	select {
	case r := <-done:
		t.Fatalf("rank %d left the barrier before rank 2 entered", r)
	case <-time.After(100 * time.Millisecond):
	}
	if err := gs[2].Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	<-done
}

func TestAgree(t *testing.T) {
	gs := startGroups(t, 3, 5*time.Second)
	for _, tc := range []struct {
		what  string
		value func(r int) string
		want  string
	}{
		{"seed", func(int) string { return "42" }, ""},
		{"batch", func(r int) string { return map[bool]string{true: "64", false: "32"}[r != 2] }, "collective: ranks disagree on batch: rank 0 has 64, rank 2 has 32"},
		{"model", func(r int) string { return fmt.Sprint("resnet", 18+r) }, "collective: ranks disagree on model: rank 0 has resnet18, rank 1 has resnet19"},
		{"empty", func(r int) string { return "" }, ""},
	} {
		errs := onAll(gs, func(g *Group) error { return g.Agree(context.Background(), tc.what, tc.value(g.Rank())) })
		for r, err := range errs {
			if tc.want == "" {
				if err != nil {
					t.Errorf("Agree(%s) on rank %d = %v", tc.what, r, err)
				}
				continue
			}
			if !errors.Is(err, ErrMismatch) || err.Error() != tc.want {
				t.Errorf("Agree(%s) on rank %d = %v; want %q wrapping ErrMismatch", tc.what, r, err, tc.want)
			}
		}
	}
	errs := onAll(gs, func(g *Group) error { return g.Agree(context.Background(), fmt.Sprint("what", g.Rank()), "1") })
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("Agree on different names, rank %d = %v; want ErrMismatch", r, err)
		}
	}
	long := string(make([]byte, MaxAgree))
	if err := gs[0].Agree(context.Background(), "x", long); err == nil {
		t.Errorf("Agree of %d bytes succeeded", MaxAgree+1)
	}
}

func TestSingleProcess(t *testing.T) {
	g, err := Init(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := []float32{1, 2}
	if err := g.AllReduce(context.Background(), b, Avg); err != nil || b[0] != 1 || b[1] != 2 {
		t.Fatalf("AllReduce alone = %v, %v; want the buffer unchanged", b, err)
	}
	if err := g.Agree(context.Background(), "x", "y"); err != nil {
		t.Fatal(err)
	}
	if err := g.Broadcast(context.Background(), []byte{1}, 1); err == nil {
		t.Fatal("Broadcast from root 1 of 1 succeeded")
	}
	if err := g.AllReduce(context.Background(), b, Op(9)); err == nil {
		t.Fatal("AllReduce with op 9 succeeded")
	}
	g.Close()
	if err := g.Barrier(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Barrier after Close = %v; want ErrClosed", err)
	}
}

func BenchmarkAllReduce(b *testing.B) {
	for _, w := range []int{2} {
		gs := startGroups(b, w, time.Minute)
		for _, n := range []int{1 << 10, 1 << 18, 1 << 22} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", w, 4*n), func(b *testing.B) {
				bufs := make([][]float32, w)
				for i := range bufs {
					bufs[i] = make([]float32, n)
				}
				done := make(chan error)
				start := make(chan bool)
				for i := 1; i < w; i++ {
					go func() {
						for range start {
							done <- gs[i].AllReduce(context.Background(), bufs[i], Sum)
						}
					}()
				}
				b.SetBytes(int64(4 * n))
				b.ReportAllocs()
				for b.Loop() {
					for i := 1; i < w; i++ {
						start <- true
					}
					if err := gs[0].AllReduce(context.Background(), bufs[0], Sum); err != nil {
						b.Fatal(err)
					}
					for i := 1; i < w; i++ {
						if err := <-done; err != nil {
							b.Fatal(err)
						}
					}
				}
				close(start)
			})
		}
	}
}
