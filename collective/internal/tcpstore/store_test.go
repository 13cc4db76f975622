package tcpstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/internal/pyoracle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dial(t *testing.T, addr string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), addr, time.Now().Add(5*time.Second), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServerClient(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c, c2 := dial(t, s.Addr().String()), dial(t, s.Addr().String())
	if ok, err := c.Check(ctx, "a"); err != nil || ok {
		t.Fatalf("Check(a) on an empty store = %v, %v; want false", ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- c2.Wait(ctx, []string{"a", "b"}, 5*time.Second) }()
	if err := c.Set(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait(a, b) returned %v with b absent", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n, err := c.Add(ctx, "b", 5); err != nil || n != 5 {
		t.Fatalf("Add(b, 5) = %d, %v; want 5", n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait(a, b) = %v", err)
	}
	if n, err := c2.Add(ctx, "b", -7); err != nil || n != -2 {
		t.Fatalf("Add(b, -7) = %d, %v; want -2", n, err)
	}
	if v, err := c.Get(ctx, "b", time.Second); err != nil || string(v) != "-2" {
		t.Fatalf("Get(b) = %q, %v; want -2 (decimal, as torch stores it)", v, err)
	}
	for _, tc := range []struct{ exp, des, want string }{{"x", "y", "x"}, {"", "v1", "v1"}, {"v0", "v2", "v1"}, {"v1", "v2", "v2"}} {
		if v, err := c.CompareSet(ctx, "cs", []byte(tc.exp), []byte(tc.des)); err != nil || string(v) != tc.want {
			t.Fatalf("CompareSet(cs, %q, %q) = %q, %v; want %q", tc.exp, tc.des, v, err, tc.want)
		}
	}
	if n, err := c.NumKeys(ctx); err != nil || n != 3 {
		t.Fatalf("NumKeys = %d, %v; want 3", n, err)
	}
	if ok, err := c.Delete(ctx, "cs"); err != nil || !ok {
		t.Fatalf("Delete(cs) = %v, %v; want true", ok, err)
	}
	if ok, err := c.Delete(ctx, "cs"); err != nil || ok {
		t.Fatalf("Delete(cs) again = %v, %v; want false", ok, err)
	}
	err = c.Wait(ctx, []string{"never"}, 100*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wait(never) = %v; want ErrTimeout", err)
	}
	if _, err := c.Check(ctx, "a"); err == nil {
		t.Fatalf("Check after a timed-out Wait succeeded; want the connection closed")
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := c2.Wait(cctx, []string{"never"}, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled = %v; want context.Canceled", err)
	}
}

func TestHTTPServerIsNotAStore(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c := dial(t, srv.Listener.Addr().String())
	_, err := c.Check(context.Background(), "probe\r\n\r\n")
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Check against HTTP = %v; want ErrProtocol", err)
	}
}

func python(t *testing.T) string { return pyoracle.Python(t, "torch.distributed") }

// TestTorchClient: torch's TCPStore client against the Go server.
func TestTorchClient(t *testing.T) {
	py := python(t)
	s, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	port := s.Addr().(*net.TCPAddr).Port
	script := `
import sys, datetime
import torch.distributed as dist
st = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 2, False, datetime.timedelta(seconds=10))
st.set("py", "hello")
assert st.get("py") == b"hello"
assert st.add("n", 5) == 5 and st.add("n", 2) == 7
assert st.compare_set("cs", "", "one") == b"one"
assert st.compare_set("cs", "zzz", "two") == b"one"
assert st.compare_set("cs", "one", "two") == b"two"
st.wait(["go"])
print("go=" + st.get("go").decode())
print("keys=%d" % st.num_keys())
assert st.delete_key("cs") and not st.delete_key("cs")
print("done")
`
	cmd := exec.Command(py, "-c", script, strconv.Itoa(port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.Addr().String())
	ctx := context.Background()
	if v, err := c.Get(ctx, "py", 30*time.Second); err != nil || string(v) != "hello" {
		t.Fatalf("Go Get(py) = %q, %v; want hello (set by torch)", v, err)
	}
	if err := c.Wait(ctx, []string{"n", "cs"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "go", []byte("world")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("torch client: %v\n%s", err, out.String())
	}
	o := out.String()
	// torch's own keys: its client adds "init/" when it joins with a world size.
	if !strings.Contains(o, "go=world") || !strings.Contains(o, "keys=") || !strings.Contains(o, "done") {
		t.Fatalf("torch client printed %q", o)
	}
	if n, _ := c.Add(ctx, "n", 0); n != 7 {
		t.Errorf("Go Add(n, 0) = %d; want torch's 7", n)
	}
}

// TestTorchServer: the Go client against torch's TCPStore(is_master=True).
func TestTorchServer(t *testing.T) {
	py := python(t)
	script := `
import sys, datetime
import torch.distributed as dist
st = dist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=30), wait_for_workers=False)
print(st.port, flush=True)
st.set("py", "hello")
st.wait(["go"])
assert st.get("go") == b"world", st.get("go")
assert st.add("n", 0) == 3
st.set("bye", "1")
st.wait(["gone"])
print("done", flush=True)
`
	cmd := exec.Command(py, "-c", script)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("torch server printed no port")
	}
	c := dial(t, "127.0.0.1:"+strings.TrimSpace(sc.Text()))
	ctx := context.Background()
	if v, err := c.Get(ctx, "py", 30*time.Second); err != nil || string(v) != "hello" {
		t.Fatalf("Get(py) = %q, %v; want hello", v, err)
	}
	if ok, err := c.Check(ctx, "py", "nope"); err != nil || ok {
		t.Fatalf("Check(py, nope) = %v, %v; want false", ok, err)
	}
	if n, err := c.Add(ctx, "n", 3); err != nil || n != 3 {
		t.Fatalf("Add(n, 3) = %d, %v", n, err)
	}
	if v, err := c.CompareSet(ctx, "cs", nil, []byte("a")); err != nil || string(v) != "a" {
		t.Fatalf("CompareSet(cs) = %q, %v; want a", v, err)
	}
	if err := c.Set(ctx, "go", []byte("world")); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, []string{"bye"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := c.NumKeys(ctx); err != nil || n < 5 {
		t.Fatalf("NumKeys = %d, %v; want at least py, go, n, cs, bye", n, err)
	}
	if ok, err := c.Delete(ctx, "cs"); err != nil || !ok {
		t.Fatalf("Delete(cs) = %v, %v", ok, err)
	}
	if err := c.Set(ctx, "gone", nil); err != nil {
		t.Fatal(err)
	}
	if !sc.Scan() || sc.Text() != "done" {
		t.Fatalf("torch server did not finish: %q", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("torch server: %v", err)
	}
}

// FuzzReadQuery feeds arbitrary bytes to the server's parser and applies what
// parses to a store: no panic, and allocations bounded by the limits.
func FuzzReadQuery(f *testing.F) {
	for _, q := range []Query{
		{Type: Set, Keys: []string{"/k"}, Vals: [][]byte{[]byte("v")}},
		{Type: CompareSet, Keys: []string{"/k"}, Vals: [][]byte{nil, []byte("v")}},
		{Type: Get, Keys: []string{"/k"}},
		{Type: Add, Keys: []string{"/n"}, Delta: 3},
		{Type: Check, Keys: []string{"/a", "/b"}},
		{Type: Wait, Keys: []string{"/k"}},
		{Type: GetNumKeys},
		{Type: DeleteKey, Keys: []string{"/k"}},
	} {
		f.Add(AppendQuery(nil, q))
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		st := newState()
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			q, err := ReadQuery(r)
			if err != nil {
				return
			}
			back, err := ReadQuery(bufio.NewReader(bytes.NewReader(AppendQuery(nil, q))))
			if err != nil || back.Type != q.Type || len(back.Keys) != len(q.Keys) {
				t.Fatalf("query %+v does not survive a round trip: %+v, %v", q, back, err)
			}
			if _, w, err := st.apply(q); err == nil && w != nil {
				st.drop(w)
			}
			if st.size > MaxStore {
				t.Fatalf("store holds %d bytes", st.size)
			}
		}
	})
}

// TestSecret: a server with a secret serves only clients that prove it, and
// only queries tagged in their session; the secret never crosses the wire.
func TestSecret(t *testing.T) {
	secret := []byte("s3cret-of-the-job")
	s, err := Listen("127.0.0.1:0", Options{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addr().String()
	ctx := context.Background()

	var wire bytes.Buffer
	c := dial(t, addr)
	c.conn = teeConn{c.conn, &wire}
	if err := c.Hello(ctx, secret); err != nil {
		t.Fatalf("Hello with the secret = %v", err)
	}
	if v, err := c.CompareSet(ctx, "k", nil, []byte("v")); err != nil || string(v) != "v" {
		t.Fatalf("CompareSet after Hello = %q, %v", v, err)
	}
	if n, err := c.Add(ctx, "n", 2); err != nil || n != 2 {
		t.Fatalf("Add after Hello = %d, %v", n, err)
	}
	if bytes.Contains(wire.Bytes(), secret) {
		t.Errorf("the secret crossed the wire")
	}

	// A query without a hello (torch's client, or a stranger): closed unanswered.
	plain := dial(t, addr)
	if _, err := plain.CompareSet(ctx, "k", []byte("v"), []byte("stolen")); err == nil {
		t.Errorf("a compare-set without a hello was answered")
	}
	for _, tc := range []struct {
		name   string
		secret []byte
	}{{"none", nil}, {"wrong", []byte("guess")}} {
		o := dial(t, addr)
		if err := o.Hello(ctx, tc.secret); !errors.Is(err, ErrAuth) {
			t.Errorf("Hello with secret %s = %v; want ErrAuth", tc.name, err)
		}
		if _, err := o.Add(ctx, "n", 1); err == nil {
			t.Errorf("Add after a failed Hello (%s) was answered", tc.name)
		}
	}
	// A query whose tag is not its place in the session (a replay): closed.
	r := dial(t, addr)
	if err := r.Hello(ctx, secret); err != nil {
		t.Fatal(err)
	}
	r.sess.seq = 5
	if _, err := r.Add(ctx, "n", 1); err == nil {
		t.Errorf("an Add tagged out of sequence was answered")
	}
	if n, err := c.Add(ctx, "n", 0); err != nil || n != 2 {
		t.Errorf("the counter is %d, %v after the refused adds; want 2", n, err)
	}
	if v, err := c.Get(ctx, "k", time.Second); err != nil || string(v) != "v" {
		t.Errorf("k = %q, %v after the refused compare-set; want v", v, err)
	}

	// A server without a secret: a client with one is told, a client
	// without one is served.
	open, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := dial(t, open.Addr().String()).Hello(ctx, secret); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "has no secret") {
		t.Errorf("Hello with a secret to an open store = %v; want ErrAuth saying it has none", err)
	}
	oc := dial(t, open.Addr().String())
	if err := oc.Hello(ctx, nil); err != nil {
		t.Fatalf("Hello without a secret to an open store = %v", err)
	}
	if n, err := oc.Add(ctx, "n", 3); err != nil || n != 3 {
		t.Errorf("Add after an open Hello = %d, %v", n, err)
	}
}

// teeConn copies what the client writes to w.
type teeConn struct {
	net.Conn
	w *bytes.Buffer
}

func (c teeConn) Write(b []byte) (int, error) {
	c.w.Write(b)
	return c.Conn.Write(b)
}
