package datasets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/remote"
	"github.com/stoke-ml/stoke/internal/remote/remotetest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

func TestExpandBraces(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"a.tar", []string{"a.tar"}, false},
		{"s-{000..002}.tar", []string{"s-000.tar", "s-001.tar", "s-002.tar"}, false},
		{"s-{8..10}.tar", []string{"s-8.tar", "s-9.tar", "s-10.tar"}, false},
		{"{train,val}-{0..1}.tar", []string{"train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"}, false},
		{"s-{2..1}.tar", nil, true},
		{"s-{a..b}.tar", nil, true},
		{"s-{0..1.tar", nil, true},
		{"s-0..1}.tar", nil, true},
		{"s-{0..99999999}.tar", nil, true},
	}
	for _, tc := range tests {
		got, err := expandBraces(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("expandBraces(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestShardPathsBraces(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a-0.tar", "a-1.tar", "a-2.tar", "b-0.tar"} {
		writeFile(t, filepath.Join(dir, n), nil)
	}
	got, err := ShardPaths(filepath.Join(dir, "{b,a}-{0..1}.tar"))
	want := []string{filepath.Join(dir, "b-0.tar"), filepath.Join(dir, "a-0.tar"), filepath.Join(dir, "a-1.tar")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ShardPaths = %q, %v; want %q", got, err, want)
	}
	if _, err := ShardPaths(filepath.Join(dir, "c-{0..1}.tar")); !errors.Is(err, loaders.ErrEmpty) {
		t.Fatalf("no match: %v, want ErrEmpty", err)
	}
}

// digest is the sample count and a hash of every label and payload, in order.
func digest(t testing.TB, ds loaders.Dataset) string {
	t.Helper()
	h := sha256.New()
	for _, s := range readAll(t, ds) {
		fmt.Fprintf(h, "%d %d %d %d %x\n", s.Label, s.Input.H, s.Input.W, s.Input.C, payload(s))
	}
	return fmt.Sprintf("%d samples, %x", ds.Len(), h.Sum(nil)[:8])
}

// serveShards writes n samples into shards in a folder, as .tar and as .tar.zst, and serves that
// folder over HTTPS with faults; the package's client trusts the server for the test's duration.
func serveShards(t *testing.T, n int, faults []remotetest.Fault) (dir string, h *remotetest.Handler, base string) {
	t.Helper()
	dir = t.TempDir()
	samples := testSamples(t, n)
	writeShards(t, filepath.Join(dir, "plain", "shard-%06d.tar"), 4, samples)
	writeShards(t, filepath.Join(dir, "zst", "shard-%06d.tar.zst"), 4, samples)
	files := map[string][]byte{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = b
		}
		return err
	})
	h = &remotetest.Handler{Files: files, Faults: faults}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	old := client
	client = &remote.Client{HTTP: srv.Client(), Timeout: 200 * time.Millisecond, Backoff: time.Millisecond}
	t.Cleanup(func() { client = old })
	return dir, h, srv.URL
}

// TestRemoteShards reads shards over HTTPS through every fault in a loop, plain and compressed,
// with and without a cache, and named by braces and by their index: the samples are those of the
// same shards on local disk.
func TestRemoteShards(t *testing.T) {
	dir, h, base := serveShards(t, 11, remotetest.AllFaults)
	cacheDir := t.TempDir()
	for _, kind := range []string{"plain", "zst"} {
		local, err := Open("shards:"+filepath.Join(dir, kind, "shard-*"), "")
		if err != nil {
			t.Fatal(err)
		}
		want := digest(t, local)
		local.(*Shards).Close()
		ext := map[string]string{"plain": ".tar", "zst": ".tar.zst"}[kind]
		for _, spec := range []string{
			"shards:" + base + "/" + kind + "/shard-{000000..000002}" + ext,
			"shards:" + base + "/" + kind + "/index.json",
		} {
			for _, o := range []Opener{{}, {CacheDir: cacheDir, CacheSize: 1 << 20}} {
				t.Run(fmt.Sprintf("%s cache=%v", spec[len(base)+8:], o.CacheDir != ""), func(t *testing.T) {
					ds, err := o.Open(spec, "train")
					if err != nil {
						t.Fatal(err)
					}
					defer ds.(*Shards).Close()
					if got := digest(t, ds); got != want {
						t.Fatalf("over https: %s; on disk: %s", got, want)
					}
					s, _ := ds.Sample(context.Background(), 0)
					if !strings.HasPrefix(s.Key, base+"/"+kind+"/shard-000000"+ext+":") {
						t.Fatalf("key %q does not name the shard URL", s.Key)
					}
					if o.CacheDir != "" {
						for _, sh := range ds.(*Shards).shards {
							if l, ok := sh.file.(localShard); !ok || filepath.Dir(l.Name()) != cacheDir {
								t.Fatalf("shard read from %T, not from its decompressed copy in the cache", sh.file)
							}
						}
					}
					// Workers read concurrently.
					var wg sync.WaitGroup
					for g := range 4 {
						wg.Go(func() {
							for i := g; i < ds.Len(); i += 4 {
								if _, err := ds.Sample(context.Background(), i); err != nil {
									t.Error(err)
								}
							}
						})
					}
					wg.Wait()
				})
			}
		}
	}
	// The cache served the second opening: no more GETs of the shards themselves.
	before := h.Requests("zst/shard-000001.tar.zst")
	ds, err := Opener{CacheDir: cacheDir}.Open("shards:"+base+"/zst/shard-{000000..000002}.tar.zst", "")
	if err != nil {
		t.Fatal(err)
	}
	ds.(*Shards).Close()
	if got := h.Requests("zst/shard-000001.tar.zst"); got != before {
		t.Fatalf("%d GETs of a cached shard", got-before)
	}
}

func TestRemoteShardStream(t *testing.T) {
	dir, _, base := serveShards(t, 9, remotetest.AllFaults)
	local, err := ShardPaths(filepath.Join(dir, "zst", "*.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	urls, err := ShardPaths(base + "/zst/shard-{000000..000002}.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	read := func(paths []string) []loaders.Sample {
		st := NewShardStream(paths)
		defer st.Close()
		var out []loaders.Sample
		for {
			s, err := st.Next(context.Background())
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
	}
	a, b := read(local), read(urls)
	if len(a) != 9 || len(b) != len(a) {
		t.Fatalf("%d samples from disk, %d over https", len(a), len(b))
	}
	for i := range a {
		if !sameSample(a[i], b[i]) {
			t.Fatalf("sample %d differs", i)
		}
	}
	// A stream source over the remote index knows its parts' lengths, and its parts are the shards.
	src, err := OpenStream("shards:"+base+"/zst/index.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if lens := src.(loaders.SizedSource).PartLens(); !slices.Equal(lens, []int{4, 4, 1}) {
		t.Fatalf("part lengths %v, want [4 4 1]", lens)
	}
	var c []loaders.Sample
	for part := range src.Parts() {
		st, err := src.Open(context.Background(), part)
		if err != nil {
			t.Fatal(err)
		}
		for {
			s, err := st.Next(context.Background())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			c = append(c, s)
		}
		st.Close()
	}
	if len(c) != len(a) {
		t.Fatalf("%d samples through OpenStream, want %d", len(c), len(a))
	}
	for i := range a {
		if !sameSample(a[i], c[i]) {
			t.Fatalf("sample %d differs through OpenStream", i)
		}
	}
}

func TestRemoteShardsErrors(t *testing.T) {
	_, _, base := serveShards(t, 5, nil)
	// In a folder without an index (its index.json answers 404) and in one with an index.
	for _, folder := range []string{"none", "plain"} {
		_, err := Open("shards:"+base+"/"+folder+"/missing-{0..1}.tar", "")
		if err == nil || !strings.Contains(err.Error(), base+"/"+folder+"/missing-0.tar") || !strings.Contains(err.Error(), "404") {
			t.Fatalf("missing shard in %s/: %v; want the URL and 404", folder, err)
		}
	}
	if _, err := Open("shards:"+base+"/plain/*.tar", ""); err == nil || !strings.Contains(err.Error(), "braces") {
		t.Fatalf("wildcard over https: %v", err)
	}
	if _, err := Open("shards:"+base+"/plain/shard-{1..0}.tar", ""); !errors.Is(err, ErrSpec) {
		t.Fatalf("bad braces: %v, want ErrSpec", err)
	}
}

// TestS3Shards reads packed shards from the S3-compatible server of remotetest.S3EndpointEnv
// (skipped without one), directly and through a proxy that injects every fault.
func TestS3Shards(t *testing.T) {
	dir := t.TempDir()
	samples := testSamples(t, 10)
	writeShards(t, filepath.Join(dir, "shard-%06d.tar.zst"), 3, samples)
	files := map[string][]byte{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		files["train/"+filepath.Base(p)] = b
	}
	local, err := Open("shards:"+filepath.Join(dir, "*.tar.zst"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, local)
	bucket := remotetest.S3(t, files)
	old := client
	t.Cleanup(func() { client = old })
	for _, faults := range [][]remotetest.Fault{nil, remotetest.AllFaults} {
		if faults != nil {
			remotetest.S3Proxy(t, faults)
		}
		client = &remote.Client{Timeout: time.Second, Backoff: time.Millisecond}
		for _, spec := range []string{"s3://" + bucket + "/train/shard-*.tar.zst", "s3://" + bucket + "/train/index.json"} {
			for _, o := range []Opener{{}, {CacheDir: t.TempDir()}} {
				ds, err := o.Open("shards:"+spec, "")
				if err != nil {
					t.Fatal(err)
				}
				if got := digest(t, ds); got != want {
					t.Fatalf("%s (faults %v, cache %q): %s; on disk: %s", spec, faults, o.CacheDir, got, want)
				}
				ds.(*Shards).Close()
			}
		}
	}
}

// TestLoaderOverFaultyStore runs shuffled epochs of a Loader (3 workers reading by byte range at
// once) over shards behind every fault in a loop: the batches are those of the same shards on disk,
// nothing lost, nothing repeated.
func TestLoaderOverFaultyStore(t *testing.T) {
	loadertest.NoLeaks(t)
	dir, _, base := serveShards(t, 23, remotetest.AllFaults)
	run := func(spec string) []got {
		ds, err := Open(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.(*Shards).Close() })
		l := newLoader(t, ds, loaders.Config{Batch: 4, Workers: 3, Shuffle: true, Seed: 7, Transform: transforms.Compose(transforms.ResizeTo(3, 3))})
		return append(epoch(t, l, 0, -1), epoch(t, l, 1, -1)...)
	}
	want := run("shards:" + filepath.Join(dir, "plain", "shard-*.tar"))
	got := run("shards:" + base + "/plain/shard-{000000..000005}.tar")
	if len(got) != len(want) {
		t.Fatalf("%d batches over the faulty store, %d from disk", len(got), len(want))
	}
	seen := map[int]int{}
	for i := range want {
		if !slices.Equal(got[i].labels, want[i].labels) || !slices.Equal(got[i].indices, want[i].indices) || !bytes.Equal(got[i].images, want[i].images) {
			t.Fatalf("batch %d differs: labels %v, want %v", i, got[i].labels, want[i].labels)
		}
		for _, k := range got[i].indices {
			seen[k]++
		}
	}
	for k := range 23 {
		if seen[k] != 2 {
			t.Fatalf("sample %d seen %d times in two epochs", k, seen[k])
		}
	}
}

// TestRemoteIndexURLsStayInFolder: an index's shard URLs resolve inside its folder on its server,
// escapes decoded: "%2e%2e" is ".." to the server, which would serve a file outside the pack.
func TestRemoteIndexURLsStayInFolder(t *testing.T) {
	for _, u := range []string{"%2e%2e/%2e%2e/secret.tar", "%2E%2E/secret.tar", "sub/%2e%2e/%2e%2e/secret.tar", "%2e/x.tar"} {
		files := map[string][]byte{
			"p/" + IndexName: fmt.Appendf(nil, `{"__kind__":"wids-shard-index-v1","shardlist":[{"url":%q,"nsamples":1,"filesize":3072}]}`, u),
			"secret.tar":     tarOf(t, member{"a.png", loadertest.PNG(t, 2, 2, 1)}, member{"a.cls", []byte("0")}),
		}
		h, base := serveFiles(t, files)
		_, err := Open("shards:"+base+"/p/"+IndexName, "")
		if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "outside the index's folder") {
			t.Fatalf("url %q: Open: %v; want ErrCorrupt, outside the folder", u, err)
		}
		if n := h.Requests("secret.tar") + h.Requests("p/../../secret.tar"); n != 0 {
			t.Fatalf("url %q: %d requests outside the folder", u, n)
		}
	}
}

// TestShardFolder: the index of a remote shard lies in the folder of its path; a slash in the
// URL's query must not move it.
func TestShardFolder(t *testing.T) {
	for _, c := range []struct{ in, dir, base, index string }{
		{"s3://b/p/shard-000001.tar", "s3://b/p", "shard-000001.tar", "s3://b/p/index.json"},
		{"https://h/d/s.tar?sig=a/b&x=1", "https://h/d", "s.tar", "https://h/d/index.json"},
		{"https://h/d/s.tar#frag/x", "https://h/d", "s.tar", "https://h/d/index.json"},
		{"/data/pack/s.tar", "/data/pack", "s.tar", "/data/pack/index.json"},
	} {
		dir, base, index := shardFolder(c.in)
		if dir != c.dir || base != c.base || index != c.index {
			t.Errorf("shardFolder(%q) = %q, %q, %q; want %q, %q, %q", c.in, dir, base, index, c.dir, c.base, c.index)
		}
	}
}

// storeShards writes n samples into plain shards of 4 samples (with their index.json) and serves
// them from a remotetest.Store over HTTPS, through wrap when it is not nil; the package's client
// trusts the server for the test's duration, with the stall limit given.
func storeShards(
	t *testing.T, n int, timeout time.Duration, wrap func(http.Handler) http.Handler,
) (files map[string][]byte, st *remotetest.Store, base string) {
	return storeShardsAs(t, "shard-%06d.tar", n, timeout, wrap)
}

// storeShardsAs is storeShards with the shards' name pattern (".tar.zst": compressed).
func storeShardsAs(
	t *testing.T, pattern string, n int, timeout time.Duration, wrap func(http.Handler) http.Handler,
) (files map[string][]byte, st *remotetest.Store, base string) {
	t.Helper()
	dir := t.TempDir()
	writeShards(t, filepath.Join(dir, pattern), 4, testSamples(t, n))
	files = map[string][]byte{}
	st = &remotetest.Store{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
		st.Put(e.Name(), b)
	}
	var h http.Handler = st
	if wrap != nil {
		h = wrap(st)
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	old := client
	client = &remote.Client{HTTP: srv.Client(), Timeout: timeout, Backoff: time.Millisecond, Attempts: 3}
	t.Cleanup(func() { client = old })
	return files, st, srv.URL
}

// readAllErr reads every sample of ds, returning the first error.
func readAllErr(ds loaders.Dataset) ([]loaders.Sample, error) {
	var out []loaders.Sample
	for i := range ds.Len() {
		s, err := ds.Sample(context.Background(), i)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// TestRemoteIndexShardReplacedMidDownload: a shard named by index.json (no ETag known), replaced by
// a version of the same size while the cache downloads it, is refused rather than spliced, no copy
// is kept, and the next run reads the new version whole.
func TestRemoteIndexShardReplacedMidDownload(t *testing.T) {
	files, st, base := storeShards(t, 8, 200*time.Millisecond, nil)
	v1 := files["shard-000000.tar"]
	v2 := sameSizeVersion(t, v1)
	st.CutThenPut("shard-000000.tar", len(v1)/2, v2)
	cacheDir := t.TempDir()
	spec := "shards:" + base + "/index.json"
	ds, err := Opener{CacheDir: cacheDir}.Open(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAllErr(ds)
	ds.(*Shards).Close()
	if err == nil {
		t.Fatalf("read %d samples of a shard replaced mid-download, no error", len(got))
	}
	if !errors.Is(err, loaders.ErrStorage) || !strings.Contains(err.Error(), base+"/shard-000000.tar") {
		t.Fatalf("error %v; want loaders.ErrStorage naming the shard", err)
	}
	// The next run: the new version, whole, and the same again from the cache.
	for range 2 {
		ds, err = Opener{CacheDir: cacheDir}.Open(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err = readAllErr(ds)
		ds.(*Shards).Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, sm := range got[:4] {
			if !bytes.Contains(v2, payload(sm)) {
				t.Fatalf("sample %d is not of the shard's new version", i)
			}
		}
	}
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shard.tar")
	writeFile(t, p, b)
	return p
}

// openStalledShards opens the index of 12 shards on a store whose handler is wrapped by mw and
// whose reads stall at most stall, with a cache or without.
func openStalledShards(t *testing.T, stall time.Duration, cache bool, mw func(h http.Handler, w http.ResponseWriter, r *http.Request)) *Shards {
	t.Helper()
	loadertest.NoLeaks(t)
	_, _, base := storeShards(t, 12, stall, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mw(h, w, r) })
	})
	o := Opener{}
	if cache {
		o.CacheDir = t.TempDir()
	}
	ds, err := o.Open("shards:"+base+"/index.json", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.(*Shards).Close() })
	return ds.(*Shards)
}

// TestSkipDoesNotHideOutage: under the loaders.Skip policy, a shard that the store refuses (403) is an
// outage, not bad samples: the epoch fails with loaders.ErrStorage and the server's answer, with and
// without a cache.
func TestSkipDoesNotHideOutage(t *testing.T) {
	for _, cache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cache), func(t *testing.T) {
			ds := openStalledShards(t, 200*time.Millisecond, cache, func(h http.Handler, w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "shard-000001.tar") {
					http.Error(w, "no", http.StatusForbidden)
					return
				}
				h.ServeHTTP(w, r)
			})
			l := newLoader(t, ds, loaders.Config{Batch: 4, Workers: 2, OnError: loaders.Skip, Transform: transforms.Compose(transforms.ResizeTo(3, 3))})
			epochErr := loadertest.Err(l.Epoch(context.Background(), 0))
			if !errors.Is(epochErr, loaders.ErrStorage) || !strings.Contains(fmt.Sprint(epochErr), "403") ||
				!strings.Contains(fmt.Sprint(epochErr), "shard-000001.tar") {
				t.Fatalf("epoch over a refused shard under Skip: %v (skipped %d); want loaders.ErrStorage with HTTP 403 naming the shard", epochErr, l.Stats().Skipped)
			}
		})
	}
}

// TestEpochCancelStopsRemoteReads: a cancelled epoch ends within a second while the store stalls
// every read of the shards, however long the stall limit, with and without a cache.
func TestEpochCancelStopsRemoteReads(t *testing.T) {
	for _, cache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cache), func(t *testing.T) {
			ds := openStalledShards(t, time.Minute, cache, func(h http.Handler, w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "shard-") {
					<-r.Context().Done() // the store stalls
					return
				}
				h.ServeHTTP(w, r)
			})
			l := newLoader(t, ds, loaders.Config{Batch: 4, Workers: 2, Transform: transforms.Compose(transforms.ResizeTo(3, 3))})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			for b, err := range l.Epoch(ctx, 0) {
				if err != nil {
					break
				}
				b.Release()
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("a cancelled epoch over a stalled store took %v; want under a second", d)
			}
		})
	}
}

// answer wraps a handler so that the requests whose path ends with suffix get status.
func answer(suffix string, status int) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, suffix) {
				http.Error(w, "refused", status)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestRemoteFolderIndexForbidden: a brace list whose folder's index.json answers 403 (S3's answer
// for a missing key to a user who may not list) is read as a folder without an index, like 404.
func TestRemoteFolderIndexForbidden(t *testing.T) {
	_, _, base := storeShards(t, 8, 200*time.Millisecond, answer("/index.json", http.StatusForbidden))
	ds, err := Open("shards:"+base+"/shard-{000000..000001}.tar", "")
	if err != nil {
		t.Fatalf("brace list beside a forbidden index.json: %v; want it read without the index", err)
	}
	defer ds.(*Shards).Close()
	if ds.Len() != 8 {
		t.Fatalf("%d samples, want 8", ds.Len())
	}
}

// TestStoreErrorIsNotCorruptData: a compressed shard that the store fails to deliver into the
// cache (HTTP 500 after the retries, 404) is reported with the server's answer, never as corrupt data.
func TestStoreErrorIsNotCorruptData(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusNotFound, http.StatusPreconditionFailed} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			_, _, base := storeShardsAs(t, "shard-%06d.tar.zst", 8, 200*time.Millisecond, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "shard-000001.tar.zst") {
						http.Error(w, "refused", status)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			ds, err := Opener{CacheDir: t.TempDir()}.Open("shards:"+base+"/index.json", "")
			if err != nil {
				t.Fatal(err)
			}
			defer ds.(*Shards).Close()
			_, err = readAllErr(ds)
			if err == nil || errors.Is(err, loaders.ErrCorrupt) || strings.Contains(err.Error(), "corrupt") || !errors.Is(err, loaders.ErrStorage) ||
				!strings.Contains(err.Error(), strconv.Itoa(status)) || !strings.Contains(err.Error(), "shard-000001.tar.zst") {
				t.Fatalf("shard answered %d: %v; want loaders.ErrStorage with the status and the shard, not corrupt data", status, err)
			}
		})
	}
}

// TestOpenContextEndsOnCancel: every way of opening remote shards ends with its context when the
// store stalls (the index, the shards' sizes, the bucket's listing never come), well before the
// stall limit.
func TestOpenContextEndsOnCancel(t *testing.T) {
	stall := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	}
	_, _, base := storeShards(t, 4, time.Minute, stall)
	s3 := httptest.NewServer(stall(nil))
	t.Cleanup(s3.Close)
	t.Setenv("AWS_ENDPOINT_URL_S3", s3.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	index := base + "/index.json"
	for _, tc := range []struct {
		name string
		open func(ctx context.Context) error
	}{
		{"Opener.OpenContext", func(ctx context.Context) error {
			_, err := Opener{}.OpenContext(ctx, "shards:"+index, "")
			return err
		}},
		{"Opener.OpenStreamContext", func(ctx context.Context) error {
			_, err := Opener{}.OpenStreamContext(ctx, "shards:"+index, "")
			return err
		}},
		{"OpenShardIndexContext", func(ctx context.Context) error {
			_, err := OpenShardIndexContext(ctx, index)
			return err
		}},
		{"Opener.OpenShardsContext", func(ctx context.Context) error {
			_, err := Opener{}.OpenShardsContext(ctx, "stalled", []string{base + "/shard-000000.tar.zst"})
			return err
		}},
		{"ShardPathsContext", func(ctx context.Context) error {
			_, err := ShardPathsContext(ctx, "s3://bucket/train/shard-*.tar")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := tc.open(ctx)
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
				t.Fatalf("open over a stalled store: %v after %v; want the context's error within a second", err, time.Since(start))
			}
		})
	}
}

// sameSizeVersion returns another version of the plain shard v1, of the same size and structure:
// every sample's payload bytes changed.
func sameSizeVersion(t *testing.T, v1 []byte) []byte {
	t.Helper()
	v2 := bytes.Clone(v1)
	s, err := OpenShards("v1", []string{writeTemp(t, v1)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range s.Len() {
		sm, _ := s.Sample(context.Background(), i)
		if p := payload(sm); bytes.Contains(v2, p) {
			k := bytes.Index(v2, p)
			for j := range p {
				v2[k+j] ^= 0x5a
			}
		}
	}
	return v2
}

// TestRemoteIndexCacheSeesReplacement: a shard named by index.json, replaced by a version of the
// same size between two runs, is read in its new version by the second run, not from the stale copy.
func TestRemoteIndexCacheSeesReplacement(t *testing.T) {
	files, st, base := storeShards(t, 8, 200*time.Millisecond, nil)
	v2 := sameSizeVersion(t, files["shard-000000.tar"])
	cacheDir := t.TempDir()
	for run := range 2 {
		if run == 1 {
			st.Put("shard-000000.tar", v2)
		}
		ds, err := Opener{CacheDir: cacheDir}.Open("shards:"+base+"/index.json", "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAllErr(ds)
		ds.(*Shards).Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[int][]byte{0: files["shard-000000.tar"], 1: v2}[run]
		for i, sm := range got[:4] {
			if !bytes.Contains(want, payload(sm)) {
				t.Fatalf("run %d: sample %d is not of the shard's version %d", run, i, run+1)
			}
		}
	}
}

// TestRemoteCacheBelowOneShard: with --cache-size below one shard, an epoch of two workers over
// three shards (and the downloads ahead) completes with every sample: copies thrash, reads never fail.
func TestRemoteCacheBelowOneShard(t *testing.T) {
	loadertest.NoLeaks(t)
	_, _, base := storeShards(t, 12, 200*time.Millisecond, nil)
	ds, err := Opener{CacheDir: t.TempDir(), CacheSize: 1}.Open("shards:"+base+"/index.json", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.(*Shards).Close()
	l := newLoader(t, ds, loaders.Config{Batch: 2, Workers: 2, Shuffle: true, Seed: 3, Transform: transforms.Compose(transforms.ResizeTo(3, 3))})
	n := 0
	for _, b := range epoch(t, l, 0, -1) {
		n += len(b.indices)
	}
	if n != 12 {
		t.Fatalf("%d samples in an epoch, want 12", n)
	}
}
