// Package grouptest starts data-parallel process groups inside a test: n ranks of package
// collective as goroutines of the test's process, on the loopback interface. Only tests import
// it.
package grouptest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/collective"
)

// Groups starts a group of n ranks on 127.0.0.1 and returns each rank's handle; the test's
// cleanup closes them.
func Groups(t testing.TB, n int) []*collective.Group {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	gs := make([]*collective.Group, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			gs[r], errs[r] = collective.Init(context.Background(), collective.Config{Rank: r, WorldSize: n, Addr: "127.0.0.1", Port: port, Timeout: time.Minute})
		})
	}
	wg.Wait()
	for _, g := range gs {
		if g != nil {
			t.Cleanup(func() { g.Close() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return gs
}
