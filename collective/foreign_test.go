package collective

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/collective/internal/tcpstore"
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

// TestForeignClient: a stranger without the job's secret tries what once
// stopped or joined a job (a compare-set on a rank's key, an add to the
// arrival counter, half-sent large queries, and a ring handshake passing
// for a rank, even knowing the ranks' addresses and the group id); each is
// refused, and the job's result is an undisturbed run's, bit for bit.
func TestForeignClient(t *testing.T) {
	const w, n = 3, 100_003
	want := allReduceHashes(t, startGroups(t, w, 20*time.Second), n)

	const secret = "the-job's-secret"
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := func(r int) Config {
		return Config{Rank: r, WorldSize: w, Addr: "127.0.0.1", Port: port, Timeout: 20 * time.Second, Secret: secret, Log: quiet}
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

	if v, err := dial().CompareSet(ctx, "stoke/attempt_0/rank/2", nil, []byte("127.0.0.1:9 3 00")); err == nil {
		t.Errorf("a stranger's compare-set on rank 2's key was answered: %q", v)
	}
	if v, err := dial().Add(ctx, "stoke/attempt_0/arrived", 1); err == nil {
		t.Errorf("a stranger's add to the arrival counter was answered: %d", v)
	}
	for _, s := range []string{"", "guess"} {
		if err := dial().Hello(ctx, []byte(s)); err == nil {
			t.Errorf("a stranger's hello with secret %q passed", s)
		}
	}
	// Half-sent 32 MiB queries: refused at their first byte, nothing held.
	for range 40 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		q := binary.LittleEndian.AppendUint64([]byte{byte(tcpstore.CompareSet)}, 2)
		q = binary.LittleEndian.AppendUint64(append(q, "/k"...), 16<<20)
		c.Write(append(q, make([]byte, 64<<10)...))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var ne net.Error
		if _, err := c.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("a stranger's half-sent query: read %v; want the connection closed", err)
		}
		c.Close()
	}

	// Ring takeover: knowing rank 0's and rank 1's ring addresses and the
	// group id, the stranger dials each, passing for its previous rank.
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
	takes := make([]chan take, 2)
	for r := range 2 {
		v, err := insider.Get(ctx, "stoke/attempt_0/rank/"+strconv.Itoa(r), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", strings.Fields(string(v))[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A hello as rank r-1, then a proof made without the secret.
		c.Write(hello(helloMagic, g16, (r+w-1)%w, w))
		c.Write(make([]byte, proofSize))
		takes[r] = make(chan take, 1)
		go func() {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(c)
			takes[r] <- take{got, err}
		}()
	}
	start(2)
	wg.Wait()
	for r, err := range initErrs {
		if err != nil {
			t.Fatalf("Init of rank %d with a stranger about = %v", r, err)
		}
	}
	for r, ch := range takes {
		// The ack and its proof, or nothing when rank r-1 won first.
		tk := <-ch
		if (tk.err != nil && !errors.Is(tk.err, syscall.ECONNRESET)) || (len(tk.got) != 0 && len(tk.got) != helloSize+proofSize) {
			t.Errorf("a stranger passing for rank %d's previous rank got %d bytes (%v); want at most the ack (%d), then the connection closed",
				r, len(tk.got), tk.err, helloSize+proofSize)
		}
		t.Logf("a stranger passing for rank %d's previous rank: %d bytes, then %v", r, len(tk.got), tk.err)
	}
	if got := allReduceHashes(t, gs, n); got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("the job's result with a stranger about differs from an undisturbed run's")
	}
	if v, err := insider.Add(ctx, "stoke/attempt_0/arrived", 0); err != nil || v != w {
		t.Errorf("arrival counter = %d, %v; want %d", v, err, w)
	}
}
