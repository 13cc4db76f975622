package collective

import (
	"log"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/collective/internal/tcpstore"
)

// otherAddrs returns this machine's addresses that are not loopback, and ::1
// when the machine has IPv6: every address a store bound to 127.0.0.1 must
// not answer on.
func otherAddrs(t *testing.T) []net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var ips []net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.Equal(net.IPv4(127, 0, 0, 1)) {
			continue
		}
		ips = append(ips, ipn.IP)
	}
	return ips
}

// TestStoreListensOnMasterAddr: with MASTER_ADDR 127.0.0.1 rank 0's store
// answers on loopback only, and each rank's ring listener on the interface
// that reaches the store: neither is reachable from another address of the
// machine (the store once listened on every interface).
func TestStoreListensOnMasterAddr(t *testing.T) {
	others := otherAddrs(t)
	if len(others) == 0 {
		t.Skip("this machine has no address but 127.0.0.1")
	}
	gs := startGroups(t, 2, 10*time.Second)
	port := gs[0].server.Addr().(*net.TCPAddr).Port
	if a := gs[0].server.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("the store listens on %v; want 127.0.0.1", a)
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		t.Fatalf("the store does not answer on 127.0.0.1: %v", err)
	}
	c.Close()
	for _, ip := range others {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("the store of a job on 127.0.0.1 accepted a connection at %s", addr)
		}
	}
	for r, g := range gs {
		if a := g.ring.prev.LocalAddr().(*net.TCPAddr); !a.IP.IsLoopback() {
			t.Errorf("rank %d's ring listener was on %v; want loopback", r, a)
		}
	}
}

// TestStoreNeedsALocalMasterAddr: rank 0 hosts the store on MASTER_ADDR, so
// an address of another machine is an error naming it, not a store on every
// interface.
func TestStoreNeedsALocalMasterAddr(t *testing.T) {
	_, err := Init(t.Context(), Config{Rank: 0, WorldSize: 2, Addr: "203.0.113.7", Port: freePort(t), Timeout: time.Second, Log: quiet})
	if err == nil || !containsAll(err.Error(), "rank 0", "MASTER_ADDR 203.0.113.7", "cannot assign requested address") {
		t.Fatalf("Init(rank 0, MASTER_ADDR of another machine) = %v; want it refused naming the address", err)
	}
}

// TestSecretRanks: ranks with the same STOKE_SECRET form a group; a rank
// with another secret, or none, is refused by rank 0's store and by the ring
// (torchrun's store is torch's, so there the ring is where it is caught).
func TestSecretRanks(t *testing.T) {
	cfgs := func(agent bool, secrets ...string) []Config {
		port := 0
		if agent {
			port = agentStore(t)
		} else {
			port = freePort(t)
		}
		cs := make([]Config, len(secrets))
		for r, s := range secrets {
			cs[r] = Config{Rank: r, WorldSize: len(secrets), Addr: "127.0.0.1", Port: port, Timeout: 2 * time.Second,
				UseAgentStore: agent, Secret: s, Log: quiet}
		}
		return cs
	}
	for _, agent := range []bool{false, true} {
		for _, err := range initErrs(cfgs(agent, "k1", "k1", "k1")) {
			if err != nil {
				t.Fatalf("Init with one secret (agent store %v) = %v", agent, err)
			}
		}
	}
	errs := initErrs(cfgs(false, "k1", "k2"))
	wantErr(t, "Init of rank 1 with another secret", errs[1], ErrMismatch, "rank 1", "STOKE_SECRET differs from rank 0's", "not this client's")
	errs = initErrs(cfgs(false, "k1", ""))
	wantErr(t, "Init of rank 1 with no secret", errs[1], ErrMismatch, "rank 1", "STOKE_SECRET", "requires a secret")
	errs = initErrs(cfgs(false, "", "k1"))
	wantErr(t, "Init of rank 1 with a secret rank 0 lacks", errs[1], ErrMismatch, "rank 1", "STOKE_SECRET", "has no secret")
	// The first rank to check a proof fails and closes its ports, so the
	// other may see that rather than a proof: each fails, one names the cause.
	errs = initErrs(cfgs(true, "k1", "k2"))
	named := 0
	for r, err := range errs {
		t.Logf("rank %d: %v", r, err)
		if err == nil {
			t.Errorf("Init of rank %d through the agent's store with another secret succeeded", r)
		} else if strings.Contains(err.Error(), "STOKE_SECRET differs") {
			named++
		}
	}
	if named == 0 {
		t.Errorf("no rank said STOKE_SECRET differs: %v", errs)
	}
}

// TestUnauthenticatedWarning: a job without a secret says so once, on rank 0.
func TestUnauthenticatedWarning(t *testing.T) {
	for _, secret := range []string{"", "k"} {
		port := freePort(t)
		logs := make([]strings.Builder, 2)
		cs := make([]Config, 2)
		for r := range cs {
			cs[r] = Config{Rank: r, WorldSize: 2, Port: port, Timeout: 5 * time.Second, Secret: secret, Log: log.New(&logs[r], "", 0)}
		}
		for _, err := range initErrs(cs) {
			if err != nil {
				t.Fatal(err)
			}
		}
		n := strings.Count(logs[0].String(), "unauthenticated")
		if secret == "" && (n != 1 || !strings.Contains(logs[0].String(), "STOKE_SECRET is not set")) {
			t.Errorf("rank 0 of a job without a secret logged %q; want one warning", logs[0].String())
		}
		if secret != "" && logs[0].Len() > 0 {
			t.Errorf("rank 0 of a job with a secret logged %q", logs[0].String())
		}
		if logs[1].Len() > 0 {
			t.Errorf("rank 1 logged %q; want rank 0 alone to warn", logs[1].String())
		}
	}
}

// TestJobIdentity: a rank of another job that finds this job's store is
// refused naming both jobs, before it claims a place, and the job goes on.
func TestJobIdentity(t *testing.T) {
	port := freePort(t)
	cfg := func(r int, job string) Config {
		return Config{Rank: r, WorldSize: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second, JobID: job, Log: quiet}
	}
	type res struct {
		g   *Group
		err error
	}
	zero := make(chan res, 1)
	go func() { g, err := Init(t.Context(), cfg(0, "A")); zero <- res{g, err} }()
	_, err := Init(t.Context(), cfg(1, "B"))
	wantErr(t, "Init of rank 1 of job B at job A's store", err, ErrMismatch, "rank 1", "job B", "job A")
	one, err := Init(t.Context(), cfg(1, "A"))
	if err != nil {
		t.Fatalf("Init of job A's rank 1 after the stranger = %v", err)
	}
	defer one.Close()
	r0 := <-zero
	if r0.err != nil {
		t.Fatalf("Init of job A's rank 0 = %v", r0.err)
	}
	defer r0.g.Close()
	for _, err := range onAll([]*Group{r0.g, one}, func(g *Group) error { return g.Barrier(t.Context()) }) {
		if err != nil {
			t.Fatal(err)
		}
	}

	// Through an agent's store: another job's rank 0 is refused too, and
	// says nothing in the job's name (it once told the job's ranks that
	// their rank 0 had given up).
	aport := agentStore(t)
	acfg := func(r int, job string) Config {
		return Config{Rank: r, WorldSize: 3, Port: aport, Timeout: 10 * time.Second, JobID: job, UseAgentStore: true, Log: quiet}
	}
	errs := make(chan error, 3)
	for r := range 2 { // ranks 0 and 1 wait for rank 2 while job B's rank 0 comes
		go func() { g, err := Init(t.Context(), acfg(r, "A")); errs <- err; closeGroup(g) }()
	}
	c, err := tcpstore.Dial(t.Context(), "127.0.0.1:"+strconv.Itoa(aport), time.Now().Add(5*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Wait(t.Context(), []string{"stoke/attempt_0/rank/0", "stoke/attempt_0/rank/1"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	_, err = Init(t.Context(), acfg(0, "B"))
	wantErr(t, "Init of job B's rank 0 at job A's store", err, ErrMismatch, "rank 0 is of job B", "already serves job A")
	time.Sleep(300 * time.Millisecond) // rank 1 polls the store meanwhile
	go func() { g, err := Init(t.Context(), acfg(2, "A")); errs <- err; closeGroup(g) }()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("job A with job B's rank 0 about: %v", err)
		}
	}
}

func closeGroup(g *Group) {
	if g != nil {
		g.Close()
	}
}
