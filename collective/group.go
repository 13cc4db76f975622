package collective

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stoke-ml/stoke/collective/internal/tcpstore"
)

// Group is a set of processes joined in a ring. Its collectives are
// serialised: calls from several goroutines run one at a time, in the order
// they take the group's lock, so every rank must issue the same collectives
// in the same order (from one goroutine, or ordered by the caller).
type Group struct {
	rank, size int
	timeout    time.Duration
	server     *tcpstore.Server // rank 0's store when it hosts one
	ring       *ring            // nil when size is 1

	mu     sync.Mutex // serialises collectives; guards plan
	plan   plan
	closed bool
}

// Rank is this process's rank.
func (g *Group) Rank() int { return g.rank }

// Size is the world size.
func (g *Group) Size() int { return g.size }

// storeOpTimeout bounds one store reply (Wait excepted): a store answers in
// milliseconds, and a server that speaks another protocol may never answer.
const storeOpTimeout = 10 * time.Second

// Init rendezvouses through the store and connects the ring: rank r sends to
// rank r+1 and receives from rank r-1. With WorldSize 1 it needs no network.
// Everything is bounded by ctx and cfg.Timeout.
func Init(ctx context.Context, cfg Config) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Group{rank: cfg.Rank, size: cfg.WorldSize, timeout: cfg.Timeout}
	if g.size == 1 {
		return g, nil
	}
	deadline := time.Now().Add(cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	storeAddr := net.JoinHostPort(cfg.Addr, strconv.Itoa(cfg.Port))
	if cfg.Secret == "" && cfg.Rank == 0 {
		logf := log.Printf
		if cfg.Log != nil {
			logf = cfg.Log.Printf
		}
		logf("collective: warning: %s is not set: the job is unauthenticated; any process that reaches the store at %s or a rank's ring port can join or stop it (set the same %s on every rank)",
			SecretEnv, storeAddr, SecretEnv)
	}
	if !cfg.UseAgentStore && cfg.Rank == 0 {
		s, err := listenStore(ctx, cfg)
		if err != nil {
			return nil, err
		}
		g.server = s
	}
	r, err := rendezvous(ctx, cfg, storeAddr, deadline)
	if err != nil {
		if g.server != nil {
			// rendezvous published why: give the ranks still polling the
			// store (every 100 ms at most) time to read it.
			g.server.Drain(time.Second)
			g.server.Close()
		}
		return nil, err
	}
	g.ring = r
	return g, nil
}

// listenStore starts rank 0's store on MASTER_ADDR's own address (loopback
// for 127.0.0.1 or localhost), never on every interface: only the network
// the other ranks are told to use reaches it. MASTER_ADDR must name an
// address of rank 0's machine.
func listenStore(ctx context.Context, cfg Config) (*tcpstore.Server, error) {
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("collective: rendezvous: rank 0: host the store: MASTER_ADDR %q: %w", cfg.Addr, err)
	}
	var errs []error
	for _, ip := range ips {
		// Stoke's largest query is a CHECK of every rank's key (under 40
		// bytes each; MaxArgs bounds the count); each rank holds one
		// connection during the rendezvous.
		o := tcpstore.Options{MaxConns: 2*cfg.WorldSize + 64, MaxRequest: 4 << 20}
		if cfg.Secret != "" {
			o.Secret = []byte(cfg.Secret)
		}
		s, err := tcpstore.Listen(net.JoinHostPort(ip.String(), strconv.Itoa(cfg.Port)), o)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("collective: rendezvous: rank 0: host the store on MASTER_ADDR %s (rank 0 hosts it: MASTER_ADDR must be an address of its machine): %w",
		cfg.Addr, errors.Join(errs...))
}

// rendezvous publishes this rank's ring address in the store, reads the
// others' and connects the ring.
func rendezvous(ctx context.Context, cfg Config, storeAddr string, deadline time.Time) (_ *ring, err error) {
	fail := func(kind error, format string, a ...any) error {
		return errf(kind, "collective: rendezvous: rank %d: "+format, append([]any{cfg.Rank}, a...)...)
	}
	opTimeout := min(storeOpTimeout, cfg.Timeout)
	c, err := tcpstore.Dial(ctx, storeAddr, deadline, opTimeout)
	if err != nil {
		if errors.Is(err, tcpstore.ErrTimeout) && !cfg.UseAgentStore {
			return nil, fail(ErrTimeout, "rank 0 hosts the store at %s and did not open it within %v (it failed before the rendezvous, or its MASTER_ADDR or MASTER_PORT is not this rank's): %w",
				storeAddr, cfg.Timeout, err)
		}
		if errors.Is(err, tcpstore.ErrTimeout) {
			return nil, fail(ErrTimeout, "store at %s: %w", storeAddr, err)
		}
		return nil, fail(nil, "store at %s: %w", storeAddr, err)
	}
	defer c.Close()
	storeErr := func(err error) error {
		switch {
		case errors.Is(err, tcpstore.ErrProtocol):
			return fail(ErrPeer, "%s does not speak the c10d store protocol: %w", storeAddr, err)
		case errors.Is(err, tcpstore.ErrTimeout):
			return fail(ErrTimeout, "store at %s: %w", storeAddr, err)
		case !cfg.UseAgentStore && cfg.Rank != 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
			return fail(ErrPeer, "rank 0, which hosts the store at %s, closed it without a cause (it exited or was killed): %w", storeAddr, err)
		}
		return fail(ErrPeer, "store at %s: %w", storeAddr, err)
	}
	pfx := fmt.Sprintf("stoke/attempt_%d/", cfg.RestartCount)
	abortKey := pfx + "abort"
	// owner: this rank 0 holds the job's keys (it may speak for the job);
	// stranger: this rank is of another job (what the job does is not its
	// business).
	owner, stranger := false, false
	defer func() {
		if err == nil || (cfg.Rank == 0 && !owner) || stranger {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if cfg.Rank == 0 {
			// Say why, for the ranks still waiting in the store: the
			// sentinel's index, a newline, the message.
			kind := 0
			for i, k := range abortKinds {
				if errors.Is(err, k) {
					kind = i
					break
				}
			}
			c.Set(actx, abortKey, []byte(strconv.Itoa(kind)+"\n"+err.Error()))
			return
		}
		// A rank that found a mismatch itself (a secret or a setting that
		// differs) keeps its own cause: rank 0's failure is its consequence.
		if errors.Is(err, ErrMismatch) {
			return
		}
		if kind, cause, ok := abortCause(actx, c, abortKey); ok {
			err = errf(kind, "collective: rendezvous: rank %d: rank 0 gave up: %s", cfg.Rank, strings.TrimPrefix(cause, "collective: rendezvous: rank 0: "))
		}
	}()
	if !cfg.UseAgentStore {
		// Rank 0's store: prove the secret, or agree there is none.
		if err := c.Hello(ctx, []byte(cfg.Secret)); err != nil {
			if errors.Is(err, tcpstore.ErrAuth) {
				return nil, fail(ErrMismatch, "%s differs from rank 0's: %w", SecretEnv, err)
			}
			return nil, storeErr(err)
		}
	}
	// A first query whose answer is one byte, 0 or 1: a server speaking
	// another protocol shows itself here.
	// Its key ends in a blank line, so an HTTP server answers at once (400).
	if _, err := c.Check(ctx, pfx+"probe\r\n\r\n"); err != nil {
		return nil, storeErr(err)
	}

	// waitFor polls until every key exists, rank 0 gives up (abortKey) or
	// the deadline passes (then timedOut says what was missing).
	waitFor := func(keys []string, timedOut func() error) error {
		backoff := 2 * time.Millisecond
		for {
			ok, err := c.Check(ctx, keys...)
			if err != nil {
				return storeErr(err)
			}
			if ok {
				return nil
			}
			if cfg.Rank != 0 {
				if ok, err := c.Check(ctx, abortKey); err != nil {
					return storeErr(err)
				} else if ok {
					return fail(ErrPeer, "rank 0 gave up") // the deferred func reads why
				}
			}
			if ctx.Err() != nil {
				return fail(nil, "%w", ctx.Err())
			}
			if !time.Now().Before(deadline) {
				return timedOut()
			}
			t := time.NewTimer(min(backoff, time.Until(deadline)))
			select {
			case <-ctx.Done():
				t.Stop()
				return fail(nil, "%w", ctx.Err())
			case <-t.C:
			}
			backoff = min(2*backoff, 100*time.Millisecond)
		}
	}

	// The job's identity, before this rank claims a place in it.
	jobKey := pfx + "job"
	job := cfg.JobID
	if cfg.Rank == 0 {
		if job == "" {
			var b [8]byte
			rand.Read(b[:])
			job = "stoke-" + hex.EncodeToString(b[:])
		}
		got, err := c.CompareSet(ctx, jobKey, nil, []byte(job))
		if err != nil {
			return nil, storeErr(err)
		}
		if string(got) != job {
			return nil, fail(ErrMismatch, "this rank 0 is of job %s, but the store at %s already serves job %s", job, storeAddr, got)
		}
	} else {
		err := waitFor([]string{jobKey}, func() error {
			return fail(ErrTimeout, "timed out after %v waiting for rank 0 at %s (it publishes the job's identity first)", cfg.Timeout, storeAddr)
		})
		if err != nil {
			return nil, err
		}
		got, err := c.Get(ctx, jobKey, opTimeout)
		if err != nil {
			return nil, storeErr(err)
		}
		if job != "" && string(got) != job {
			stranger = true
			return nil, fail(ErrMismatch, "this rank is of job %s, but rank 0 at %s is of job %s", job, storeAddr, got)
		}
		job = string(got)
	}

	var nonce [8]byte
	rand.Read(nonce[:])
	if cfg.Rank == 0 {
		var gid [8]byte
		rand.Read(gid[:])
		id := []byte(hex.EncodeToString(gid[:]))
		got, err := c.CompareSet(ctx, pfx+"gid", nil, id)
		if err != nil {
			return nil, storeErr(err)
		}
		if string(got) != string(id) {
			return nil, fail(ErrMismatch, "another process is rank 0 of attempt %d (group %s)", cfg.RestartCount, got)
		}
		owner = true
	}
	ip := c.LocalAddr().(*net.TCPAddr).IP
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip})
	if err != nil {
		return nil, fail(nil, "listen for the ring on %v: %w", ip, err)
	}
	defer ln.Close()
	me := fmt.Sprintf("%s %d %x", ln.Addr(), cfg.WorldSize, nonce)
	got, err := c.CompareSet(ctx, pfx+"rank/"+strconv.Itoa(cfg.Rank), nil, []byte(me))
	if err != nil {
		return nil, storeErr(err)
	}
	if string(got) != me {
		return nil, fail(ErrMismatch, "another process already claimed rank %d of job %s (%s)", cfg.Rank, job, got)
	}
	arrived, err := c.Add(ctx, pfx+"arrived", 1)
	if err != nil {
		return nil, storeErr(err)
	}
	if arrived > int64(cfg.WorldSize) {
		return nil, fail(ErrMismatch, "%d processes arrived, but the world size is %d", arrived, cfg.WorldSize)
	}

	keys := make([]string, cfg.WorldSize)
	for i := range keys {
		keys[i] = pfx + "rank/" + strconv.Itoa(i)
	}
	err = waitFor(keys, func() error {
		var missing []string
		for i, k := range keys {
			if ok, err := c.Check(ctx, k); err == nil && !ok {
				missing = append(missing, strconv.Itoa(i))
			}
		}
		n, _ := c.Add(ctx, pfx+"arrived", 0)
		return fail(ErrTimeout, "timed out after %v: %d of %d ranks arrived (missing: rank %s)", cfg.Timeout, n, cfg.WorldSize, strings.Join(missing, ", "))
	})
	if err != nil {
		return nil, err
	}
	gidb, err := c.Get(ctx, pfx+"gid", opTimeout)
	if err != nil {
		return nil, storeErr(err)
	}
	var gid [16]byte
	copy(gid[:], gidb)
	addrs := make([]string, cfg.WorldSize)
	for i, k := range keys {
		v, err := c.Get(ctx, k, opTimeout)
		if err != nil {
			return nil, storeErr(err)
		}
		f := strings.Fields(string(v))
		if len(f) != 3 {
			return nil, fail(ErrPeer, "rank %d published %q", i, v)
		}
		if f[1] != strconv.Itoa(cfg.WorldSize) {
			return nil, fail(ErrMismatch, "world size: rank %d has %d, rank %d has %s", cfg.Rank, cfg.WorldSize, i, f[1])
		}
		addrs[i] = f[0]
	}
	return connectRing(ctx, cfg, ln, addrs, gid, deadline)
}

// abortKinds are the sentinels rank 0's published cause can carry, by index.
var abortKinds = []error{ErrPeer, ErrTimeout, ErrMismatch, ErrClosed}

// abortCause returns what rank 0 published when it gave up: its cause's
// sentinel and message.
func abortCause(ctx context.Context, c *tcpstore.Client, key string) (kind error, cause string, ok bool) {
	if ok, err := c.Check(ctx, key); err != nil || !ok {
		return nil, "", false
	}
	v, err := c.Get(ctx, key, time.Second)
	if err != nil {
		return nil, "", false
	}
	k, msg, _ := strings.Cut(string(v), "\n")
	kind = ErrPeer
	if i, err := strconv.Atoi(k); err == nil && i >= 0 && i < len(abortKinds) {
		kind = abortKinds[i]
	}
	return kind, msg, true
}

// The ring handshake: the dialler sends hello, the acceptor answers ack and
// its proof, the dialler sends its proof. A hello or ack is magic, group id,
// rank, world size and a fresh nonce; each proof is HMAC-SHA256 keyed by
// Config.Secret over both messages, with a label per direction, so neither
// end can replay the other's and a process without the secret proves nothing.
const (
	helloMagic = "STOKRING"
	ackMagic   = "STOKRACK"
	ringNonce  = 32
	helloSize  = 8 + 16 + 4 + 4 + ringNonce
	proofSize  = sha256.Size
)

func hello(magic string, gid [16]byte, rank, w int) []byte {
	b := make([]byte, 0, helloSize)
	b = append(b, magic...)
	b = append(b, gid[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(rank))
	b = binary.LittleEndian.AppendUint32(b, uint32(w))
	nonce := make([]byte, ringNonce)
	rand.Read(nonce)
	return append(b, nonce...)
}

// ringProof is one end's proof that it holds secret, over both messages.
func ringProof(secret, label string, hello, ack []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(label))
	h.Write(hello)
	h.Write(ack)
	return h.Sum(nil)
}

// checkHello reads a hello or ack and returns the sender's rank.
func checkHello(b []byte, magic string, gid [16]byte, w int) (int, error) {
	if string(b[:8]) != magic {
		return 0, errf(ErrPeer, "not a stoke ring peer (first bytes %q)", b[:8])
	}
	if string(b[8:24]) != string(gid[:]) {
		return 0, errf(ErrMismatch, "a peer of another group (%x, want %x)", b[8:24], gid)
	}
	r, pw := int(binary.LittleEndian.Uint32(b[24:])), int(binary.LittleEndian.Uint32(b[28:]))
	if pw != w {
		return r, errf(ErrMismatch, "rank %d has world size %d, want %d", r, pw, w)
	}
	return r, nil
}

func tune(c *net.TCPConn) {
	c.SetNoDelay(true)
	c.SetReadBuffer(4 << 20)
	c.SetWriteBuffer(4 << 20)
}

// connectRing dials next and accepts prev, concurrently; stray connections
// to the listener are refused (see acceptPrev) and the wait goes on until the
// deadline.
func connectRing(ctx context.Context, cfg Config, ln *net.TCPListener, addrs []string, gid [16]byte, deadline time.Time) (*ring, error) {
	w, rank := cfg.WorldSize, cfg.Rank
	nextRank := (rank + 1) % w
	ln.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	type result struct {
		c   *net.TCPConn
		err error
	}
	acc := make(chan result, 1)
	go func() { // joined below: Init reads acc before it returns
		acc <- acceptPrev(ctx, cfg, ln, gid)
	}()

	next, derr := dialNext(ctx, cfg.Secret, addrs[nextRank], nextRank, gid, rank, w, deadline)
	if derr != nil {
		ln.SetDeadline(time.Unix(1, 0)) // end the accept loop
	}
	a := <-acc
	if derr != nil || a.err != nil {
		if next != nil {
			next.Close()
		}
		if a.c != nil {
			a.c.Close()
		}
		if derr != nil {
			return nil, fmt.Errorf("collective: rendezvous: rank %d: connect to rank %d at %s: %w", rank, nextRank, addrs[nextRank], derr)
		}
		return nil, fmt.Errorf("collective: rendezvous: rank %d: %w", rank, a.err)
	}
	tune(next)
	tune(a.c)
	return newRing(rank, w, next, a.c, cfg.Timeout), nil
}

// acceptPrev accepts connections until one completes the handshake as
// rank r-1 or the listener's deadline passes. Each connection's handshake
// runs on a goroutine of its own, so a stray one that sends nothing (or a
// stranger that cannot prove the secret) does not hold up rank r-1's; once
// one has won, the listener and the others are closed, and every handshake
// goroutine is joined before it returns.
func acceptPrev(ctx context.Context, cfg Config, ln *net.TCPListener, gid [16]byte) (res struct {
	c   *net.TCPConn
	err error
}) {
	w, rank := cfg.WorldSize, cfg.Rank
	prevRank := (rank + w - 1) % w
	var (
		mu      sync.Mutex
		pending = map[*net.TCPConn]struct{}{}
		won     *net.TCPConn
		last    error
		hs      sync.WaitGroup
	)
	handshake := func(c *net.TCPConn) error {
		b := make([]byte, helloSize)
		if _, err := io.ReadFull(c, b); err != nil {
			return fmt.Errorf("sent no hello: %w", err)
		}
		from, err := checkHello(b, helloMagic, gid, w)
		if err == nil && from != prevRank {
			err = errf(ErrPeer, "rank %d connected, want rank %d", from, prevRank)
		}
		if err != nil {
			return err
		}
		ack := hello(ackMagic, gid, rank, w)
		if _, err := c.Write(append(ack, ringProof(cfg.Secret, "stoke ring ack", b, ack)...)); err != nil {
			return err
		}
		proof := make([]byte, proofSize)
		if _, err := io.ReadFull(c, proof); err != nil {
			return fmt.Errorf("sent no proof: %w", err)
		}
		if !hmac.Equal(proof, ringProof(cfg.Secret, "stoke ring hello", b, ack)) {
			return errf(ErrMismatch, "it claimed rank %d but did not prove the job's secret (%s differs)", from, SecretEnv)
		}
		return nil
	}
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			break
		}
		c.SetDeadline(time.Now().Add(storeOpTimeout))
		mu.Lock()
		pending[c] = struct{}{}
		mu.Unlock()
		hs.Add(1)
		go func() {
			defer hs.Done()
			err := handshake(c)
			mu.Lock()
			defer mu.Unlock()
			delete(pending, c)
			if err != nil || won != nil {
				c.Close()
				if err != nil && won == nil {
					last = fmt.Errorf("from %v: %w", c.RemoteAddr(), err)
				}
				return
			}
			won = c
			c.SetDeadline(time.Time{})
			ln.SetDeadline(time.Unix(1, 0)) // end the accept loop
			for o := range pending {
				o.Close()
			}
		}()
	}
	mu.Lock()
	for o := range pending { // the deadline passed: end the handshakes under way
		o.Close()
	}
	mu.Unlock()
	hs.Wait()
	switch {
	case won != nil:
		res.c = won
	case ctx.Err() != nil:
		res.err = ctx.Err()
	case last != nil:
		res.err = errf(ErrTimeout, "timed out after %v waiting for rank %d to connect (refused: %w)", cfg.Timeout, prevRank, last)
	default:
		res.err = errf(ErrTimeout, "timed out after %v waiting for rank %d to connect", cfg.Timeout, prevRank)
	}
	return res
}

func dialNext(ctx context.Context, secret, addr string, nextRank int, gid [16]byte, rank, w int, deadline time.Time) (*net.TCPConn, error) {
	d := net.Dialer{Deadline: deadline}
	backoff := 2 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if time.Now().Before(deadline) {
				time.Sleep(min(backoff, time.Until(deadline)))
				backoff = min(2*backoff, 100*time.Millisecond)
				continue
			}
			return nil, errf(ErrTimeout, "timed out: %w", err)
		}
		tc := c.(*net.TCPConn)
		tc.SetDeadline(time.Now().Add(min(storeOpTimeout, time.Until(deadline))))
		hi := hello(helloMagic, gid, rank, w)
		if _, err := tc.Write(hi); err != nil {
			tc.Close()
			return nil, errf(ErrPeer, "%w", err)
		}
		b := make([]byte, helloSize+proofSize)
		if _, err := io.ReadFull(tc, b); err != nil {
			tc.Close()
			return nil, errf(ErrPeer, "no answer to the ring handshake: %w", err)
		}
		ack := b[:helloSize]
		from, err := checkHello(ack, ackMagic, gid, w)
		if err == nil && from != nextRank {
			err = errf(ErrPeer, "rank %d answered, want rank %d", from, nextRank)
		}
		if err == nil && !hmac.Equal(b[helloSize:], ringProof(secret, "stoke ring ack", hi, ack)) {
			err = errf(ErrMismatch, "it did not prove the job's secret (%s differs, or a process that is not rank %d listens there)", SecretEnv, nextRank)
		}
		if err == nil {
			_, err = tc.Write(ringProof(secret, "stoke ring hello", hi, ack))
		}
		if err != nil {
			tc.Close()
			return nil, err
		}
		tc.SetDeadline(time.Time{})
		return tc, nil
	}
}
