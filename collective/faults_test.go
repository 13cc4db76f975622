package collective

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/collective/internal/tcpstore"
)

func wantErr(t *testing.T, what string, err, sentinel error, parts ...string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s = %v; want an error wrapping %v", what, err, sentinel)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s = %q; want it to say %q", what, err, p)
		}
	}
}

func TestHungRank(t *testing.T) {
	gs := startGroups(t, 2, 2*time.Second)
	// Rank 1 never calls: rank 0 times out naming it.
	err := gs[0].AllReduce(context.Background(), make([]float32, 100), Sum)
	wantErr(t, "AllReduce with rank 1 hung", err, ErrTimeout, "all-reduce", "waiting for rank 1", "2s")
	// The group stays failed.
	err = gs[0].AllReduce(context.Background(), make([]float32, 100), Sum)
	wantErr(t, "AllReduce after a timeout", err, ErrTimeout, "unusable")
}

func TestClosedRank(t *testing.T) {
	gs := startGroups(t, 3, 30*time.Second)
	errs := make(chan error, 2)
	for _, g := range gs[:2] {
		go func() { errs <- g.AllReduce(context.Background(), make([]float32, 1000), Sum) }()
	}
	time.Sleep(50 * time.Millisecond)
	gs[2].Close()
	for range 2 {
		err := <-errs
		wantErr(t, "AllReduce with rank 2 closed", err, ErrPeer, "all-reduce: rank ")
		if errors.Is(err, ErrTimeout) {
			t.Errorf("AllReduce = %v; want the close seen, not a timeout", err)
		}
	}
	err := gs[2].AllReduce(context.Background(), nil, Sum)
	wantErr(t, "AllReduce after Close", err, ErrClosed)
}

func TestCancel(t *testing.T) {
	gs := startGroups(t, 3, 30*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	// Ranks 1 and 2 do not call yet: rank 0 waits until it cancels.
	err := gs[0].AllReduce(ctx, make([]float32, 1<<20), Sum)
	wantErr(t, "AllReduce cancelled", err, context.Canceled, "all-reduce")
	// Its sockets are closed: the others fail at once, not after 30s.
	errs := onAll(gs[1:], func(g *Group) error { return g.AllReduce(context.Background(), make([]float32, 1<<20), Sum) })
	for i, err := range errs {
		wantErr(t, "AllReduce of rank "+strconv.Itoa(i+1), err, ErrPeer)
		if errors.Is(err, ErrTimeout) {
			t.Errorf("rank %d: %v; want the closed sockets seen, not a timeout", i+1, err)
		}
	}
}

func TestMismatchedCollectives(t *testing.T) {
	gs := startGroups(t, 2, 5*time.Second)
	errs := onAll(gs, func(g *Group) error {
		return g.AllReduce(context.Background(), make([]float32, 4+g.Rank()), Sum)
	})
	n := 0
	for _, err := range errs {
		if errors.Is(err, ErrMismatch) {
			n++
			if !strings.Contains(err.Error(), "of 4 elements") || !strings.Contains(err.Error(), "of 5 elements") {
				t.Errorf("error %q; want both sizes named", err)
			}
		} else if !errors.Is(err, ErrPeer) {
			t.Errorf("AllReduce of different sizes = %v; want ErrMismatch or ErrPeer", err)
		}
	}
	if n == 0 {
		t.Errorf("no rank reported the mismatch: %v", errs)
	}
}

func initErrs(cfgs []Config) []error {
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, c := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Init(context.Background(), c)
			if err == nil {
				g.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errs
}

// agentStore hosts a store for the test, as torchrun's agent does.
func agentStore(t *testing.T) int {
	srv, err := tcpstore.Listen("127.0.0.1:0", tcpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().(*net.TCPAddr).Port
}

func TestRendezvousFaults(t *testing.T) {
	t.Run("store-refuses", func(t *testing.T) {
		port := freePort(t)
		_, err := Init(context.Background(), Config{Rank: 1, WorldSize: 2, Port: port, Timeout: time.Second})
		wantErr(t, "Init with no store", err, ErrTimeout, "rank 1", "rank 0 hosts the store at 127.0.0.1:"+strconv.Itoa(port)+" and did not open it within 1s")
	})
	t.Run("store-silent", func(t *testing.T) {
		// A server that accepts and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var conns sync.WaitGroup
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				go func() { defer conns.Done(); defer c.Close(); c.Read(make([]byte, 1<<16)); c.Read(make([]byte, 1)) }()
			}
		}()
		_, err = Init(context.Background(), Config{Rank: 1, WorldSize: 2, Port: ln.Addr().(*net.TCPAddr).Port, Timeout: time.Second})
		wantErr(t, "Init with a silent store", err, ErrTimeout, "hello")
		ln.Close()
		conns.Wait()
	})
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		_, err := Init(context.Background(), Config{Rank: 1, WorldSize: 2, Port: port, Timeout: 5 * time.Second, UseAgentStore: true})
		wantErr(t, "Init against an HTTP server", err, ErrPeer, "does not speak the c10d store protocol")
	})
	t.Run("port-in-use", func(t *testing.T) {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, err = Init(context.Background(), Config{Rank: 0, WorldSize: 2, Port: ln.Addr().(*net.TCPAddr).Port, Timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("Init on a port in use = %v; want address already in use", err)
		}
	})
	t.Run("too-few-arrive", func(t *testing.T) {
		port := agentStore(t)
		errs := initErrs([]Config{
			{Rank: 0, WorldSize: 3, Port: port, Timeout: 2 * time.Second, UseAgentStore: true},
			{Rank: 1, WorldSize: 3, Port: port, Timeout: 2 * time.Second, UseAgentStore: true},
		})
		for r, err := range errs {
			wantErr(t, "Init of rank "+strconv.Itoa(r), err, ErrTimeout, "2 of 3 ranks arrived", "missing: rank 2")
		}
	})
	t.Run("world-sizes-differ", func(t *testing.T) {
		port := freePort(t)
		errs := initErrs([]Config{{Rank: 0, WorldSize: 2, Port: port, Timeout: 2 * time.Second}, {Rank: 1, WorldSize: 3, Port: port, Timeout: 2 * time.Second}})
		wantErr(t, "Init of rank 0", errs[0], ErrMismatch, "world size: rank 0 has 2, rank 1 has 3")
		if errs[1] == nil {
			t.Errorf("Init of rank 1 (world size 3) succeeded")
		}
	})
	t.Run("rank-twice", func(t *testing.T) {
		port := agentStore(t)
		c := Config{WorldSize: 2, Port: port, Timeout: 2 * time.Second, UseAgentStore: true}
		c1 := c
		c1.Rank = 1
		errs := initErrs([]Config{c, c1, c1})
		n := 0
		for _, err := range errs {
			if errors.Is(err, ErrMismatch) && strings.Contains(err.Error(), "already claimed rank 1") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("Init with rank 1 twice = %v; want one 'already claimed rank 1'", errs)
		}
	})
}

// TestAgentStore joins a store the test hosts (torchrun's agent), after a
// failed attempt 0 left its keys there, and with a stray connection made to
// rank 1's ring port before rank 0 arrives: it sends part of a hello and
// waits, and must not hold up rank 0's handshake (it did for 10 s once).
func TestAgentStore(t *testing.T) {
	srv, err := tcpstore.Listen("127.0.0.1:0", tcpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	_, err = Init(context.Background(), Config{Rank: 0, WorldSize: 2, Port: port, UseAgentStore: true, Timeout: 300 * time.Millisecond})
	wantErr(t, "Init of attempt 0 alone", err, ErrTimeout, "1 of 2 ranks arrived")

	cfg := func(r int) Config {
		return Config{Rank: r, WorldSize: 2, Port: port, UseAgentStore: true, RestartCount: 1, Timeout: 10 * time.Second, JobID: "run-7"}
	}
	type res struct {
		g   *Group
		err error
	}
	c, err := tcpstore.Dial(context.Background(), srv.Addr().String(), time.Now().Add(5*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Rank 1 claims its place once the job's identity is there; rank 0 will
	// find the same one.
	if err := c.Set(context.Background(), "stoke/attempt_1/job", []byte("run-7")); err != nil {
		t.Fatal(err)
	}
	one := make(chan res, 1)
	go func() { g, err := Init(context.Background(), cfg(1)); one <- res{g, err} }()
	v, err := c.Get(context.Background(), "stoke/attempt_1/rank/1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stray, err := net.Dial("tcp", strings.Fields(string(v))[0])
	if err != nil {
		t.Fatal(err)
	}
	stray.Write([]byte("GET / HTTP/1.0\r\n\r\n and fewer bytes than a hello"))
	defer stray.Close()
	g0, err := Init(context.Background(), cfg(0))
	if err != nil {
		t.Fatalf("Init(rank 0) = %v", err)
	}
	defer g0.Close()
	buf := make([]byte, 8)
	if n, _ := stray.Read(buf); n != 0 {
		t.Errorf("a stray connection got %q; want it closed", buf[:n])
	}
	r1 := <-one
	if r1.err != nil {
		t.Fatalf("Init(rank 1) = %v", r1.err)
	}
	defer r1.g.Close()
	errs := onAll([]*Group{g0, r1.g}, func(g *Group) error {
		b := []float32{float32(g.Rank() + 1)}
		if err := g.AllReduce(context.Background(), b, Sum); err != nil {
			return err
		}
		if b[0] != 3 {
			t.Errorf("rank %d: sum = %v; want 3", g.Rank(), b[0])
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRankZeroGivesUp: when rank 0 gives up during the rendezvous, the ranks
// still waiting name it and its cause, with its sentinel, at once (they once
// said only "the store closed the connection: EOF").
func TestRankZeroGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
		kind   error
		cause  string
	}{
		{"timeout", false, ErrTimeout, "rank 0 gave up: timed out after 1s: 2 of 3 ranks arrived (missing: rank 2)"},
		{"interrupted", true, context.Canceled, "rank 0 gave up: context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			zero := make(chan error, 1)
			timeout := time.Second
			if tc.cancel {
				timeout = time.Minute
			}
			go func() {
				_, err := Init(ctx, Config{Rank: 0, WorldSize: 3, Port: port, Timeout: timeout, Log: quiet})
				zero <- err
			}()
			if tc.cancel {
				time.AfterFunc(500*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err := Init(t.Context(), Config{Rank: 1, WorldSize: 3, Port: port, Timeout: time.Minute})
			kind := tc.kind
			if kind == context.Canceled {
				kind = ErrPeer
			}
			wantErr(t, "Init of rank 1", err, kind, "rendezvous: rank 1: "+tc.cause)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("rank 1 took %v to fail; want at once after rank 0", d)
			}
			if err := <-zero; err == nil {
				t.Errorf("rank 0 succeeded")
			}
		})
	}
}
