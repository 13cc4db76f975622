package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/remote/remotetest"
)

// openAll opens obj through cache and returns its bytes.
func openAll(t *testing.T, cache *Cache, obj Object) ([]byte, error) {
	t.Helper()
	fh, err := cache.Open(context.Background(), obj, "", nil)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(fh)
}

// copies returns the copies in dir (not the lock files, records and temporaries).
func copies(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "[^.]*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestCacheRevalidatesObjectWithoutETag: an object that an index describes (URL and size, no
// ETag), replaced by another of the same size, is fetched again by the next process instead of
// being served from the stale copy.
func TestCacheRevalidatesObjectWithoutETag(t *testing.T) {
	v1, v2 := blob(30_000, 60), blob(30_000, 61)
	st := &remotetest.Store{}
	st.Put("a.tar", v1)
	srv, c := serve(t, st)
	dir := t.TempDir()
	obj := Object{URL: srv.URL + "/a.tar", Size: int64(len(v1))}
	for run, want := range [][]byte{v1, v1, v2} {
		if run == 2 {
			st.Put("a.tar", v2)
		}
		cache, err := NewCache(c, dir, 0) // a process of its own
		if err != nil {
			t.Fatal(err)
		}
		got, err := openAll(t, cache, obj)
		cache.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("run %d: %d bytes (v1: %v, v2: %v), %v; want v%d",
				run, len(got), bytes.Equal(got, v1), bytes.Equal(got, v2), err, map[bool]int{true: 1, false: 2}[run < 2])
		}
	}
	if n := st.Requests("GET", "a.tar"); n != 2 {
		t.Fatalf("%d GETs for two versions, want 2 (the second run reads its copy)", n)
	}
	// A replacement of another size is refused, naming the object.
	st.Put("a.tar", v2[:1000])
	cache, _ := NewCache(c, dir, 0)
	defer cache.Close()
	if _, err := openAll(t, cache, obj); !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), obj.URL) {
		t.Fatalf("open of an object of another size: %v; want ErrChanged naming it", err)
	}
}

// TestCacheReplacedMidDownload: through the cache, an object without ETag replaced during its
// download fails (no copy kept), and the next open fetches the new version whole.
func TestCacheReplacedMidDownload(t *testing.T) {
	v1, v2 := blob(200_000, 62), blob(200_000, 63)
	st := &remotetest.Store{}
	st.Put("a.tar", v1)
	srv, c := serve(t, st)
	dir := t.TempDir()
	cache, _ := NewCache(c, dir, 0)
	defer cache.Close()
	obj := Object{URL: srv.URL + "/a.tar", Size: int64(len(v1))}
	st.CutThenPut("a.tar", 50_000, v2)
	got, err := openAll(t, cache, obj)
	if err == nil {
		t.Fatalf("download of an object replaced meanwhile: %d bytes (v1: %v, v2: %v), no error", len(got), bytes.Equal(got, v1), bytes.Equal(got, v2))
	}
	if len(copies(t, dir)) != 0 {
		t.Fatalf("a copy kept after a failed download: %v", copies(t, dir))
	}
	if got, err := openAll(t, cache, obj); err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("open after the replacement: %d bytes, %v; want v2", len(got), err)
	}
}

// TestCacheHealsDamagedCopy: a truncated copy and one with flipped bytes are found when opened,
// removed and fetched again; when fetching fails, the error names the local copy and the object.
func TestCacheHealsDamagedCopy(t *testing.T) {
	data := blob(40_000, 64)
	st := &remotetest.Store{}
	st.Put("a.tar", data)
	srv, c := serve(t, st)
	dir := t.TempDir()
	obj, err := c.Stat(context.Background(), srv.URL+"/a.tar")
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func(string){
		"truncated": func(p string) { os.Truncate(p, 1234) },
		"flipped": func(p string) {
			b, _ := os.ReadFile(p)
			b[20_000] ^= 0x40
			os.WriteFile(p, b, 0o644)
		},
	}
	for _, how := range []string{"truncated", "flipped"} {
		cache, _ := NewCache(c, dir, 0)
		if got, err := openAll(t, cache, obj); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: first open: %v", how, err)
		}
		names := copies(t, dir)
		if len(names) != 1 {
			t.Fatalf("copies %v", names)
		}
		damage[how](names[0])
		cache.Close()
		before := st.Requests("GET", "a.tar")
		cache, _ = NewCache(c, dir, 0)
		got, err := openAll(t, cache, obj)
		cache.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s copy: %d bytes, %v; want the object, fetched again", how, len(got), err)
		}
		if n := st.Requests("GET", "a.tar") - before; n != 1 {
			t.Fatalf("%s copy: %d GETs; want it fetched again, once", how, n)
		}
	}
	// Damaged, and the object is gone.
	names := copies(t, dir)
	damage["truncated"](names[0])
	srv.Config.Handler = &remotetest.Store{}
	cache, _ := NewCache(c, dir, 0)
	defer cache.Close()
	_, err = openAll(t, cache, obj)
	if err == nil || !strings.Contains(err.Error(), names[0]) || !strings.Contains(err.Error(), obj.URL) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged copy of a missing object: %v; want an error naming %s and %s", err, names[0], obj.URL)
	}
}

// TestCacheSmallerThanOneCopy: with a bound below one copy, a download that evicts the copy another
// open is about to read does not make that open fail.
func TestCacheSmallerThanOneCopy(t *testing.T) {
	files := map[string][]byte{"a.tar": blob(20_000, 65), "b.tar": blob(20_000, 66)}
	h := &remotetest.Handler{Files: files}
	srv, c := serve(t, h)
	cache, err := NewCache(c, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	obj := func(n string) Object {
		return Object{URL: srv.URL + "/" + n, Size: int64(len(files[n])), ETag: `"v1-` + n + `"`}
	}
	// Between the download of a and its open, b is downloaded (another reader), which evicts a.
	cache.afterDownload = func(name string) {
		if strings.HasSuffix(name, "a.tar") {
			if got, err := openAll(t, cache, obj("b.tar")); err != nil || !bytes.Equal(got, files["b.tar"]) {
				t.Errorf("b.tar: %v", err)
			}
		}
	}
	got, err := openAll(t, cache, obj("a.tar"))
	if err != nil || !bytes.Equal(got, files["a.tar"]) {
		t.Fatalf("a.tar with a cache smaller than it: %d bytes, %v; want it", len(got), err)
	}
}
