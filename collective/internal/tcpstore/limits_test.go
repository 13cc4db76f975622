package tcpstore

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/hostiletest"
)

// settle waits until the server's pending bytes and connections have not
// changed for a while (it is still reading what the clients sent).
func settle(s *Server) {
	last, same := int64(-1), 0
	for i := 0; i < 200 && same < 5; i++ {
		s.mu.Lock()
		v := s.pending.Load()<<16 | int64(len(s.conns))
		s.mu.Unlock()
		if v == last {
			same++
		} else {
			last, same = v, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHalfSentQueries: 40 connections each send over half of a 32 MiB
// COMPARE_SET and stop. The store once held about 47 MiB for each (1,943 MiB for 40) and
// kept it after they closed. Now what all the queries being read hold is
// bounded by MaxPending (64 MiB here): the live heap grows by at most
// MaxPending plus 64 KiB per connection and 8 MiB of slack, and comes back
// within 4 MiB of where it started once they close.
func TestHalfSentQueries(t *testing.T) {
	const (
		conns   = 40
		value   = 32 << 20
		sent    = value/2 + 4<<20 // the first value and 4 MiB of the second
		pending = 64 << 20
	)
	s, err := Listen("127.0.0.1:0", Options{MaxRequest: value + 1<<10, MaxPending: pending})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chunk := make([]byte, 1<<20)
	before := hostiletest.HeapAlloc()

	// A COMPARE_SET of two 16 MiB values: 32 MiB, of which the first half is sent.
	head := []byte{byte(CompareSet)}
	head = binary.LittleEndian.AppendUint64(head, 2)
	head = append(head, "/k"...)
	head = binary.LittleEndian.AppendUint64(head, value/2)
	cs := hostiletest.Clients(t, s.Addr().String(), conns, func(_ int, c net.Conn) {
		if _, err := c.Write(head); err != nil {
			return
		}
		for n := 0; n < sent; n += len(chunk) {
			if n == value/2 {
				c.Write(binary.LittleEndian.AppendUint64(nil, value/2))
			}
			if _, err := c.Write(chunk); err != nil {
				return // refused: the store closed it
			}
		}
	})
	settle(s)
	held := hostiletest.HeapAlloc() - before
	bound := int64(pending + conns*64<<10 + 8<<20)
	t.Logf("40 half-sent 32 MiB queries: heap +%d MiB (bound %d MiB), pending %d MiB", held>>20, bound>>20, s.pending.Load()>>20)
	if held > bound {
		t.Errorf("the store holds %d MiB for %d half-sent queries; want at most %d MiB", held>>20, conns, bound>>20)
	}
	if p := s.pending.Load(); p > pending {
		t.Errorf("pending %d bytes; want at most %d", p, pending)
	}
	for _, c := range cs {
		c.Close()
	}
	settle(s)
	if p := s.pending.Load(); p != 0 {
		t.Errorf("pending %d bytes after every client closed; want 0", p)
	}
	if after := hostiletest.HeapAlloc() - before; after > 4<<20 {
		t.Errorf("the heap is %d MiB above where it started after every client closed; want within 4 MiB", after>>20)
	}
	runtime.KeepAlive(chunk)
}

// TestLimits: a query longer than MaxRequest and a connection past MaxConns
// are closed unanswered; the store serves the others.
func TestLimits(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Options{MaxConns: 2, MaxRequest: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	a := dial(t, s.Addr().String())
	if err := a.Set(ctx, "big", make([]byte, 2<<10)); err != nil {
		t.Fatal(err) // no reply to a SET: the close shows on the next query
	}
	if _, err := a.Check(ctx, "big"); err == nil {
		t.Errorf("a connection that sent a 2 KiB query with MaxRequest 1 KiB was answered")
	}
	b, c := dial(t, s.Addr().String()), dial(t, s.Addr().String())
	if _, err := b.Add(ctx, "n", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, "n", 1); err != nil {
		t.Fatal(err)
	}
	third, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a third connection with MaxConns 2: read %d, %v; want it closed (EOF)", n, err)
	}
	b.Close()
	settle(s)
	d := dial(t, s.Addr().String())
	if n, err := d.Add(ctx, "n", 1); err != nil || n != 3 {
		t.Errorf("Add on a connection after one closed = %d, %v; want 3", n, err)
	}
}
