package datasets

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/packdir"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// within runs f and fails the test if it does not return within d: a regression that blocks (a
// FIFO opened for reading) fails instead of hanging the suite.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// TestNotRegularFiles: FIFOs and devices given as images, dataset files or shards are a named
// error at once, never a read that blocks or never ends.
func TestNotRegularFiles(t *testing.T) {
	dir := t.TempDir()
	// An image folder whose second image is a FIFO, whose third is a link to /dev/zero.
	writeFile(t, filepath.Join(dir, "imgs", "a", "0.png"), loadertest.PNG(t, 2, 2, 0))
	mkfifo(t, filepath.Join(dir, "imgs", "a", "1.png"))
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "imgs", "a", "2.png")); err != nil {
		t.Fatal(err)
	}
	within(t, 10*time.Second, func() {
		f, err := NewImageFolder(filepath.Join(dir, "imgs"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Sample(t.Context(), 0); err != nil {
			t.Errorf("regular image: %v", err)
		}
		for i, kind := range map[int]string{1: "FIFO", 2: "character device"} {
			_, err := f.Sample(t.Context(), i)
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), f.Path(i)) {
				t.Errorf("Sample(%d) = %v; want ErrNotRegular naming the %s and its path", i, err, kind)
			}
		}
	})
	// Shards: a FIFO and a device.
	mkfifo(t, filepath.Join(dir, "sh", "s-0.tar"))
	for _, p := range []string{filepath.Join(dir, "sh", "s-0.tar"), "/dev/null"} {
		within(t, 10*time.Second, func() {
			if _, err := OpenShards("x", []string{p}); !errors.Is(err, ErrNotRegular) {
				t.Errorf("OpenShards(%s) = %v; want ErrNotRegular", p, err)
			}
			if _, err := NewShardStream([]string{p}).Next(t.Context()); !errors.Is(err, ErrNotRegular) {
				t.Errorf("ShardStream(%s).Next = %v; want ErrNotRegular", p, err)
			}
		})
	}
	// MNIST and CIFAR files.
	img, _ := mnistFiles(2, 2, 2)
	writeFile(t, filepath.Join(dir, "mnist", "train-images-idx3-ubyte"), img)
	mkfifo(t, filepath.Join(dir, "mnist", "train-labels-idx1-ubyte"))
	mkfifo(t, filepath.Join(dir, "cifar", "test_batch.bin"))
	within(t, 10*time.Second, func() {
		if _, err := OpenMNIST(filepath.Join(dir, "mnist"), "train"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenMNIST with a FIFO = %v; want ErrNotRegular", err)
		}
		if _, err := OpenCIFAR(filepath.Join(dir, "cifar"), 10, "test"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenCIFAR with a FIFO = %v; want ErrNotRegular", err)
		}
	})
}

// TestIDXHeaderCaps: a tiny IDX file whose header claims a huge size is refused from the header.
func TestIDXHeaderCaps(t *testing.T) {
	_, lab := mnistFiles(1, 1, 1)
	for _, dims := range [][]int{{1, 32768, 32768}, {1 << 30, 64, 64}, {4294967295, 4294967295, 4294967295}} {
		_, err := ParseMNIST("bomb", strings.NewReader(string(idx(dims, make([]byte, 10)))), strings.NewReader(string(lab)))
		if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "declare") {
			t.Errorf("ParseMNIST(dims %v, 10 bytes) = %v; want ErrCorrupt from the header", dims, err)
		}
	}
	// The same claim behind gzip: still refused before the data is read.
	_, err := ParseMNIST("bomb", strings.NewReader(string(gz(t, idx([]int{1, 32768, 32768}, make([]byte, 1<<20))))), strings.NewReader(string(lab)))
	if !errors.Is(err, loaders.ErrCorrupt) {
		t.Errorf("gzip'd IDX bomb = %v; want ErrCorrupt", err)
	}
}

// TestShardIndexChecks: the readers hold shards to what their folder's index.json promises, and
// refuse a folder whose pack did not finish.
func TestShardIndexChecks(t *testing.T) {
	pack := func(t *testing.T) (string, []string) {
		dir := t.TempDir()
		w := writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 7))
		return dir, w.Shards()
	}
	t.Run("complete", func(t *testing.T) {
		dir, _ := pack(t)
		for _, spec := range []string{"shards:" + dir, "shards:" + filepath.Join(dir, "shard-*.tar"), "shards:" + filepath.Join(dir, IndexName)} {
			ds, err := Open(spec, "train")
			if err != nil || ds.Len() != 7 {
				t.Fatalf("Open(%s) = %v; want 7 samples", spec, err)
			}
			ds.(*Shards).Close()
		}
	})
	t.Run("size differs", func(t *testing.T) {
		dir, shards := pack(t)
		b, _ := os.ReadFile(shards[1])
		writeFile(t, shards[1], append(b, make([]byte, 512)...))
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "index.json says") {
			t.Errorf("shard larger than its index entry: %v; want ErrCorrupt", err)
		}
	})
	t.Run("count differs", func(t *testing.T) {
		dir, _ := pack(t)
		var ix shardIndex
		b, _ := os.ReadFile(filepath.Join(dir, IndexName))
		json.Unmarshal(b, &ix)
		ix.ShardList[0].NSamples = 4
		b, _ = json.Marshal(ix)
		writeFile(t, filepath.Join(dir, IndexName), b)
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "3 sample sizes for 4 samples") {
			t.Errorf("index entry with fewer sample sizes than samples: %v; want ErrCorrupt", err)
		}
		// An index without sizes (an older pack's): the scan counts the samples.
		ix.ShardList[0].Sizes, ix.ShardList[0].Classes = nil, 0
		b, _ = json.Marshal(ix)
		writeFile(t, filepath.Join(dir, IndexName), b)
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "3 samples, index.json says 4") {
			t.Errorf("shard with fewer samples than its index entry: %v; want ErrCorrupt", err)
		}
	})
	t.Run("foreign shard", func(t *testing.T) {
		dir, shards := pack(t)
		b, _ := os.ReadFile(shards[0])
		writeFile(t, filepath.Join(dir, "shard-000009.tar"), b)
		if _, err := Open("shards:"+filepath.Join(dir, "shard-*.tar"), "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "not listed") {
			t.Errorf("a shard the index does not list: %v; want ErrCorrupt", err)
		}
	})
	t.Run("listed in a subfolder", func(t *testing.T) {
		// The index lists sub/shard-000000.tar; a copy of it next to the index is not listed.
		dir := t.TempDir()
		writeShards(t, filepath.Join(dir, "sub", "shard-%06d.tar"), 3, testSamples(t, 3))
		b, _ := os.ReadFile(filepath.Join(dir, "sub", IndexName))
		os.Remove(filepath.Join(dir, "sub", IndexName))
		writeFile(t, filepath.Join(dir, IndexName), b)
		editIndexFile(t, dir, func(ix *shardIndex) { ix.ShardList[0].URL = "sub/shard-000000.tar" })
		b, _ = os.ReadFile(filepath.Join(dir, "sub", "shard-000000.tar"))
		writeFile(t, filepath.Join(dir, "shard-000000.tar"), b)
		if _, err := Open("shards:"+filepath.Join(dir, "shard-*.tar"), "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "not listed") {
			t.Errorf("a shard the index lists only in a subfolder: %v; want ErrCorrupt", err)
		}
	})
	t.Run("url outside the folder", func(t *testing.T) {
		dir, _ := pack(t)
		var ix shardIndex
		b, _ := os.ReadFile(filepath.Join(dir, IndexName))
		json.Unmarshal(b, &ix)
		ix.ShardList[0].URL = "../../etc/passwd"
		b, _ = json.Marshal(ix)
		writeFile(t, filepath.Join(dir, IndexName), b)
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "relative url inside") {
			t.Errorf("index with a url outside its folder: %v; want ErrCorrupt", err)
		}
	})
	editIndex := func(t *testing.T, dir string, edit func(*shardIndex)) {
		var ix shardIndex
		b, _ := os.ReadFile(filepath.Join(dir, IndexName))
		if err := json.Unmarshal(b, &ix); err != nil {
			t.Fatal(err)
		}
		edit(&ix)
		b, _ = json.Marshal(ix)
		writeFile(t, filepath.Join(dir, IndexName), b)
	}
	t.Run("shard listed twice", func(t *testing.T) {
		dir, _ := pack(t)
		editIndex(t, dir, func(ix *shardIndex) {
			e := ix.ShardList[0]
			e.URL = "./" + e.URL
			ix.ShardList = append(ix.ShardList, e)
		})
		if ds, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "listed twice") {
			t.Errorf("index listing a shard twice: %v (%v); want ErrCorrupt, not a dataset read twice", err, ds)
		}
	})
	t.Run("shard in a subfolder", func(t *testing.T) {
		// The index's promises hold wherever the shard lies, not only next to the index.
		dir, shards := pack(t)
		os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		if err := os.Rename(shards[0], filepath.Join(dir, "sub", filepath.Base(shards[0]))); err != nil {
			t.Fatal(err)
		}
		editIndex(t, dir, func(ix *shardIndex) {
			ix.ShardList[0].URL = "sub/" + ix.ShardList[0].URL
			ix.ShardList[0].NSamples = 4
			ix.ShardList[0].Sizes, ix.ShardList[0].Classes = nil, 0 // scanned
		})
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "3 samples, index.json says 4") {
			t.Errorf("subfolder shard with fewer samples than its index entry: %v; want ErrCorrupt", err)
		}
		editIndex(t, dir, func(ix *shardIndex) { ix.ShardList[0].NSamples = 3 })
		ds, err := Open("shards:"+dir, "train")
		if err != nil || ds.Len() != 7 {
			t.Fatalf("subfolder shard matching its entry: %v; want 7 samples", err)
		}
		ds.(*Shards).Close()
	})
	t.Run("no shards", func(t *testing.T) {
		dir, _ := pack(t)
		editIndex(t, dir, func(ix *shardIndex) { ix.ShardList = nil })
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, loaders.ErrEmpty) {
			t.Errorf("index listing no shard: %v; want ErrEmpty", err)
		}
	})
	t.Run("unfinished pack", func(t *testing.T) {
		dir, _ := pack(t)
		writeFile(t, filepath.Join(dir, packdir.LockName), nil)
		for _, spec := range []string{"shards:" + dir, "shards:" + filepath.Join(dir, "shard-*.tar")} {
			if _, err := Open(spec, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "--overwrite") {
				t.Errorf("Open(%s) with the lock file = %v; want ErrCorrupt", spec, err)
			}
		}
	})
	t.Run("folder without index", func(t *testing.T) {
		dir, _ := pack(t)
		os.Remove(filepath.Join(dir, IndexName))
		if _, err := Open("shards:"+dir, "train"); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "*.tar") {
			t.Errorf("Open(shards:DIR) without index = %v; want ErrSpec saying to give a glob", err)
		}
		if _, err := Open("shards:"+filepath.Join(dir, "*.tar"), "test"); !errors.Is(err, ErrNoSplit) {
			t.Errorf("Open(shards, test) = %v; want ErrNoSplit", err)
		}
	})
}

// TestShardWriterAtomic: until Close, no file has a shard's name; Abort leaves nothing.
func TestShardWriterAtomic(t *testing.T) {
	dir := t.TempDir()
	w, err := NewShardWriter(ShardWriterConfig{Pattern: filepath.Join(dir, "shard-%06d.tar"), MaxSamples: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range testSamples(t, 5) {
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "shard-*")); len(m) != 0 {
		t.Errorf("before Close: %v under the shards' names; want none", m)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("after Abort the folder holds %d entries; want none", len(entries))
	}
}

func TestPackDir(t *testing.T) {
	dir := t.TempDir()
	p, err := packdir.Create(dir, packOptions("shard-", false))
	if err != nil {
		t.Fatal(err)
	}
	// A second pack into the folder is refused while the first holds it.
	if _, err := packdir.Create(dir, packOptions("shard-", true)); !errors.Is(err, packdir.ErrUnusable) || !strings.Contains(err.Error(), "another pack") {
		t.Errorf("concurrent CreatePackDir = %v; want packdir.ErrUnusable", err)
	}
	writeShards(t, filepath.Join(dir, "shard-%06d.tar.zst"), 2, testSamples(t, 3))
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, packdir.LockName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after Commit: %v", err)
	}
	// A previous pack: refused without overwrite, removed completely with it (whatever its
	// compression, temporary files of a killed pack included).
	writeFile(t, filepath.Join(dir, ".shard-000007.tar.tmp123"), []byte("x"))
	if _, err := packdir.Create(dir, packOptions("shard-", false)); !errors.Is(err, packdir.ErrUnusable) || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("CreatePackDir over a previous pack = %v; want packdir.ErrUnusable suggesting --overwrite", err)
	}
	p, err = packdir.Create(dir, packOptions("shard-", true))
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != packdir.LockName {
		t.Errorf("after overwrite the folder holds %v; want only the lock file", entries)
	}
	p.Abort()
	// Files no pack wrote are never removed.
	writeFile(t, filepath.Join(dir, "notes.txt"), []byte("mine"))
	if _, err := packdir.Create(dir, packOptions("shard-", true)); !errors.Is(err, packdir.ErrUnusable) || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("CreatePackDir with a foreign file = %v; want packdir.ErrUnusable naming it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Error(err)
	}
}

// TestCompressedShardMemory: reading a compressed shard holds no copy of it: samples come from the
// decompressed temporary file, which has no name in any folder.
func TestCompressedShardMemory(t *testing.T) {
	dir := t.TempDir()
	samples := testSamples(t, 6)
	w := writeShards(t, filepath.Join(dir, "s-%04d.tar.zst"), 0, samples)
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "stoke-shard-*"))
	ds, err := OpenShards("z", w.Shards())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "stoke-shard-*"))
	if len(after) > len(before) {
		t.Errorf("temporary files %v left with a name", after)
	}
	for i, s := range readAll(t, ds) {
		if !sameSample(s, samples[i]) {
			t.Errorf("sample %d differs", i)
		}
	}
}

// TestShardStreamSkipsOtherMembers: a stream reads only the members a sample is made of; the
// others (.txt, .npy, anything else), however many and large, are skipped, not held in memory.
func TestShardStreamSkipsOtherMembers(t *testing.T) {
	const extra, size = 24, 1 << 20
	members := []member{{"a.png", loadertest.PNG(t, 4, 4, 1)}, {"a.cls", []byte("3")}}
	for k := range extra {
		members = append(members, member{fmt.Sprintf("a.x%d", k), make([]byte, size)})
	}
	path := filepath.Join(t.TempDir(), "big.tar")
	writeFile(t, path, tarOf(t, members...))
	st := NewShardStream([]string{path})
	defer st.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := st.Next(context.Background())
	runtime.ReadMemStats(&after)
	if err != nil || s.Label != 3 || s.Input.Encoded == nil {
		t.Fatalf("Next = %+v, %v; want the sample labelled 3", s, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > extra*size/4 {
		t.Errorf("reading one sample with %d unused members of %d bytes allocated %d bytes; want them skipped", extra, size, got)
	}
	if _, err := st.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("second Next = %v; want io.EOF", err)
	}
}

// TestShardHugeMemberSize: a PAX header may claim a member of 2^63-1 bytes; both readers refuse it
// as corrupt, naming the member, instead of overflowing the offset arithmetic into a seek error.
func TestShardHugeMemberSize(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	img := loadertest.PNG(t, 2, 2, 1)
	tw.WriteHeader(&tar.Header{Name: "a.png", Mode: 0o644, Size: int64(len(img)), Typeflag: tar.TypeReg})
	tw.Write(img)
	tw.WriteHeader(&tar.Header{Name: "a.cls", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("1"))
	tw.WriteHeader(&tar.Header{Name: "a.npy", Mode: 0o644, Size: 1<<63 - 1, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	tw.Flush() // the member's data and the end marker never come: a few zero blocks instead
	b.Write(make([]byte, 4096))
	path := filepath.Join(t.TempDir(), "pax.tar")
	writeFile(t, path, b.Bytes())
	_, err := OpenShards("pax", []string{path})
	if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(fmt.Sprint(err), `"a.npy" of 9223372036854775807 bytes`) {
		t.Errorf("OpenShards = %v; want ErrCorrupt naming member a.npy and its size", err)
	}
	st := NewShardStream([]string{path})
	defer st.Close()
	if _, err := st.Next(context.Background()); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(fmt.Sprint(err), `"a.npy" of 9223372036854775807 bytes`) {
		t.Errorf("ShardStream.Next = %v; want ErrCorrupt naming member a.npy and its size", err)
	}
}

// TestEmptyImageFile: a 0-byte image file fails naming its path and saying it is empty (not
// "unknown format").
func TestEmptyImageFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a", "0.png"), loadertest.PNG(t, 2, 2, 0))
	writeFile(t, filepath.Join(dir, "a", "1.png"), nil)
	f, err := NewImageFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := loaders.New(f, loaders.Config{Batch: 2, Workers: 1, Transform: transforms.Compose(transforms.ResizeTo(2, 2)), Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	last := loadertest.Err(l.Epoch(t.Context(), 0))
	if !errors.Is(last, transforms.ErrCorrupt) || !strings.Contains(fmt.Sprint(last), "empty image (0 bytes)") || !strings.Contains(fmt.Sprint(last), f.Path(1)) {
		t.Errorf("epoch with an empty image file = %v; want ErrCorrupt naming %s as empty", last, f.Path(1))
	}
}

// packOptions are the packdir options of a pack of this package's shards, as stoke pack gives them.
func packOptions(prefix string, overwrite bool) packdir.Options {
	return packdir.Options{Prefixes: []string{prefix}, Index: IndexName, IsShard: IsShardName, Overwrite: overwrite}
}
