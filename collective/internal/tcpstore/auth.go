package tcpstore

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"time"
)

// A stoke session: a Client of a stoke Server may open its connection with
// a hello, a query type torch does not use, before its first query:
//
//	client: 0xA5, flags (bit 0: the client holds a secret), 32-byte nonce Nc
//	server: 0 (the server has no secret; plain queries follow), or
//	        1, 32-byte nonce Ns, HMAC-SHA256(secret, "stoke store server" Nc Ns)
//	client: HMAC-SHA256(secret, "stoke store client" Ns Nc)
//
// After a secret hello every query is followed by a 32-byte tag,
// HMAC-SHA256(K, uint64 sequence number, the query's bytes), with the session
// key K = HMAC-SHA256(secret, "stoke store session" Nc Ns), the sequence
// counting the connection's queries from 0: the secret never crosses the
// wire, a proof is good for one connection, and a query is good only in its
// place on it. A Server with a secret closes a connection that sends
// anything but a hello first, a wrong proof or a wrong tag; a Server
// without one also serves torch's client, which sends no hello. Replies are
// not tagged: whoever can rewrite the connection's bytes can make a client
// fail, and Stoke's ring handshake proves the secret again, so a forged
// address joins no stranger to a job.
const (
	helloQuery  = 0xA5
	helloSecret = 1
	modeOpen    = 0
	modeSecret  = 1
	nonceSize   = 32
	tagSize     = sha256.Size
	// helloTimeout bounds the hello: a connection that does not finish it
	// in time is closed.
	helloTimeout = 10 * time.Second
)

// ErrAuth reports a hello that failed: the two ends do not hold the same
// secret (or only one holds one).
var ErrAuth = errors.New("authentication failed")

func mac(key []byte, label string, a, b []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	h.Write(a)
	h.Write(b)
	return h.Sum(nil)
}

// session is one authenticated connection's tagging state.
type session struct {
	h   hash.Hash
	seq uint64
	sum [tagSize]byte
}

func newSession(secret, nc, ns []byte) *session {
	return &session{h: hmac.New(sha256.New, mac(secret, "stoke store session", nc, ns))}
}

// tag returns the tag of the next query, whose bytes write feeds to the hash.
func (s *session) tag(write func(h hash.Hash)) []byte {
	s.h.Reset()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.seq)
	s.h.Write(b[:])
	write(s.h)
	s.seq++
	return s.h.Sum(s.sum[:0])
}

// hashQuery writes q's wire form (AppendQuery's bytes) to h piece by piece,
// so a tag is checked without a second copy of the query.
func hashQuery(h hash.Hash, q Query) {
	var b [9]byte
	b[0] = byte(q.Type)
	n := 1
	if q.Type == Check || q.Type == Wait {
		binary.LittleEndian.PutUint64(b[1:], uint64(len(q.Keys)))
		n = 9
	}
	h.Write(b[:n])
	for _, k := range q.Keys {
		binary.LittleEndian.PutUint64(b[:8], uint64(len(k)))
		h.Write(b[:8])
		io.WriteString(h, k)
	}
	for _, v := range q.Vals {
		binary.LittleEndian.PutUint64(b[:8], uint64(len(v)))
		h.Write(b[:8])
		h.Write(v)
	}
	if q.Type == Add {
		binary.LittleEndian.PutUint64(b[:8], uint64(q.Delta))
		h.Write(b[:8])
	}
}

// Hello opens a stoke session (a stoke Server only: torch's does not know
// the query). With a secret both ends prove they hold it and every later
// query is tagged; without one the server must have none either. It fails
// with ErrAuth when the two ends do not hold the same secret.
func (c *Client) Hello(ctx context.Context, secret []byte) error {
	return c.exchange(ctx, "hello", c.OpTimeout, func() error {
		nc := make([]byte, nonceSize)
		rand.Read(nc)
		flags := byte(0)
		if len(secret) > 0 {
			flags = helloSecret
		}
		if _, err := c.conn.Write(append([]byte{helloQuery, flags}, nc...)); err != nil {
			return err
		}
		mode, err := c.readFlag(c.r, modeOpen, modeSecret)
		if err != nil {
			return err
		}
		if mode == modeOpen {
			if len(secret) > 0 {
				return fmt.Errorf("%w: the store has no secret, and this client has one", ErrAuth)
			}
			return nil
		}
		b := make([]byte, nonceSize+tagSize)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return err
		}
		ns, proof := b[:nonceSize], b[nonceSize:]
		if len(secret) == 0 {
			return fmt.Errorf("%w: the store requires a secret, and this client has none", ErrAuth)
		}
		if !hmac.Equal(proof, mac(secret, "stoke store server", nc, ns)) {
			return fmt.Errorf("%w: the store's secret is not this client's", ErrAuth)
		}
		if _, err := c.conn.Write(mac(secret, "stoke store client", ns, nc)); err != nil {
			return err
		}
		c.sess = newSession(secret, nc, ns)
		return nil
	})
}

// hello answers a client's hello (its type byte peeked, not read) and
// returns the session, nil for a server without a secret.
func (s *Server) hello(c net.Conn, r *bufio.Reader) (*session, error) {
	b := make([]byte, 2+nonceSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	nc := b[2:]
	if s.secret == nil {
		_, err := c.Write([]byte{modeOpen})
		return nil, err
	}
	ns := make([]byte, nonceSize)
	rand.Read(ns)
	reply := append([]byte{modeSecret}, ns...)
	if _, err := c.Write(append(reply, mac(s.secret, "stoke store server", nc, ns)...)); err != nil {
		return nil, err
	}
	proof := make([]byte, tagSize)
	if _, err := io.ReadFull(r, proof); err != nil {
		return nil, err
	}
	if !hmac.Equal(proof, mac(s.secret, "stoke store client", ns, nc)) {
		return nil, ErrAuth
	}
	return newSession(s.secret, nc, ns), nil
}
