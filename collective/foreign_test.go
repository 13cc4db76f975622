package collective

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/collective/internal/tcpstore"
	"github.com/stoke-ml/stoke/internal/hostiletest"
)

// allReduceHashes all-reduces rank r's pattern over n elements on every
// group and returns each rank's result hash.
func allReduceHashes(t *testing.T, gs []*Group, n int) [][32]byte {
	t.Helper()
	hs := make([][32]byte, len(gs))
	errs := onAll(gs, func(g *Group) error {
		b := make([]float32, n)
		for i := range b {
			b[i] = pattern(g.Rank(), i)
		}
		if err := g.AllReduce(context.Background(), b, Sum); err != nil {
			return err
		}
		hs[g.Rank()] = sha256.Sum256(f32Bytes(b))
		return checkSum(len(gs), b, Sum)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return hs
}

// TestForeignClient: a stranger tries what once stopped or joined a job (a
// compare-set on a rank's key, an add to the arrival counter, 40 half-sent
// queries, and a ring handshake passing for a rank, knowing the ranks'
// addresses and the group id, with the proof of an empty secret) against a
// job with STOKE_SECRET and one without, before the job's last rank starts.
//
// With a secret each attempt is refused, nothing is held, and the job's
// result is an undisturbed run's, bit for bit. Without one, as
// docs/distributed.md says, rank 0 warns at start that the job is
// unauthenticated and the stranger can stop it: its compare-set takes rank
// 2's place. Then every rank fails within the timeout, rank 2 naming the
// process that claimed its place, and none hangs or reports a result; the
// half-sent queries hold at most the store's 64 MiB of pending bytes.
func TestForeignClient(t *testing.T) {
	const w, n = 3, 100_003
	want := allReduceHashes(t, startGroups(t, w, 20*time.Second), n)
	for _, tc := range []struct {
		name, secret string
		timeout      time.Duration
	}{
		{"with a secret", "the-job's-secret", 20 * time.Second},
		{"without a secret", "", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { foreignClient(t, w, n, tc.secret, tc.timeout, want) })
	}
}

// foreignClient is TestForeignClient's stranger against a job of w ranks with
// secret ("" for none), whose undisturbed all-reduce of n elements gave want.
func foreignClient(t *testing.T, w, n int, secret string, timeout time.Duration, want [][32]byte) {
	open := secret == ""
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var warned bytes.Buffer // rank 0's log: written during its Init, read after it
	cfg := func(r int) Config {
		return Config{Rank: r, WorldSize: w, Addr: "127.0.0.1", Port: port, Timeout: timeout, Secret: secret, Log: log.New(&warned, "", 0)}
	}
	gs := make([]*Group, w)
	initErrs := make([]error, w)
	var wg sync.WaitGroup
	start := func(r int) {
		wg.Add(1)
		go func() { defer wg.Done(); gs[r], initErrs[r] = Init(context.Background(), cfg(r)) }()
	}
	t.Cleanup(func() {
		for _, g := range gs {
			closeGroup(g)
		}
	})
	start(0)
	start(1) // rank 2 comes after the stranger has tried everything

	ctx := context.Background()
	dial := func() *tcpstore.Client {
		c, err := tcpstore.Dial(ctx, addr, time.Now().Add(10*time.Second), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The job's own view, for the test: a client holding the secret.
	insider := dial()
	if err := insider.Hello(ctx, []byte(secret)); err != nil {
		t.Fatal(err)
	}
	if _, err := insider.Get(ctx, "stoke/attempt_0/rank/1", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// Without a secret the store answers anyone: the compare-set takes rank
	// 2's place (an address nothing listens on), the add counts a rank more.
	const fake = "127.0.0.1:9 3 00"
	v, err := dial().CompareSet(ctx, "stoke/attempt_0/rank/2", nil, []byte(fake))
	if !open && err == nil {
		t.Errorf("a stranger's compare-set on rank 2's key was answered: %q", v)
	}
	if open && (err != nil || string(v) != fake) {
		t.Errorf("a stranger's compare-set on rank 2's key of an open job = %q, %v; want it answered", v, err)
	}
	if v, err := dial().Add(ctx, "stoke/attempt_0/arrived", 1); !open && err == nil {
		t.Errorf("a stranger's add to the arrival counter was answered: %d", v)
	} else if open && err != nil {
		t.Errorf("a stranger's add to the arrival counter of an open job: %v; want it answered", err)
	}
	if err := dial().Hello(ctx, nil); (err == nil) != open {
		t.Errorf("a stranger's hello without a secret: %v; want it to pass only when the job has none", err)
	}
	if !open {
		if err := dial().Hello(ctx, []byte("guess")); err == nil {
			t.Error("a stranger's hello with a guessed secret passed")
		}
	}
	halfSentQueries(t, addr, open)

	// Ring takeover: knowing rank 0's and rank 1's ring addresses and the
	// group id, the stranger dials each, passing for its previous rank, and
	// proves the empty secret: what the job checks when it has none.
	gid, err := insider.Get(ctx, "stoke/attempt_0/gid", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var g16 [16]byte
	copy(g16[:], gid)
	type take struct {
		got []byte
		err error
	}
	var takes []chan take
	for r := range 2 {
		v, err := insider.Get(ctx, "stoke/attempt_0/rank/"+strconv.Itoa(r), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", strings.Fields(string(v))[0])
		if err != nil {
			if open { // the ranks of an open job may have connected already
				t.Logf("a stranger passing for rank %d's previous rank: %v", r, err)
				continue
			}
			t.Fatal(err)
		}
		defer c.Close()
		ch := make(chan take, 1)
		takes = append(takes, ch)
		go func() {
			c.SetDeadline(time.Now().Add(3 * timeout))
			hi := hello(helloMagic, g16, (r+w-1)%w, w)
			c.Write(hi)
			ack := make([]byte, helloSize+proofSize)
			if k, err := io.ReadFull(c, ack); err != nil {
				ch <- take{ack[:k], err}
				return
			}
			c.Write(ringProof("", "stoke ring hello", hi, ack[:helloSize]))
			rest, err := io.ReadAll(c)
			ch <- take{append(ack, rest...), err}
		}()
	}
	start(2)
	waitOrFail(t, &wg, 3*timeout, "Init")
	warning := strings.Contains(warned.String(), "the job is unauthenticated") && strings.Contains(warned.String(), SecretEnv)
	if warning != open {
		t.Errorf("rank 0 logged %q; want the warning that the job is unauthenticated only without a secret", warned.String())
	}

	if !open {
		for r, err := range initErrs {
			if err != nil {
				t.Fatalf("Init of rank %d with a stranger about = %v", r, err)
			}
		}
		for r, ch := range takes {
			// The ack and its proof, or nothing when rank r-1 won first.
			tk := <-ch
			if (tk.err != nil && !errors.Is(tk.err, syscall.ECONNRESET) && !errors.Is(tk.err, io.EOF)) ||
				(len(tk.got) != 0 && len(tk.got) != helloSize+proofSize) {
				t.Errorf("a stranger passing for rank %d's previous rank got %d bytes (%v); want at most the ack (%d), then the connection closed",
					r, len(tk.got), tk.err, helloSize+proofSize)
			}
			t.Logf("a stranger passing for rank %d's previous rank: %d bytes, then %v", r, len(tk.got), tk.err)
		}
		if got := allReduceHashes(t, gs, n); got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("the job's result with a stranger about differs from an undisturbed run's")
		}
		if v, err := insider.Add(ctx, "stoke/attempt_0/arrived", 0); err != nil || v != int64(w) {
			t.Errorf("arrival counter = %d, %v; want %d", v, err, w)
		}
		return
	}

	// Without a secret: rank 2 is refused its place, naming the process that
	// took it; the others fail at Init or at their first all-reduce (rank 0
	// may have taken the stranger for rank 2), each within the timeout.
	if err := initErrs[2]; !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "another process already claimed rank 2") ||
		!strings.Contains(err.Error(), fake) {
		t.Errorf("Init of rank 2, whose place a stranger took = %v; want ErrMismatch naming the claim %q", err, fake)
	}
	errs := slices.Clone(initErrs)
	var ar sync.WaitGroup
	for r, g := range gs {
		if g == nil {
			continue
		}
		ar.Add(1)
		go func() {
			defer ar.Done()
			b := make([]float32, n)
			if errs[r] = g.AllReduce(ctx, b, Sum); errs[r] == nil {
				errs[r] = fmt.Errorf("the all-reduce returned a result (sha256 %x) with rank 2 absent", sha256.Sum256(f32Bytes(b)))
			}
			g.Close() // the ring's other end learns it at once
		}()
	}
	waitOrFail(t, &ar, 3*timeout, "AllReduce")
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrPeer) && !errors.Is(err, ErrClosed) {
			t.Errorf("rank %d of the stopped job: %v; want an error of package collective's", r, err)
		}
		t.Logf("rank %d: %v", r, err)
	}
	for r, ch := range takes {
		tk := <-ch
		t.Logf("a stranger passing for rank %d's previous rank: %d bytes, then %v", r, len(tk.got), tk.err)
	}
}

// waitOrFail waits for wg, failing the test if that takes longer than d: a
// hang, not a clean failure.
func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s still running after %v: the job hangs", what, d)
	}
}

// halfSentQueries opens 40 connections to the store at addr, each sending
// 2 MiB of a 3 MiB compare-set (under the job's 4 MiB bound on a request),
// and checks what rank 0's store holds for them: nothing with a secret
// (each is closed at its first byte, unauthenticated), at most its 64 MiB
// of pending bytes without one (those past it are closed), and nothing once
// they are closed, as tcpstore's TestHalfSentQueries for the store alone.
func halfSentQueries(t *testing.T, addr string, open bool) {
	t.Helper()
	const (
		conns   = 40
		value   = 3 << 19 // two of them: 3 MiB
		sent    = 2 << 20
		pending = 64 << 20
	)
	before := hostiletest.HeapAlloc()
	q := binary.LittleEndian.AppendUint64([]byte{byte(tcpstore.CompareSet)}, 2)
	q = binary.LittleEndian.AppendUint64(append(q, "/k"...), value)
	q = append(q, make([]byte, value)...)
	q = binary.LittleEndian.AppendUint64(q, value)
	q = append(q, make([]byte, sent-len(q))...)
	closed := make([]bool, conns)
	cs := hostiletest.Clients(t, addr, conns, func(i int, c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(q)
		// The store closes a refused connection; one it admitted waits for
		// the rest of the query.
		c.SetReadDeadline(time.Now().Add(time.Second))
		var ne net.Error
		_, err := c.Read(make([]byte, 1))
		closed[i] = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	})
	held := hostiletest.HeapAlloc() - before
	nClosed := 0
	for i, c := range closed {
		if c {
			nClosed++
		} else if !open {
			t.Errorf("a stranger's half-sent query %d: its connection is open; want it closed unanswered", i)
		}
	}
	bound := int64(conns*64<<10 + 8<<20)
	if open {
		bound += pending
	}
	t.Logf("%d half-sent 3 MiB queries: %d closed by the store, heap +%d MiB (bound %d MiB)", conns, nClosed, held>>20, bound>>20)
	if held > bound {
		t.Errorf("rank 0's store holds %d MiB for %d half-sent queries; want at most %d MiB", held>>20, conns, bound>>20)
	}
	for _, c := range cs {
		c.Close()
	}
	after := hostiletest.HeapAlloc() - before
	for end := time.Now().Add(5 * time.Second); after > 4<<20 && time.Now().Before(end); after = hostiletest.HeapAlloc() - before {
		time.Sleep(20 * time.Millisecond) // the store's goroutines see the closes
	}
	if after > 4<<20 {
		t.Errorf("the heap is %d MiB above where it started after the stranger's connections closed; want within 4 MiB", after>>20)
	}
}
