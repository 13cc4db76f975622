package tcpstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrTimeout reports a store call that ran past its deadline.
var ErrTimeout = errors.New("collective: store: timed out")

// Client is one connection to a c10d TCPStore server. Its methods serialise
// on one mutex; each is bounded by its ctx and by the client's OpTimeout. A
// call that fails leaves the connection closed: later calls fail at once.
type Client struct {
	// OpTimeout bounds each reply but Wait's (Dial sets it).
	OpTimeout time.Duration

	addr string
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	err  error
	sess *session // after a Hello with a secret
}

// Dial connects to the store at addr, retrying a refused connection until ctx
// ends or deadline passes (the server may not have started yet).
func Dial(ctx context.Context, addr string, deadline time.Time, opTimeout time.Duration) (*Client, error) {
	d := net.Dialer{}
	backoff := 10 * time.Millisecond
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			return &Client{OpTimeout: opTimeout, addr: addr, conn: c, r: bufio.NewReader(c)}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("collective: store: connect to %s: %w", addr, ctx.Err())
		}
		if !time.Now().Before(deadline) || !retryable(err) {
			if !retryable(err) && !isTimeout(err) {
				return nil, fmt.Errorf("collective: store: connect to %s: %w", addr, err)
			}
			return nil, fmt.Errorf("%w: connect to %s: no answer by the deadline: %w", ErrTimeout, addr, err)
		}
		t := time.NewTimer(min(backoff, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("collective: store: connect to %s: %w", addr, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func retryable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// Addr is the server's address as dialled.
func (c *Client) Addr() string { return c.addr }

// LocalAddr is this end of the connection: the interface that reaches the store.
func (c *Client) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = net.ErrClosed
	}
	return c.conn.Close()
}

// do sends q (tagged in a session) and reads its reply with read.
func (c *Client) do(ctx context.Context, q Query, timeout time.Duration, read func(r *bufio.Reader) error) error {
	what := q.Type.String()
	if len(q.Keys) == 1 {
		what += fmt.Sprintf(" %q", q.Keys[0])
	}
	return c.exchange(ctx, what, timeout, func() error {
		c.buf = AppendQuery(c.buf[:0], q)
		if c.sess != nil {
			c.buf = append(c.buf, c.sess.tag(func(h hash.Hash) { h.Write(c.buf) })...)
		}
		if _, err := c.conn.Write(c.buf); err != nil {
			return err
		}
		if read == nil {
			return nil
		}
		return read(c.r)
	})
}

// exchange runs f, which writes to and reads from the connection, under the
// client's lock, timeout and ctx; an error closes the connection.
func (c *Client) exchange(ctx context.Context, what string, timeout time.Duration, f func() error) (err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return fmt.Errorf("collective: store %s: %s: connection unusable after an earlier error: %w", c.addr, what, c.err)
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		if err != nil {
			c.err = err
			c.conn.Close()
			if ctx.Err() != nil {
				err = fmt.Errorf("collective: store %s: %s: %w", c.addr, what, ctx.Err())
			} else if isTimeout(err) {
				err = fmt.Errorf("%w after %v: store %s: %s", ErrTimeout, timeout.Round(time.Millisecond), c.addr, what)
			} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("collective: store %s: %s: the store closed the connection: %w", c.addr, what, err)
			} else {
				err = fmt.Errorf("collective: store %s: %s: %w", c.addr, what, err)
			}
		}
	}()
	return f()
}

func (c *Client) readFlag(r *bufio.Reader, want ...byte) (byte, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	for _, w := range want {
		if b == w {
			return b, nil
		}
	}
	return 0, fmt.Errorf("%w: answered byte 0x%02x", ErrProtocol, b)
}

func prefix(k string) string { return "/" + k }

// Set stores value under key.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	return c.do(ctx, Query{Type: Set, Keys: []string{prefix(key)}, Vals: [][]byte{value}}, c.OpTimeout, nil)
}

// CompareSet stores desired under key if its value is expected (or if it is
// absent and expected is empty) and returns the value stored after the call.
func (c *Client) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	var v []byte
	err := c.do(ctx, Query{Type: CompareSet, Keys: []string{prefix(key)}, Vals: [][]byte{expected, desired}}, c.OpTimeout, func(r *bufio.Reader) (err error) {
		v, err = readBytes(r, MaxValue)
		return err
	})
	return v, err
}

// Get waits up to timeout for key to exist, then returns its value.
func (c *Client) Get(ctx context.Context, key string, timeout time.Duration) ([]byte, error) {
	if err := c.Wait(ctx, []string{key}, timeout); err != nil {
		return nil, err
	}
	var v []byte
	err := c.do(ctx, Query{Type: Get, Keys: []string{prefix(key)}}, c.OpTimeout, func(r *bufio.Reader) (err error) {
		v, err = readBytes(r, MaxValue)
		return err
	})
	return v, err
}

// Add adds delta to the number stored under key (0 when absent) and returns
// the sum.
func (c *Client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	var n int64
	err := c.do(ctx, Query{Type: Add, Keys: []string{prefix(key)}, Delta: delta}, c.OpTimeout, func(r *bufio.Reader) error {
		u, err := readU64(r)
		n = int64(u)
		return err
	})
	return n, err
}

// Check reports whether every key exists.
func (c *Client) Check(ctx context.Context, keys ...string) (bool, error) {
	var ready bool
	err := c.do(ctx, Query{Type: Check, Keys: prefixed(keys)}, c.OpTimeout, func(r *bufio.Reader) error {
		b, err := c.readFlag(r, checkReady, checkNotReady)
		ready = b == checkReady
		return err
	})
	return ready, err
}

// Wait blocks until every key exists, up to timeout. A Wait that times out
// leaves the connection closed (the server's late reply would desynchronise it).
func (c *Client) Wait(ctx context.Context, keys []string, timeout time.Duration) error {
	return c.do(ctx, Query{Type: Wait, Keys: prefixed(keys)}, timeout, func(r *bufio.Reader) error {
		_, err := c.readFlag(r, stopWaiting)
		return err
	})
}

// NumKeys returns the number of keys in the store (torch's own included).
func (c *Client) NumKeys(ctx context.Context) (int64, error) {
	var n int64
	err := c.do(ctx, Query{Type: GetNumKeys}, c.OpTimeout, func(r *bufio.Reader) error {
		u, err := readU64(r)
		n = int64(u)
		return err
	})
	return n, err
}

// Delete removes key and reports whether it existed.
func (c *Client) Delete(ctx context.Context, key string) (bool, error) {
	var n uint64
	err := c.do(ctx, Query{Type: DeleteKey, Keys: []string{prefix(key)}}, c.OpTimeout, func(r *bufio.Reader) (err error) {
		n, err = readU64(r)
		return err
	})
	return n == 1, err
}

func prefixed(keys []string) []string {
	p := make([]string, len(keys))
	for i, k := range keys {
		p[i] = prefix(k)
	}
	return p
}
