package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRemoteShards packs shards, serves them over HTTP, and benchmarks them through their
// index with a small cache, twice (cold, then warm): every sample arrives both times, and the cache
// holds decompressed copies within its bound.
func TestBenchRemoteShards(t *testing.T) {
	root := photoFolder(t, 2, 5, nil)
	out := t.TempDir()
	if _, errOut, code := stoke(t, "pack", "--data", root, "--out", out, "--format", "raw", "--compress", "zstd", "--shard-size", "8000", "-q"); code != 0 {
		t.Fatalf("pack: exit %d: %s", code, errOut)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(out)))
	defer srv.Close()
	cache := t.TempDir()
	for _, run := range []string{"cold", "warm"} {
		stdout, errOut, code := stoke(t, "bench", "--data", "shards:"+srv.URL+"/index.json", "--cache-dir", cache, "--cache-size", "1M",
			"--size", "16", "--batch", "4", "--workers", "2", "--json", "-q")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", run, code, errOut)
		}
		var r benchResult
		lastJSON(t, stdout, &r)
		if r.Images != 10 || r.Skipped != 0 {
			t.Errorf("%s: %d images, %d skipped; want 10, 0", run, r.Images, r.Skipped)
		}
	}
	_, errOut, code := stoke(t, "bench", "--data", "shards:"+srv.URL+"/nosuch-{0..1}.tar", "-q")
	if code != 1 || !strings.Contains(errOut, srv.URL+"/nosuch-0.tar: HTTP 404") {
		t.Errorf("missing shards: exit %d, stderr %q; want 1 and the URL with its status", code, errOut)
	}
	copies, _ := filepath.Glob(filepath.Join(cache, "[^.]*.tar.zst")) // copies, not lock files
	var total int64
	for _, c := range copies {
		st, _ := os.Stat(c)
		total += st.Size()
		if b, _ := os.ReadFile(c); len(b) < 262 || string(b[257:262]) != "ustar" {
			t.Errorf("cached %s is not a decompressed tar", c)
		}
	}
	if len(copies) < 2 || total > 1<<20 {
		t.Errorf("cache holds %d copies of %d bytes; want the shards within 1 MiB", len(copies), total)
	}
}
