package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// weights is a safetensors file of n bytes: an empty header padded with spaces.
func weights(n int) []byte {
	b := append([]byte{byte(n - 8), byte((n - 8) >> 8), byte((n - 8) >> 16), 0, 0, 0, 0, 0, '{', '}'}, bytes.Repeat([]byte(" "), n-10)...)
	return b
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// hubServer serves files as the Hugging Face hub does (/{repo}/resolve/{rev}/{file}, with the
// commit and the file's SHA-256 as its ETag in the headers, ranges honoured) and, at other paths,
// as a plain web server; it counts the GETs of each path, and a repository "org/private" needs the
// token "secret".
type hubServer struct {
	*httptest.Server
	files map[string][]byte // by path
	gets  sync.Map          // path -> *atomic.Int32
	auth  sync.Map          // path -> the last Authorization header
	// cut, when positive, is the bytes the next GET sends before the connection drops.
	cut atomic.Int64

	mu       sync.Mutex
	ranges   []string     // the Range header of each GET
	requests atomic.Int32 // of any method
}

// lookup is the served path that p asks for: itself, or the same repository's file at the
// commit the hub names (the revision the files are registered under may be a branch).
func (s *hubServer) lookup(p string) (string, bool) {
	if _, ok := s.files[p]; ok {
		return p, true
	}
	repo, rest, ok := strings.Cut(p, "/resolve/"+commit+"/")
	for k := range s.files {
		if kr, krest, kok := strings.Cut(k, "/resolve/"); ok && kok && kr == repo && strings.HasSuffix(krest, "/"+rest) {
			return k, true
		}
	}
	return p, false
}

const commit = "0123456789abcdef0123456789abcdef01234567"

func newHubServer(t *testing.T, files map[string][]byte) *hubServer {
	s := &hubServer{files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := s.lookup(r.URL.Path)
		s.auth.Store(path, r.Header.Get("Authorization"))
		body := s.files[path]
		if strings.HasPrefix(r.URL.Path, "/org/private/") && r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, "gated", http.StatusUnauthorized)
			return
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.Contains(r.URL.Path, "/resolve/") {
			w.Header().Set("X-Repo-Commit", commit)
			w.Header().Set("ETag", `"`+sum(body)+`"`)
		}
		s.requests.Add(1)
		if r.Method == http.MethodGet {
			n, _ := s.gets.LoadOrStore(path, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			s.mu.Lock()
			s.ranges = append(s.ranges, r.Header.Get("Range"))
			s.mu.Unlock()
			if cut := s.cut.Swap(0); cut > 0 {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				w.Write(body[:cut])
				panic(http.ErrAbortHandler) // the connection drops mid-body
			}
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hubServer) getsOf(path string) int32 {
	if n, ok := s.gets.Load(path); ok {
		return n.(*atomic.Int32).Load()
	}
	return 0
}

// caches points every cache at a folder of the test's own.
func caches(t *testing.T) (hfHome, torchHome string) {
	hfHome, torchHome = t.TempDir(), t.TempDir()
	t.Setenv("HF_HOME", hfHome)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("TORCH_HOME", torchHome)
	t.Setenv("STOKE_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_TOKEN", "")
	return hfHome, torchHome
}

// TestFetch: hub names, timm's NAME.TAG, a torchvision-named URL and another URL are downloaded
// once each into the cache Python's libraries use (huggingface_hub's snapshots linked to their
// blobs, its refs) or stoke's, and read from it after; a repository without
// model.safetensors gives its pytorch_model.bin; a file whose hash does not match, or that is no
// weights file, is refused and not kept; a local file is itself; an unknown name is ErrName.
func TestFetch(t *testing.T) {
	hfHome, torchHome := caches(t)
	atto, old, plain := weights(1000), append([]byte("PK\x03\x04"), weights(100)...), weights(50)
	tvName := "m-" + sum(plain)[:8] + ".pth"
	srv := newHubServer(t, map[string][]byte{
		"/timm/convnext_atto.d2_in1k/resolve/main/model.safetensors": atto,
		"/org/old/resolve/v1/pytorch_model.bin":                      old,
		"/models/" + tvName:                                          plain,
		"/models/m-00000000.pth":                                     plain,
		"/w.safetensors":                                             plain,
		"/login.safetensors":                                         []byte("<!DOCTYPE html><html>sign in</html>"),
	})
	t.Setenv("HF_ENDPOINT", srv.URL)
	for _, c := range []struct {
		name, path, want string
		body             []byte
	}{
		{"hf-hub:timm/convnext_atto.d2_in1k", "/timm/convnext_atto.d2_in1k/resolve/main/model.safetensors",
			filepath.Join(hfHome, "hub/models--timm--convnext_atto.d2_in1k/snapshots", commit, "model.safetensors"), atto},
		{"convnext_atto.d2_in1k", "/timm/convnext_atto.d2_in1k/resolve/main/model.safetensors",
			filepath.Join(hfHome, "hub/models--timm--convnext_atto.d2_in1k/snapshots", commit, "model.safetensors"), atto},
		{"hf-hub:org/old@v1", "/org/old/resolve/v1/pytorch_model.bin",
			filepath.Join(hfHome, "hub/models--org--old/snapshots", commit, "pytorch_model.bin"), old},
		{srv.URL + "/models/" + tvName, "/models/" + tvName, "", plain}, // not torchvision's host: stoke's cache, its hash checked
		{srv.URL + "/w.safetensors?download=true", "/w.safetensors", "", plain},
	} {
		p, err := Fetch(t.Context(), c.name, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.want != "" && p != c.want {
			t.Errorf("%s: at %s; want %s", c.name, p, c.want)
		}
		if strings.Contains(p, "?") {
			t.Errorf("%s: cached as %s, with the query in its name", c.name, p)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, c.body) {
			t.Errorf("%s: %s holds %d bytes, not the served %d", c.name, p, len(b), len(c.body))
		}
		if again, err := Fetch(t.Context(), c.name, nil); err != nil || again != p {
			t.Errorf("%s again: %s, %v; want the cached %s", c.name, again, err, p)
		}
		if n := srv.getsOf(c.path); n != 1 {
			t.Errorf("%s: %s downloaded %d times; want once", c.name, c.path, n)
		}
	}
	// huggingface_hub's layout: the snapshot links to the blob named by its ETag, refs/main names
	// the commit.
	repo := filepath.Join(hfHome, "hub/models--timm--convnext_atto.d2_in1k")
	if link, err := os.Readlink(filepath.Join(repo, "snapshots", commit, "model.safetensors")); err != nil || link != filepath.Join("..", "..", "blobs", sum(atto)) {
		t.Errorf("the snapshot links to %q (%v); want ../../blobs/%s", link, err, sum(atto))
	}
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err != nil || string(ref) != commit {
		t.Errorf("refs/main holds %q (%v); want the commit %s", ref, err, commit)
	}
	if _, err := Fetch(t.Context(), srv.URL+"/models/m-00000000.pth", nil); err == nil || !strings.Contains(err.Error(), "does not start with 00000000") {
		t.Errorf("a hash mismatch: %v", err)
	}
	if _, err := Fetch(t.Context(), srv.URL+"/login.safetensors", nil); err == nil || !strings.Contains(err.Error(), "not a weights file") {
		t.Errorf("an HTML page: %v", err)
	}
	if kept, _ := filepath.Glob(filepath.Join(os.Getenv("STOKE_CACHE"), "weights", "*m-00000000.pth*")); len(kept) != 0 {
		t.Errorf("%v kept", kept)
	}
	if kept, _ := os.ReadDir(filepath.Join(torchHome, "hub/checkpoints")); len(kept) != 0 {
		t.Errorf("torch.hub's cache holds %v, from another host than torchvision's", kept)
	}
	if _, err := Fetch(t.Context(), srv.URL+"/missing.safetensors", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := Fetch(t.Context(), "hf-hub:org/none", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a repository without weights: %v", err)
	}
	local := filepath.Join(t.TempDir(), "mine.safetensors")
	os.WriteFile(local, plain, 0o644)
	if p, err := Fetch(t.Context(), local, nil); err != nil || p != local {
		t.Errorf("a local file: %s, %v", p, err)
	}
	for _, name := range []string{"resnet50.IMAGENET9K", "missing.safetensors", "hf-hub:../etc"} {
		if _, err := Fetch(t.Context(), name, nil); !errors.Is(err, ErrName) {
			t.Errorf("%s: %v; want ErrName", name, err)
		}
	}
}

// TestFetchOffline: with HF_HUB_OFFLINE=1 a cached hub file is found without the network, one
// not cached is ErrOffline, and no request is made.
func TestFetchOffline(t *testing.T) {
	caches(t)
	srv := newHubServer(t, map[string][]byte{
		"/timm/a.b/resolve/main/model.safetensors": weights(100),
		"/timm/c.d/resolve/main/model.safetensors": weights(100),
	})
	t.Setenv("HF_ENDPOINT", srv.URL)
	cached, err := Fetch(t.Context(), "hf-hub:timm/a.b", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	before := srv.requests.Load()
	if p, err := Fetch(t.Context(), "hf-hub:timm/a.b", nil); err != nil || p != cached {
		t.Errorf("offline, cached: %s, %v; want %s", p, err, cached)
	}
	if _, err := Fetch(t.Context(), "hf-hub:timm/c.d", nil); !errors.Is(err, ErrOffline) {
		t.Errorf("offline, not cached: %v; want ErrOffline", err)
	}
	if n := srv.requests.Load(); n != before {
		t.Errorf("offline: %d requests", n-before)
	}
}

// TestFetchToken: HF_TOKEN opens a gated repository and goes to the hub's host alone.
func TestFetchToken(t *testing.T) {
	caches(t)
	srv := newHubServer(t, map[string][]byte{"/org/private/resolve/main/model.safetensors": weights(100)})
	other := newHubServer(t, map[string][]byte{"/w.safetensors": weights(100)})
	t.Setenv("HF_ENDPOINT", srv.URL)
	if _, err := Fetch(t.Context(), "hf-hub:org/private", nil); err == nil || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Errorf("a gated repository without a token: %v; want a hint to set HF_TOKEN", err)
	}
	t.Setenv("HF_TOKEN", "secret")
	if _, err := Fetch(t.Context(), "hf-hub:org/private", nil); err != nil {
		t.Errorf("a gated repository with its token: %v", err)
	}
	if _, err := Fetch(t.Context(), other.URL+"/w.safetensors", nil); err != nil {
		t.Fatal(err)
	}
	if a, _ := other.auth.Load("/w.safetensors"); a != "" {
		t.Errorf("another host got Authorization %q", a)
	}
}

// TestFetchResumes: a hub download cut off halfway is resumed from where it stopped (a Range
// request), its progress counted from there, and the file is whole.
func TestFetchResumes(t *testing.T) {
	caches(t)
	body := weights(1 << 20)
	const path = "/timm/big.x/resolve/main/model.safetensors"
	srv := newHubServer(t, map[string][]byte{path: body})
	t.Setenv("HF_ENDPOINT", srv.URL)
	srv.cut.Store(600 << 10)
	if _, err := Fetch(t.Context(), "hf-hub:timm/big.x", nil); err == nil {
		t.Fatal("a download cut off halfway succeeded")
	}
	var reports [][2]int64
	p, err := Fetch(t.Context(), "hf-hub:timm/big.x", func(done, total int64) { reports = append(reports, [2]int64{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reports); n == 0 || reports[0][0] <= 600<<10 || reports[n-1] != [2]int64{1 << 20, 1 << 20} {
		t.Errorf("progress reported %v; want from past the %d bytes already there to %d of %d", reports, 600<<10, 1<<20, 1<<20)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, body) {
		t.Errorf("the resumed file differs from the served one")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.ranges) != 2 || srv.ranges[1] != fmt.Sprintf("bytes=%d-", 600<<10) {
		t.Errorf("the downloads asked for %q; want all, then bytes from %d on", srv.ranges, 600<<10)
	}
}

// TestFetchConcurrent: fetches of one file at once all succeed, and it is downloaded once.
func TestFetchConcurrent(t *testing.T) {
	caches(t)
	const path = "/timm/c.d/resolve/main/model.safetensors"
	srv := newHubServer(t, map[string][]byte{path: weights(4 << 20)})
	t.Setenv("HF_ENDPOINT", srv.URL)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = Fetch(t.Context(), "hf-hub:timm/c.d", nil) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := srv.getsOf(path); n != 1 {
		t.Errorf("4 fetches at once downloaded it %d times; want once", n)
	}
}

// TestURL: torchvision's names give its download URLs, DEFAULT its enum's DEFAULT; hub names
// their repository's model.safetensors.
func TestURL(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "")
	for name, want := range map[string]string{
		"resnet50.IMAGENET1K_V2":                        "https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
		"resnet50.DEFAULT":                              "https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
		"resnet18.DEFAULT":                              "https://download.pytorch.org/models/resnet18-f37072fd.pth",
		"vit_h_14.DEFAULT":                              "https://download.pytorch.org/models/vit_h_14_swag-80465313.pth",
		"efficientnet_b0.IMAGENET1K_V1":                 "https://download.pytorch.org/models/efficientnet_b0_rwightman-3dd342df.pth",
		"hf-hub:timm/vit_tiny_patch16_224.augreg_in21k": "https://huggingface.co/timm/vit_tiny_patch16_224.augreg_in21k/resolve/main/model.safetensors",
		"convnext_atto.d2_in1k":                         "https://huggingface.co/timm/convnext_atto.d2_in1k/resolve/main/model.safetensors",
	} {
		if got, ok := URL(name); !ok || got != want {
			t.Errorf("URL(%s) = %s, %v; want %s", name, got, ok, want)
		}
	}
}

// TestFetchStalled: a server that sends the header and part of the body, then nothing, is
// abandoned after the idle time, and nothing is kept.
func TestFetchStalled(t *testing.T) {
	defer func(d time.Duration) { idle = d }(idle)
	idle = 200 * time.Millisecond
	caches(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(weights(100)[:20])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	done := make(chan error, 1)
	go func() {
		_, err := Fetch(t.Context(), srv.URL+"/w.safetensors", nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "nothing received for 200ms") {
			t.Errorf("a stalled download: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled download still waits after 20 s")
	}
	kept, _ := filepath.Glob(filepath.Join(os.Getenv("STOKE_CACHE"), "weights", "*.safetensors"))
	if len(kept) != 0 {
		t.Errorf("a stalled download kept %v", kept)
	}
}

// TestModel: the names that name a model give it; files, URLs and other repositories do not.
func TestModel(t *testing.T) {
	for name, want := range map[string]string{
		"resnet50.IMAGENET1K_V2": "resnet50", "resnet18.DEFAULT": "resnet18", "convnext_atto.d2_in1k": "timm/convnext_atto",
		"hf-hub:timm/convnext_atto.d2_in1k": "timm/convnext_atto", "hf-hub:timm/vit_base_patch16_224.augreg_in21k@main": "timm/vit_base_patch16_224",
		"hf-hub:org/tiny": "", "hf-hub:timm/tiny": "", "w.safetensors": "", "https://x/resnet18-f37072fd.pth": "", "resnet50.IMAGENET9K": "",
		"swin_v2_b.IMAGENET1K_V1": "swin_v2_b", "regnet_y_128gf.DEFAULT": "regnet_y_128gf", "maxvit_t.IMAGENET1K_V1": "", "maxvit_t.DEFAULT": "",
	} {
		if got, ok := Model(name); got != want || ok != (want != "") {
			t.Errorf("Model(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestConfig: a hub repository's config.json is fetched beside its weights, once; a repository
// without one, or a name of no repository, gives none; a page that is no JSON is refused.
func TestConfig(t *testing.T) {
	hfHome, _ := caches(t)
	cfg := []byte(`{"architecture": "convnext_atto", "pretrained_cfg": {"crop_pct": 0.95}}`)
	srv := newHubServer(t, map[string][]byte{
		"/timm/a.b/resolve/main/model.safetensors": weights(100),
		"/timm/a.b/resolve/main/config.json":       cfg,
		"/timm/c.d/resolve/main/model.safetensors": weights(100),
		"/timm/e.f/resolve/main/config.json":       []byte("<html>"),
	})
	t.Setenv("HF_ENDPOINT", srv.URL)
	for range 2 {
		p, err := Config(t.Context(), "a.b")
		if err != nil || p != filepath.Join(hfHome, "hub/models--timm--a.b/snapshots", commit, "config.json") {
			t.Fatalf("Config(a.b) = %s, %v", p, err)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, cfg) {
			t.Errorf("config.json holds %q", b)
		}
	}
	if n := srv.getsOf("/timm/a.b/resolve/main/config.json"); n != 1 {
		t.Errorf("config.json downloaded %d times; want once", n)
	}
	for _, name := range []string{"hf-hub:timm/c.d", "w.safetensors", srv.URL + "/w.safetensors"} {
		if p, err := Config(t.Context(), name); p != "" || err != nil {
			t.Errorf("Config(%s) = %q, %v; want none", name, p, err)
		}
	}
	if _, err := Config(t.Context(), "e.f"); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("an HTML config.json: %v", err)
	}
}

// TestFetchTorchvision: a file of torchvision's host goes where torch.hub keeps it, checked
// against the hash in its name; the package's client reaches a local server for that host.
func TestFetchTorchvision(t *testing.T) {
	_, torchHome := caches(t)
	body := weights(300)
	name := "m-" + sum(body)[:8] + ".pth"
	pytorchServer(t, "/models/"+name, body)
	p, err := Fetch(t.Context(), "https://download.pytorch.org/models/"+name, nil)
	if err != nil || p != filepath.Join(torchHome, "hub/checkpoints", name) {
		t.Fatalf("Fetch = %s, %v; want torch.hub's %s", p, err, filepath.Join(torchHome, "hub/checkpoints", name))
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, body) {
		t.Errorf("%s holds %d bytes, not the served %d", p, len(b), len(body))
	}
}

// pytorchServer serves body at path, over TLS, to the package's client in place of every host
// (download.pytorch.org's) until the test ends.
func pytorchServer(t *testing.T, path string, body []byte) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	saved := *client
	t.Cleanup(func() { *client = saved })
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.InsecureSkipVerify = true // its certificate is not download.pytorch.org's
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	client.Transport = tr
}

// TestFetchTokenOnRedirect: the hub's redirect of a large file to its storage, a subdomain of
// its own, does not carry the token (Go's client would keep it for a subdomain).
func TestFetchTokenOnRedirect(t *testing.T) {
	caches(t)
	body := weights(1000)
	var storageAuth atomic.Value
	storageAuth.Store("")
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		storageAuth.Store(r.Header.Get("Authorization"))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	defer storage.Close()
	su, _ := url.Parse(storage.URL)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Repo-Commit", commit)
		w.Header().Set("X-Linked-Etag", `"`+sum(body)+`"`)
		w.Header().Set("Location", "http://cdn-lfs.hub.test:"+su.Port()+"/blob")
		w.WriteHeader(http.StatusFound)
	}))
	defer hub.Close()
	hu, _ := url.Parse(hub.URL)
	defer func(c http.Client) { *client = c }(*client)
	tr := client.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "cdn-lfs.hub.test:") {
			addr = su.Host
		} else if strings.HasPrefix(addr, "hub.test:") {
			addr = hu.Host
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	client.Transport = tr
	t.Setenv("HF_ENDPOINT", "http://hub.test:"+hu.Port())
	t.Setenv("HF_TOKEN", "hf_secret")
	p, err := Fetch(t.Context(), "hf-hub:org/m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, body) {
		t.Errorf("fetched %d bytes, not the stored %d", len(b), len(body))
	}
	if a := storageAuth.Load().(string); a != "" {
		t.Errorf("the hub's storage, cdn-lfs.hub.test, received Authorization %q", a)
	}
}

// TestFetchAtCommit: the file is fetched at the commit its revision was at when described, and
// checked against its ETag, a git blob's hash for a small file: a revision that moves between
// the two requests does not put another file under the first commit's snapshot.
func TestFetchAtCommit(t *testing.T) {
	caches(t)
	v1, v2 := weights(100), weights(120)
	blob := func(b []byte) string {
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		return hex.EncodeToString(h.Sum(nil))
	}
	moved := strings.Repeat("f", 40)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/org/m/resolve/main/model.safetensors": // main, moved to another commit after the HEAD
			if r.Method == http.MethodHead {
				w.Header().Set("X-Repo-Commit", commit)
				w.Header().Set("ETag", `"`+blob(v1)+`"`)
				return
			}
			w.Header().Set("X-Repo-Commit", moved)
			w.Header().Set("ETag", `"`+blob(v2)+`"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(v2))
		case "/org/m/resolve/" + commit + "/model.safetensors":
			w.Header().Set("X-Repo-Commit", commit)
			w.Header().Set("ETag", `"`+blob(v1)+`"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(v1))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	p, err := Fetch(t.Context(), "hf-hub:org/m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, v1) || !strings.Contains(p, commit) {
		t.Errorf("%s holds %d bytes; want the %d of commit %s", p, len(b), len(v1), commit)
	}
}

// TestFetchLongLeftover: a leftover longer than the file (a 416 to its Range) is started over.
func TestFetchLongLeftover(t *testing.T) {
	hfHome, _ := caches(t)
	body := weights(500)
	srv := newHubServer(t, map[string][]byte{"/org/m/resolve/main/model.safetensors": body})
	t.Setenv("HF_ENDPOINT", srv.URL)
	blobs := filepath.Join(hfHome, "hub/models--org--m/blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, sum(body)+".incomplete"), weights(800), 0o644)
	p, err := Fetch(t.Context(), "hf-hub:org/m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, body) {
		t.Errorf("fetched %d bytes, not the served %d", len(b), len(body))
	}
}

// TestCheck: a name Fetch takes passes; a missing file and an unknown name fail with ErrName; a
// torchvision model's unknown member lists the members it has, as torchvision's get_weight does.
func TestCheck(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{file, "resnet50.IMAGENET1K_V2", "efficientnet_b1.DEFAULT", "convnext_atto.d2_in1k", "hf-hub:timm/vit_tiny", "https://example.com/w.pth"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"resnet50.IMAGENET1K_V3": "torchvision's weights of resnet50 are DEFAULT, IMAGENET1K_V1, IMAGENET1K_V2",
		"vit_h_14.IMAGENET1K_V1": "IMAGENET1K_SWAG_E2E_V1, IMAGENET1K_SWAG_LINEAR_V1",
		file + ".missing":        "not a file",
		"vgg16.DEFAULT":          "not a file",
	} {
		if err := Check(name); !errors.Is(err, ErrName) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v; want ErrName saying %q", name, err, want)
		}
	}
}
