// Package tcpstore speaks the wire protocol of PyTorch 1.13's c10d TCPStore
// (torch/csrc/distributed/c10d/TCPStore.cpp): a Client that can join torch's
// server (torchrun's agent store, or TCPStore(is_master=True)) and a Server
// that torch's client can join.
//
// # Wire format
//
// A query is one byte, its type, then its arguments; every integer is
// little-endian (torch writes the host's native order; every platform it runs
// on is little-endian), every string or byte vector is a uint64 length then its
// bytes. 1.13 has no validation handshake: the client's first bytes are its
// first query.
//
//	SET          key, value                 -> (nothing)
//	COMPARE_SET  key, expected, desired     -> vector: the value now stored
//	                                           (desired when the key was absent and expected empty)
//	GET          key                        -> vector
//	ADD          key, int64 delta           -> int64 new value (stored as decimal text)
//	CHECK        uint64 n, n keys           -> byte 0 READY / 1 NOT_READY
//	WAIT         uint64 n, n keys           -> byte 0 STOP_WAITING, once every key exists
//	GETNUMKEYS                              -> int64
//	WATCH_KEY    key                        -> not supported here (the connection is closed)
//	DELETE_KEY   key                        -> int64 number of keys deleted
//
// torch's client prefixes user keys with "/" (set("foo") sends "/foo"); Client
// does the same, so a Go Get("foo") reads a Python set("foo").
//
// # Limits
//
// Everything read from a peer is bounded before it is allocated: a key is at
// most MaxKey bytes, a value MaxValue, a query at most MaxArgs keys and
// MaxQuery bytes in all (a Server's Options.MaxRequest), and a Server holds
// at most MaxStore bytes. A Server also bounds the bytes of all the queries
// it is reading at once (Options.MaxPending, 64 MiB) and its connections
// (Options.MaxConns): a query past either closes its connection, so
// clients that stop half-way through large queries hold at most MaxPending
// between them, and a query's bytes must all arrive within 30 s of its
// first. What a closed connection held is released.
//
// # Concurrency
//
// A Client is one connection and serialises its calls. A Server runs one
// goroutine per connection plus its accept loop; Close stops them all and
// joins them.
//
// # Ownership
//
// Values returned by Client are the caller's. The Server copies what it stores.
package tcpstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// QueryType is the first byte of a query (torch 1.13's detail::QueryType).
type QueryType uint8

// The query types, in torch 1.13's order.
const (
	Set QueryType = iota
	CompareSet
	Get
	Add
	Check
	Wait
	GetNumKeys
	WatchKey
	DeleteKey
)

const (
	checkReady    = 0
	checkNotReady = 1
	stopWaiting   = 0
)

// Bounds on what a peer may make us allocate.
const (
	MaxKey   = 4 << 10
	MaxValue = 16 << 20
	MaxArgs  = 1 << 16
	MaxQuery = 32 << 20
	MaxStore = 256 << 20
)

// ErrProtocol reports bytes that are not the c10d store protocol.
var ErrProtocol = errors.New("collective: store: not the c10d TCPStore protocol")

func (q QueryType) String() string {
	names := [...]string{"set", "compare-set", "get", "add", "check", "wait", "get-num-keys", "watch-key", "delete-key"}
	if int(q) < len(names) {
		return names[q]
	}
	return fmt.Sprintf("query type %d", uint8(q))
}

// Query is one parsed query.
type Query struct {
	Type  QueryType
	Keys  []string // Set, CompareSet, Get, Add, DeleteKey, WatchKey: one; Check, Wait: n
	Vals  [][]byte // Set: value; CompareSet: expected, desired
	Delta int64    // Add
}

func readU64(r io.Reader) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// readBytes reads a length-prefixed vector of at most limit bytes, growing its
// buffer as bytes arrive so a claimed length alone allocates little.
func readBytes(r io.Reader, limit int) ([]byte, error) { return readBytesIn(r, limit, nil) }

// readBytesIn is readBytes that asks admit for the bytes each buffer adds
// before it allocates it (nil: no one to ask).
func readBytesIn(r io.Reader, limit int, admit func(n int) error) ([]byte, error) {
	n, err := readU64(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: a vector of %d bytes (at most %d)", ErrProtocol, n, limit)
	}
	const step = 64 << 10
	grow := func(c int) error {
		if admit == nil {
			return nil
		}
		return admit(c)
	}
	if err := grow(min(int(n), step)); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, min(int(n), step))
	for len(buf) < int(n) {
		k := min(int(n)-len(buf), step)
		if cap(buf)-len(buf) < k {
			// The old buffer is dropped for the new one: admit the difference.
			if err := grow(min(int(n), 2*cap(buf)+k) - cap(buf)); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), min(int(n), 2*cap(buf)+k))
			copy(nb, buf)
			buf = nb
		}
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+k]); err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+k]
	}
	return buf, nil
}

// ReadQuery parses one query from r. An io.EOF before its first byte is
// returned as io.EOF; a query cut short is io.ErrUnexpectedEOF.
func ReadQuery(r *bufio.Reader) (Query, error) { return readQuery(r, MaxQuery, nil) }

// readQuery is ReadQuery for a query of at most limit bytes, that asks admit
// for the bytes of each buffer before it allocates it (a key's twice: its
// buffer and its string), 16 more per key.
func readQuery(r *bufio.Reader, limit int, admit func(n int) error) (Query, error) {
	t, err := r.ReadByte()
	if err != nil {
		return Query{}, err
	}
	q := Query{Type: QueryType(t)}
	budget := limit
	key := func() error {
		b, err := readBytesIn(r, min(MaxKey, budget), admit)
		if err != nil {
			return err
		}
		if admit != nil {
			if err := admit(len(b) + 16); err != nil {
				return err
			}
		}
		budget -= len(b)
		q.Keys = append(q.Keys, string(b))
		return nil
	}
	val := func() error {
		b, err := readBytesIn(r, min(MaxValue, budget), admit)
		if err != nil {
			return err
		}
		budget -= len(b)
		q.Vals = append(q.Vals, b)
		return nil
	}
	switch q.Type {
	case Set:
		if err = key(); err == nil {
			err = val()
		}
	case CompareSet:
		if err = key(); err == nil {
			if err = val(); err == nil {
				err = val()
			}
		}
	case Get, DeleteKey, WatchKey:
		err = key()
	case Add:
		if err = key(); err == nil {
			var d uint64
			d, err = readU64(r)
			q.Delta = int64(d)
		}
	case Check, Wait:
		var n uint64
		if n, err = readU64(r); err == nil {
			if n > MaxArgs {
				return Query{}, fmt.Errorf("%w: %v of %d keys (at most %d)", ErrProtocol, q.Type, n, MaxArgs)
			}
			for i := uint64(0); i < n && err == nil; i++ {
				err = key()
			}
		}
	case GetNumKeys:
	default:
		return Query{}, fmt.Errorf("%w: unknown query type %d", ErrProtocol, t)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Query{}, err
	}
	return q, nil
}

// appendBytes appends a length-prefixed vector.
func appendBytes(dst, b []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendQuery appends q's wire form to dst.
func AppendQuery(dst []byte, q Query) []byte {
	dst = append(dst, byte(q.Type))
	switch q.Type {
	case Check, Wait:
		dst = binary.LittleEndian.AppendUint64(dst, uint64(len(q.Keys)))
	}
	for _, k := range q.Keys {
		dst = appendBytes(dst, []byte(k))
	}
	for _, v := range q.Vals {
		dst = appendBytes(dst, v)
	}
	if q.Type == Add {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(q.Delta))
	}
	return dst
}
