package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFetch: a URL and an hf-hub: name are downloaded once into the cache and read from it
// after; a repository without model.safetensors gives its pytorch_model.bin; a torchvision-named
// file whose hash does not match is refused and not cached; a local file is itself; an unknown
// name is ErrName.
func TestFetch(t *testing.T) {
	body := []byte("\x02\x00\x00\x00\x00\x00\x00\x00{}") // an empty safetensors file
	sum := sha256.Sum256(body)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/login.safetensors":
			w.Write([]byte("<!DOCTYPE html><html>sign in</html>"))
		case "/w.safetensors", "/timm/convnext_atto.d2_in1k/resolve/main/model.safetensors",
			"/org/old/resolve/v1/pytorch_model.bin", "/m-" + hex.EncodeToString(sum[:4]) + ".pth", "/m-00000000.pth":
			w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("STOKE_CACHE", t.TempDir())
	t.Setenv("HF_ENDPOINT", srv.URL)
	for _, name := range []string{srv.URL + "/w.safetensors?download=true", "hf-hub:timm/convnext_atto.d2_in1k", "hf-hub:org/old@v1",
		srv.URL + "/m-" + hex.EncodeToString(sum[:4]) + ".pth"} {
		before := requests.Load()
		p, err := Fetch(t.Context(), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(p, "?") {
			t.Errorf("%s: cached as %s, with the query in its name", name, p)
		}
		if b, _ := os.ReadFile(p); string(b) != string(body) {
			t.Errorf("%s: %s holds %q", name, p, b)
		}
		again, err := Fetch(t.Context(), name)
		if err != nil || again != p {
			t.Errorf("%s again: %s, %v; want the cached %s", name, again, err, p)
		}
		if n := requests.Load() - before; n < 1 || n > 2 {
			t.Errorf("%s: %d requests for two fetches; want the first only (one, or two with the fallback)", name, n)
		}
	}
	if _, err := Fetch(t.Context(), srv.URL+"/m-00000000.pth"); err == nil || !strings.Contains(err.Error(), "does not start with its name's 00000000") {
		t.Errorf("a hash mismatch: %v", err)
	}
	if _, err := Fetch(t.Context(), srv.URL+"/login.safetensors"); err == nil || !strings.Contains(err.Error(), "not a weights file") {
		t.Errorf("an HTML page: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(os.Getenv("STOKE_CACHE"), "weights")); len(entries) != 4 {
		t.Errorf("the cache holds %d files; want the 4 good downloads", len(entries))
	}
	if _, err := Fetch(t.Context(), srv.URL+"/missing.safetensors"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing file: %v", err)
	}
	local := filepath.Join(t.TempDir(), "mine.safetensors")
	os.WriteFile(local, body, 0o644)
	if p, err := Fetch(t.Context(), local); err != nil || p != local {
		t.Errorf("a local file: %s, %v", p, err)
	}
	if _, err := Fetch(t.Context(), "resnet50.IMAGENET9K"); !errors.Is(err, ErrName) {
		t.Errorf("an unknown name: %v; want ErrName", err)
	}
}

// TestURL: torchvision's names give its download URLs, DEFAULT the newest weights.
func TestURL(t *testing.T) {
	for name, want := range map[string]string{
		"resnet50.IMAGENET1K_V2": "https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
		"resnet50.DEFAULT":       "https://download.pytorch.org/models/resnet50-11ad3fa6.pth",
		"resnet18.DEFAULT":       "https://download.pytorch.org/models/resnet18-f37072fd.pth",
	} {
		if got, ok := URL(name); !ok || got != want {
			t.Errorf("URL(%s) = %s, %v; want %s", name, got, ok, want)
		}
	}
	t.Setenv("HF_ENDPOINT", "")
	if got, _ := URL("hf-hub:timm/vit_tiny_patch16_224.augreg_in21k"); got != "https://huggingface.co/timm/vit_tiny_patch16_224.augreg_in21k/resolve/main/model.safetensors" {
		t.Errorf("hf-hub: %s", got)
	}
}

// TestFetchStalled: a server that sends the header and part of the body, then nothing, is
// abandoned after the idle time, and nothing is cached.
func TestFetchStalled(t *testing.T) {
	defer func(d time.Duration) { idle = d }(idle)
	idle = 200 * time.Millisecond
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	t.Setenv("STOKE_CACHE", t.TempDir())
	done := make(chan error, 1)
	go func() {
		_, err := Fetch(t.Context(), srv.URL+"/w.safetensors")
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
	if entries, _ := os.ReadDir(filepath.Join(os.Getenv("STOKE_CACHE"), "weights")); len(entries) != 0 {
		t.Errorf("the cache holds %d files after a stalled download", len(entries))
	}
}
