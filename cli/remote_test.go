package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// countingServer serves dir over HTTP and counts the GETs of each shard (not index.json).
func countingServer(t *testing.T, dir string) (*httptest.Server, func() int) {
	t.Helper()
	var mu sync.Mutex
	gets := 0
	fs := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "shard-") {
			mu.Lock()
			gets++
			mu.Unlock()
		}
		fs.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return gets }
}

// TestTrainPredictUseCache: stoke train and stoke predict read remote shards through --cache-dir:
// the second run reads the copies the first one made, and no shard is fetched again; both report
// their skip count in the JSON.
func TestTrainPredictUseCache(t *testing.T) {
	root := photoFolder(t, 2, 5, nil)
	out := t.TempDir()
	if _, errOut, code := stoke(t, "pack", "--data", root, "--out", out, "--format", "raw", "--compress", "zstd", "--shard-size", "8K", "-q"); code != 0 {
		t.Fatalf("pack: exit %d: %s", code, errOut)
	}
	srv, gets := countingServer(t, out)
	cache, ck := t.TempDir(), filepath.Join(t.TempDir(), "ck")
	spec := "shards:" + srv.URL + "/index.json"
	train := func() {
		t.Helper()
		stdout, errOut, code := stoke(t, "train", "--data", spec, "--cache-dir", cache, "--cache-size", "10M", "--size", "8", "--model", "mlp",
			"--batch", "4", "--epochs", "1", "--eval-on-train", "--checkpoint", ck, "--on-error", "skip", "--json", "-q")
		if code != 0 {
			t.Fatalf("train: exit %d: %s", code, errOut)
		}
		if !strings.Contains(stdout, `"skipped":0`) {
			t.Fatalf("train's JSON has no skip count: %s", stdout)
		}
	}
	train()
	first := gets()
	if copies, _ := filepath.Glob(filepath.Join(cache, "[^.]*")); first == 0 || len(copies) == 0 {
		t.Fatalf("train over %s: %d shard GETs, cache holds %v; want the shards in the cache", spec, first, copies)
	}
	train()
	stdout, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", spec, "--cache-dir", cache, "--size", "8", "--json", "-q")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	if !strings.Contains(stdout, `"skipped":0`) {
		t.Fatalf("predict's JSON has no skip count: %s", stdout)
	}
	if n := gets() - first; n != 0 {
		t.Fatalf("%d shard GETs by the second train and predict; want none (the cache)", n)
	}
}

// TestTrainResumeRefusesOtherValSplit: a resumed run that holds out another --val-split is refused.
func TestTrainResumeRefusesOtherValSplit(t *testing.T) {
	root := photoFolder(t, 2, 10, nil)
	ck := filepath.Join(t.TempDir(), "ck")
	args := func(epochs, split string, extra ...string) []string {
		return append([]string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", epochs,
			"--val-split", split, "--checkpoint", ck, "-q"}, extra...)
	}
	if _, errOut, code := stoke(t, args("1", "0.2")...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	// 0.25 of 20 holds out 5 samples rather than 4: the same 4 steps of 4 per epoch.
	_, errOut, code := stoke(t, args("2", "0.25", "--resume", ck)...)
	if code == 0 || !strings.Contains(errOut, "--val-split 0.2") {
		t.Fatalf("resume with another --val-split: exit %d, %q; want it refused naming the split", code, errOut)
	}
	if _, errOut, code := stoke(t, args("2", "0.2", "--resume", ck)...); code != 0 {
		t.Fatalf("resume with the same --val-split: exit %d: %s", code, errOut)
	}
}

// TestByteFlags: --cache-size refuses a fraction of a byte (0.5 is not "no bound"); --shard-size
// takes suffixes.
func TestByteFlags(t *testing.T) {
	for _, tc := range []struct {
		v      string
		zeroOK bool
		want   int64
		ok     bool
	}{
		{"0", true, 0, true}, {"0.0K", true, 0, true}, {"0.5", true, 0, false}, {"200G", true, 200 << 30, true},
		{"2M", false, 2 << 20, true}, {"0", false, 0, false}, {"0.5", false, 0, false},
	} {
		var n int64
		err := byteCount{&n, tc.zeroOK}.Set(tc.v)
		if (err == nil) != tc.ok || n != tc.want {
			t.Errorf("Set(%q) zeroOK=%v = %d, %v; want %d, ok %v", tc.v, tc.zeroOK, n, err, tc.want, tc.ok)
		}
	}
}
