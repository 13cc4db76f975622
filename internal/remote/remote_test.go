package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/remote/remotetest"
)

func blob(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// serve starts an HTTPS server with h and a Client that trusts it, with short timeouts and backoff.
func serve(t *testing.T, h http.Handler) (*httptest.Server, *Client) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return srv, &Client{HTTP: srv.Client(), Timeout: 150 * time.Millisecond, Backoff: time.Millisecond}
}

func TestFileReadsThroughFaults(t *testing.T) {
	data := blob(300_000, 1)
	h := &remotetest.Handler{Files: map[string][]byte{"a.tar": data}, Faults: remotetest.AllFaults}
	srv, c := serve(t, h)
	ctx := context.Background()
	f, err := c.Open(ctx, srv.URL+"/a.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != int64(len(data)) {
		t.Fatalf("size %d, want %d", f.Size(), len(data))
	}
	// Sequential, from the start and from the middle.
	for _, off := range []int64{0, 123_457} {
		r := f.NewReader(off)
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("read from %d: %v", off, err)
		}
		if !bytes.Equal(got, data[off:]) {
			t.Fatalf("read from %d: %d bytes differ from the %d expected", off, len(got), len(data)-int(off))
		}
	}
	// Random access, concurrently.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 10 {
				off := r.IntN(len(data))
				n := r.IntN(20_000) + 1
				p := make([]byte, n)
				k, err := f.ReadAt(p, int64(off))
				want := data[off:min(off+n, len(data))]
				if k != len(want) || !bytes.Equal(p[:k], want) || (k < n) != (err == io.EOF) || (err != nil && err != io.EOF) {
					t.Errorf("ReadAt(%d, %d) = %d, %v", n, off, k, err)
				}
			}
		})
	}
	wg.Wait()
	// Seek and Read the way archive/tar does: short forward skips, then a jump back.
	for _, off := range []int64{1000, 1500, 600_000 % int64(len(data)), 10} {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 512)
		if _, err := io.ReadFull(f, p); err != nil || !bytes.Equal(p, data[off:off+512]) {
			t.Fatalf("read 512 at %d: %v", off, err)
		}
	}
}

func TestPermanentErrorNamesURLAndStatus(t *testing.T) {
	h := &remotetest.Handler{Files: map[string][]byte{"a.tar": blob(1000, 2)}}
	srv, c := serve(t, h)
	_, err := c.Open(context.Background(), srv.URL+"/missing.tar")
	se, ok := errors.AsType[*StatusError](err)
	if !ok || se.Status != http.StatusNotFound || !strings.Contains(err.Error(), srv.URL+"/missing.tar") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("error %v, want a 404 StatusError naming the URL", err)
	}
}

func TestGivesUpAfterAttempts(t *testing.T) {
	var gets int
	var mu sync.Mutex
	srv, c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", "1000")
			return
		}
		mu.Lock()
		gets++
		mu.Unlock()
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	c.Attempts = 3
	f, err := c.Open(context.Background(), srv.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(make([]byte, 10), 0)
	if se, ok := errors.AsType[*StatusError](err); !ok || se.Status != 503 || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("error %v, want the last 503 after 3 attempts", err)
	}
	if gets != 3 {
		t.Fatalf("%d GETs, want 3", gets)
	}
}

func TestReplacedObjectIsNotSpliced(t *testing.T) {
	data := blob(50_000, 3)
	h := &remotetest.Handler{Files: map[string][]byte{"a.tar": data}}
	srv, c := serve(t, h)
	f, err := c.Open(context.Background(), srv.URL+"/a.tar")
	if err != nil {
		t.Fatal(err)
	}
	obj := f.Object()
	obj.ETag = `"v0"` // as if the object had changed since it was listed
	g, _ := c.OpenObject(obj)
	if _, err := g.ReadAt(make([]byte, 10), 5); err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("read of a replaced object: %v, want HTTP 412", err)
	}
}

func TestListRefusesWildcardsOverHTTP(t *testing.T) {
	_, c := serve(t, &remotetest.Handler{})
	if _, err := c.List(context.Background(), "https://example.invalid/shard-*.tar"); err == nil || !strings.Contains(err.Error(), "braces") {
		t.Fatalf("List over https with a wildcard: %v", err)
	}
}

func TestCache(t *testing.T) {
	files := map[string][]byte{}
	for i, name := range []string{"a.tar", "b.tar", "c.tar"} {
		files[name] = blob(40_000, uint64(10+i))
	}
	h := &remotetest.Handler{Files: files, Faults: remotetest.AllFaults}
	srv, c := serve(t, h)
	dir := t.TempDir()
	cache, err := NewCache(c, dir, 100_000) // room for two of the three
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	ctx := context.Background()
	objs := map[string]Object{}
	for name := range files {
		objs[name], err = c.Stat(ctx, srv.URL+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
	}
	open := func(name string) {
		t.Helper()
		fh, err := cache.Open(ctx, objs[name], "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		got, _ := io.ReadAll(fh)
		if !bytes.Equal(got, files[name]) {
			t.Fatalf("%s: cached copy differs", name)
		}
	}
	// Concurrent opens of one object download it once.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { open("a.tar") })
	}
	wg.Wait()
	open("a.tar")
	if n := h.Requests("a.tar"); n < 1 || n > 1+len(remotetest.AllFaults) {
		t.Fatalf("a.tar: %d GETs for one download", n)
	}
	before := h.Requests("a.tar")
	open("b.tar")
	time.Sleep(10 * time.Millisecond) // modification times must differ
	open("a.tar")                     // a is now the most recently used
	time.Sleep(10 * time.Millisecond)
	open("c.tar") // evicts b, the least recently used
	if h.Requests("a.tar") != before {
		t.Fatalf("a.tar downloaded again while cached")
	}
	names, _ := filepath.Glob(filepath.Join(dir, "[^.]*")) // copies, not lock files
	if len(names) != 2 {
		t.Fatalf("cache holds %v, want two copies", names)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "b.tar") {
			t.Fatalf("b.tar, the least recently used, was kept: %v", names)
		}
	}
	bBefore := h.Requests("b.tar")
	open("b.tar")
	if h.Requests("b.tar") == bBefore {
		t.Fatalf("evicted b.tar served without a download")
	}
}

// Two caches on one folder (as two processes would share it) never see a torn copy.
func TestCacheSharedFolder(t *testing.T) {
	files := map[string][]byte{}
	for i := range 6 {
		files[string(rune('a'+i))+".tar"] = blob(60_000, uint64(20+i))
	}
	h := &remotetest.Handler{Files: files, Faults: []remotetest.Fault{remotetest.None, remotetest.Cut}}
	srv, c := serve(t, h)
	dir := t.TempDir()
	ctx := context.Background()
	var wg sync.WaitGroup
	for p := range 2 {
		cache, err := NewCache(c, dir, 200_000)
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 3))
			for range 20 {
				name := string(rune('a'+r.IntN(6))) + ".tar"
				fh, err := cache.Open(ctx, Object{URL: srv.URL + "/" + name, Size: int64(len(files[name])), ETag: `"v1-` + name + `"`}, "", nil)
				if err != nil {
					t.Error(err)
					return
				}
				got, _ := io.ReadAll(fh)
				fh.Close()
				if !bytes.Equal(got, files[name]) {
					t.Errorf("%s: torn or wrong copy (%d bytes)", name, len(got))
				}
			}
		})
	}
	wg.Wait()
	tmps, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*"))
	if len(tmps) != 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
}

// Processes sharing a folder download a copy once: the others wait for it.
func TestCacheDownloadsOnceAcrossProcesses(t *testing.T) {
	data := blob(500_000, 40)
	h := &remotetest.Handler{Files: map[string][]byte{"a.tar": data}}
	srv, c := serve(t, h)
	dir := t.TempDir()
	obj := Object{URL: srv.URL + "/a.tar", Size: int64(len(data)), ETag: `"v1-a.tar"`}
	var wg sync.WaitGroup
	for range 4 {
		cache, err := NewCache(c, dir, 0) // each as a process of its own: its own lock file handle
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		wg.Go(func() {
			fh, err := cache.Open(context.Background(), obj, "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			got, _ := io.ReadAll(fh)
			fh.Close()
			if !bytes.Equal(got, data) {
				t.Error("copy differs")
			}
		})
	}
	wg.Wait()
	if n := h.Requests("a.tar"); n != 1 {
		t.Fatalf("%d downloads by four caches sharing a folder, want 1", n)
	}
}

func TestCacheDecodesAndPrefetches(t *testing.T) {
	files := map[string][]byte{"a.tar": blob(30_000, 4), "b.tar": blob(30_000, 5)}
	h := &remotetest.Handler{Files: files}
	srv, c := serve(t, h)
	cache, err := NewCache(c, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	upper := func(r io.Reader) (io.Reader, func(), error) {
		b, err := io.ReadAll(r)
		return bytes.NewReader(bytes.ToUpper(b)), func() {}, err
	}
	var objs []Object
	for _, n := range []string{"a.tar", "b.tar"} {
		objs = append(objs, Object{URL: srv.URL + "/" + n, Size: 30_000, ETag: `"v1-` + n + `"`})
	}
	for _, o := range objs {
		cache.Prefetch(o, "upper", upper)
	}
	cache.wg.Wait()
	for i, n := range []string{"a.tar", "b.tar"} {
		fh, err := cache.Open(context.Background(), objs[i], "upper", upper)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(fh)
		fh.Close()
		if !bytes.Equal(got, bytes.ToUpper(files[n])) {
			t.Fatalf("%s: decoded copy differs", n)
		}
		if h.Requests(n) != 1 {
			t.Fatalf("%s: %d GETs after a prefetch and an open, want 1", n, h.Requests(n))
		}
	}
	// The raw variant is a different copy.
	fh, err := cache.Open(context.Background(), objs[0], "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(fh)
	fh.Close()
	if !bytes.Equal(got, files["a.tar"]) {
		t.Fatal("raw copy differs")
	}
}

// TestServerSendsOtherBytes: a response that does not hold the bytes asked for (another range, no
// Content-Range, a whole object of another size: replaced since it was described, or a server that
// mishandles ranges) is a permanent error naming the URL, never bytes spliced into a read.
func TestServerSendsOtherBytes(t *testing.T) {
	data := blob(10_000, 4)
	tests := []struct {
		name string
		// serve answers a GET for bytes [off, end] (end -1: no Range).
		serve func(w http.ResponseWriter, off, end int)
		off   int64
		n     int
	}{
		{"another range", func(w http.ResponseWriter, off, end int) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off+512, end+512, len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[off+512 : end+513])
		}, 100, 1000},
		{"shifted bytes under the asked range", func(w http.ResponseWriter, off, end int) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, end, len(data)+512))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[off+512 : end+513])
		}, 100, 1000},
		{"no Content-Range", func(w http.ResponseWriter, off, end int) {
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[off : end+1])
		}, 100, 1000},
		{"a longer object", func(w http.ResponseWriter, off, end int) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, end, len(data)+4096))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[off : end+1])
		}, 100, 1000},
		{"a whole longer object", func(w http.ResponseWriter, off, end int) {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)+4096))
			w.Write(append(data[:len(data):len(data)], make([]byte, 4096)...))
		}, 0, len(data)},
		{"a whole shorter object", func(w http.ResponseWriter, off, end int) {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)-512))
			w.Write(data[:len(data)-512])
		}, 0, len(data)},
	}
	for _, tc := range tests {
		for _, scheme := range []string{"https", "s3"} {
			t.Run(scheme+" "+tc.name, func(t *testing.T) {
				var gets int
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					gets++
					off, end := 0, -1
					if rg := r.Header.Get("Range"); rg != "" {
						fmt.Sscanf(rg, "bytes=%d-%d", &off, &end)
					}
					tc.serve(w, off, end)
				})
				var c *Client
				var url string
				if scheme == "https" {
					var srv *httptest.Server
					srv, c = serve(t, h)
					url = srv.URL + "/a.tar"
				} else {
					// An S3 endpoint (path-style: /BUCKET/KEY) that answers the same way.
					fakeS3(t, h)
					c = &Client{Timeout: 5 * time.Second, Backoff: time.Millisecond}
					url = "s3://bucket/a.tar"
				}
				f, err := c.OpenObject(Object{URL: url, Size: int64(len(data))})
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				p := make([]byte, tc.n)
				n, err := f.ReadAt(p, tc.off)
				if err == nil || !strings.Contains(err.Error(), url) ||
					!strings.Contains(err.Error(), "the object changed since it was described, or the server mishandles ranges") {
					t.Fatalf("ReadAt: %d bytes (same: %v), %v; want an error naming the URL and the mismatch", n, bytes.Equal(p[:n], data[tc.off:tc.off+int64(n)]), err)
				}
				if gets != 1 {
					t.Fatalf("%d GETs; want 1 (not retried)", gets)
				}
			})
		}
	}
}

// TestGet: a whole small object in one GET, through every fault; a missing one is NotFound; one
// over the limit is ErrTooLarge.
func TestGet(t *testing.T) {
	data := blob(10_000, 3)
	h := &remotetest.Handler{Files: map[string][]byte{"index.json": data}, Faults: remotetest.AllFaults}
	srv, c := serve(t, h)
	ctx := context.Background()
	for range len(remotetest.AllFaults) {
		got, err := c.Get(ctx, srv.URL+"/index.json", int64(len(data)))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get = %d bytes, %v; want the %d bytes", len(got), err, len(data))
		}
	}
	if _, err := c.Get(ctx, srv.URL+"/index.json", int64(len(data))-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Get over the limit: %v; want ErrTooLarge", err)
	}
	_, err := c.Get(ctx, srv.URL+"/missing.json", 100)
	if !NotFound(err) || !strings.Contains(err.Error(), srv.URL+"/missing.json") {
		t.Fatalf("Get of a missing object: %v; want NotFound naming the URL", err)
	}
	if NotFound(fmt.Errorf("x: %w", &StatusError{URL: "u", Status: 403})) {
		t.Fatal("403 taken for not found")
	}
}
