package datasets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	src, err := OpenStream("shards:" + base + "/zst/index.json")
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
	noLeaks(t)
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
			"secret.tar":     tarOf(t, member{"a.png", pngImage(t, 2, 2, 1)}, member{"a.cls", []byte("0")}),
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
