package tcpstore

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// state is the server's map and its waiters; the methods hold mu.
type state struct {
	mu      sync.Mutex
	data    map[string][]byte
	size    int
	waiters map[*waiter]struct{}
}

// waiter is one WAIT that found keys missing; ch is closed once they all exist.
type waiter struct {
	keys []string
	ch   chan struct{}
}

func newState() *state {
	return &state{data: map[string][]byte{}, waiters: map[*waiter]struct{}{}}
}

func (s *state) put(k string, v []byte) error {
	old, ok := s.data[k]
	grow := len(v) + len(k)
	if ok {
		grow -= len(old) + len(k)
	}
	if s.size+grow > MaxStore {
		return fmt.Errorf("collective: store: key %q: the store would hold more than %d bytes", k, MaxStore)
	}
	s.size += grow
	s.data[k] = v
	if !ok {
		s.wake()
	}
	return nil
}

// wake closes the channel of every waiter whose keys all exist now.
func (s *state) wake() {
	for w := range s.waiters {
		if s.has(w.keys) {
			close(w.ch)
			delete(s.waiters, w)
		}
	}
}

func (s *state) has(keys []string) bool {
	for _, k := range keys {
		if _, ok := s.data[k]; !ok {
			return false
		}
	}
	return true
}

// apply runs q and returns the reply, or a waiter to block on before replying
// STOP_WAITING.
func (s *state) apply(q Query) (reply []byte, w *waiter, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch q.Type {
	case Set:
		return nil, nil, s.put(q.Keys[0], q.Vals[0])
	case CompareSet:
		k, expected, desired := q.Keys[0], q.Vals[0], q.Vals[1]
		cur, ok := s.data[k]
		switch {
		case !ok && len(expected) == 0:
			if err := s.put(k, desired); err != nil {
				return nil, nil, err
			}
			return appendBytes(nil, desired), nil, nil
		case !ok:
			// torch 1.13 answers expected when the key is absent.
			return appendBytes(nil, expected), nil, nil
		case bytes.Equal(cur, expected):
			if err := s.put(k, desired); err != nil {
				return nil, nil, err
			}
			return appendBytes(nil, desired), nil, nil
		default:
			return appendBytes(nil, cur), nil, nil
		}
	case Get:
		v, ok := s.data[q.Keys[0]]
		if !ok {
			return nil, nil, fmt.Errorf("collective: store: get of key %q, which does not exist", q.Keys[0])
		}
		return appendBytes(nil, v), nil, nil
	case Add:
		k := q.Keys[0]
		var n int64
		if v, ok := s.data[k]; ok {
			n, err = strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("collective: store: add to key %q, whose value is not a number: %w", k, err)
			}
		}
		n += q.Delta
		if err := s.put(k, strconv.AppendInt(nil, n, 10)); err != nil {
			return nil, nil, err
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(n)), nil, nil
	case Check:
		if s.has(q.Keys) {
			return []byte{checkReady}, nil, nil
		}
		return []byte{checkNotReady}, nil, nil
	case Wait:
		if s.has(q.Keys) {
			return []byte{stopWaiting}, nil, nil
		}
		w := &waiter{keys: q.Keys, ch: make(chan struct{})}
		s.waiters[w] = struct{}{}
		return nil, w, nil
	case GetNumKeys:
		return binary.LittleEndian.AppendUint64(nil, uint64(len(s.data))), nil, nil
	case DeleteKey:
		k := q.Keys[0]
		v, ok := s.data[k]
		if !ok {
			return binary.LittleEndian.AppendUint64(nil, 0), nil, nil
		}
		s.size -= len(k) + len(v)
		delete(s.data, k)
		return binary.LittleEndian.AppendUint64(nil, 1), nil, nil
	}
	return nil, nil, fmt.Errorf("collective: store: %v is not supported", q.Type)
}

func (s *state) drop(w *waiter) {
	s.mu.Lock()
	delete(s.waiters, w)
	s.mu.Unlock()
}

// Options configure a Server.
type Options struct {
	// Secret, when set, makes every connection open with a hello that proves
	// it (see Client.Hello) and tag each query; torch's client cannot join.
	Secret []byte
	// MaxConns bounds the connections open at once (0: 1024); one more is
	// closed as soon as it is accepted.
	MaxConns int
	// MaxRequest bounds one query's bytes (0: MaxQuery); a longer one
	// closes its connection.
	MaxRequest int
	// MaxPending bounds the bytes of all the queries being read at once
	// (0: 64 MiB); a query that would take more closes its connection.
	MaxPending int
}

// queryTimeout bounds the arrival of a query's bytes after its first: a
// client that stops half-way is closed and what it held is released.
const queryTimeout = 30 * time.Second

// Server is a c10d TCPStore server.
type Server struct {
	secret []byte
	opts   Options
	// pending is the bytes admitted for the queries being read.
	pending atomic.Int64
	ln      net.Listener
	st      *state
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	once    sync.Once
}

// Listen starts a server on addr (host:port; port 0 picks one). Its accept
// loop and connection goroutines run until Close.
func Listen(addr string, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("collective: store: listen on %s: %w", addr, err)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 1024
	}
	if o.MaxRequest <= 0 {
		o.MaxRequest = MaxQuery
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 64 << 20
	}
	s := &Server{secret: o.Secret, opts: o, ln: ln, st: newState(), done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		if len(s.conns) >= s.opts.MaxConns {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve answers one connection's queries until it closes or sends bytes that
// are not the protocol; then the connection is closed.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	if s.secret != nil {
		c.SetReadDeadline(time.Now().Add(helloTimeout))
	}
	first, err := r.Peek(1)
	if err != nil {
		return
	}
	var sess *session
	if first[0] == helloQuery {
		if sess, err = s.hello(c, r); err != nil {
			return
		}
	} else if s.secret != nil {
		return // not a stoke client holding the secret
	}
	c.SetReadDeadline(time.Time{})
	var tag [tagSize]byte
	held := 0 // bytes this connection holds of s.pending
	defer func() { s.pending.Add(int64(-held)) }()
	admit := func(n int) error {
		if s.pending.Add(int64(n)) > int64(s.opts.MaxPending) {
			s.pending.Add(int64(-n))
			return errPending
		}
		held += n
		return nil
	}
	for {
		if _, err := r.Peek(1); err != nil {
			return
		}
		c.SetReadDeadline(time.Now().Add(queryTimeout))
		q, err := readQuery(r, s.opts.MaxRequest, admit)
		s.pending.Add(int64(-held))
		held = 0
		if err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		if sess != nil {
			if _, err := io.ReadFull(r, tag[:]); err != nil {
				return
			}
			if !hmac.Equal(tag[:], sess.tag(func(h hash.Hash) { hashQuery(h, q) })) {
				return
			}
		}
		reply, w, err := s.st.apply(q)
		if err != nil {
			return
		}
		if w != nil {
			select {
			case <-w.ch:
				reply = []byte{stopWaiting}
			case <-s.done:
				s.st.drop(w)
				return
			}
		}
		if len(reply) > 0 {
			if _, err := c.Write(reply); err != nil {
				return
			}
		}
	}
}

// errPending closes a connection whose query would take the bytes being
// read past Options.MaxPending.
var errPending = errors.New("collective: store: too many bytes being read at once")

// Drain waits until no client is connected, or d has passed: a server
// about to close lets its clients read what was last set.
func (s *Server) Drain(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

// Close stops the server, closes every connection and joins its goroutines.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		close(s.done)
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		err = s.ln.Close()
		s.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}
