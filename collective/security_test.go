package collective

import (
	"net"
	"strconv"
	"testing"
	"time"
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
	_, err := Init(t.Context(), Config{Rank: 0, WorldSize: 2, Addr: "203.0.113.7", Port: freePort(t), Timeout: time.Second})
	if err == nil || !containsAll(err.Error(), "rank 0", "MASTER_ADDR 203.0.113.7", "cannot assign requested address") {
		t.Fatalf("Init(rank 0, MASTER_ADDR of another machine) = %v; want it refused naming the address", err)
	}
}
