// Package hostiletest holds the helpers of tests that measure what hostile clients make a server
// hold (tcpstore's half-sent queries, collective's stranger): many connections sending at once,
// and the live heap before, during and after. Only test files import it.
package hostiletest

import (
	"net"
	"runtime"
	"sync"
	"testing"
)

// HeapAlloc is the live heap, in bytes, after a collection.
func HeapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// Clients dials n TCP connections to addr and runs send on each, concurrently, returning once every
// send has: the connections stay open, the caller's to close. A failed dial fails the test.
func Clients(t testing.TB, addr string, n int, send func(i int, c net.Conn)) []net.Conn {
	t.Helper()
	cs := make([]net.Conn, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(i, c)
		}()
	}
	return cs
}
