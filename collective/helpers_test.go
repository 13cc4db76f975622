package collective

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	goleak.VerifyTestMain(m)
}

// quiet discards Init's warning of an unauthenticated job.
var quiet = log.New(io.Discard, "", 0)

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startGroups inits w ranks as goroutines of this process on a fresh port.
func startGroups(t testing.TB, w int, timeout time.Duration) []*Group {
	t.Helper()
	port := freePort(t)
	gs := make([]*Group, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for r := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs[r], errs[r] = Init(context.Background(), Config{Rank: r, WorldSize: w, Addr: "127.0.0.1", Port: port, Timeout: timeout, Log: quiet})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, g := range gs {
				if g != nil {
					g.Close()
				}
			}
			t.Fatalf("Init(rank %d of %d) = %v", r, w, err)
		}
	}
	t.Cleanup(func() {
		for _, g := range gs {
			g.Close()
		}
	})
	return gs
}

// onAll runs f on every group concurrently and returns the errors by rank.
func onAll(gs []*Group, f func(g *Group) error) []error {
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(g)
		}()
	}
	wg.Wait()
	return errs
}

// pattern is rank r's element i: varied magnitudes and signs, exact in float32.
func pattern(r, i int) float32 {
	x := math.Sin(float64(i)*0.37+float64(r)*1.3) * math.Pow(2, float64((i*7+r*3)%17-8))
	return float32(x)
}

// ringSum is what the ring computes for element i of n over w ranks: the
// segment's owner order (rank k, k+1, ...) added in float32.
func ringSum(w, n, i int, x func(r, i int) float32, op Op) float32 {
	k := 0
	for k+1 < w && (k+1)*n/w <= i {
		k++
	}
	acc := x(k, i)
	for j := 1; j < w; j++ {
		acc = x((k+j)%w, i) + acc
	}
	if op == Avg {
		acc /= float32(w)
	}
	return acc
}

// ringSum16 is ringSum in a 16-bit format: each hop adds in float32 and
// rounds to the format.
func ringSum16(w, n, i int, x func(r, i int) uint16, op Op, f format16) uint16 {
	k := 0
	for k+1 < w && (k+1)*n/w <= i {
		k++
	}
	acc := x(k, i)
	for j := 1; j < w; j++ {
		acc = f.round(f.widen(x((k+j)%w, i)) + f.widen(acc))
	}
	if op == Avg {
		acc = f.round(f.widen(acc) / float32(w))
	}
	return acc
}

// checkSum compares got with a float64 reference within float32 rounding
// and with the ring's exact order bit for bit.
func checkSum(w int, got []float32, op Op) error {
	n := len(got)
	for i, v := range got {
		var ref, abs float64
		for r := range w {
			ref += float64(pattern(r, i))
			abs += math.Abs(float64(pattern(r, i)))
		}
		if op == Avg {
			ref /= float64(w)
			abs /= float64(w)
		}
		tol := float64(w+1) * abs * 0x1p-24
		if math.Abs(float64(v)-ref) > tol {
			return fmt.Errorf("element %d of %d = %v; want %v within %g", i, n, v, ref, tol)
		}
		if want := ringSum(w, n, i, pattern, op); math.Float32bits(v) != math.Float32bits(want) {
			return fmt.Errorf("element %d of %d = %08x; want the ring order's %08x", i, n, math.Float32bits(v), math.Float32bits(want))
		}
	}
	return nil
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
