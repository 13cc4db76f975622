package datasets

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
)

// openLen opens split of spec and returns its sample count, failing the test on an error.
func openLen(t *testing.T, spec, split string) int {
	t.Helper()
	ds, err := Open(spec, split)
	if err != nil {
		t.Fatalf("Open(%q, %q): %v", spec, split, err)
	}
	if c, ok := ds.(io.Closer); ok {
		defer c.Close()
	}
	return ds.Len()
}

func checkSplits(t *testing.T, spec string, want ...string) {
	t.Helper()
	got, err := Splits(spec)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Splits(%q) = %v, %v; want %v", spec, got, err, want)
	}
}

// wantNoSplit checks that opening split of spec fails naming the splits it has.
func wantNoSplit(t *testing.T, spec, split, have string) {
	t.Helper()
	ds, err := Open(spec, split)
	if c, ok := ds.(io.Closer); ok && err == nil {
		c.Close()
	}
	if !errors.Is(err, ErrNoSplit) || !strings.Contains(err.Error(), "no "+split+" split (its splits: "+have+")") {
		t.Errorf("Open(%q, %q) = %v; want ErrNoSplit naming its splits %s", spec, split, err, have)
	}
}

// TestFolderSplits: a folder's train/, val/ (valid/, validation/) and test/ are its splits, by any
// of their names; a folder of class folders is the train split alone.
func TestFolderSplits(t *testing.T) {
	dir := t.TempDir()
	img := loadertest.PNG(t, 2, 2, 0)
	for split, n := range map[string]int{"train": 3, "validation": 2, "test": 1} {
		for i := range n {
			writeFile(t, filepath.Join(dir, "all", split, "cat", string(rune('a'+i))+".png"), img)
		}
	}
	writeFile(t, filepath.Join(dir, "tv", "train", "cat", "a.png"), img)
	writeFile(t, filepath.Join(dir, "tv", "val", "cat", "a.png"), img)
	writeFile(t, filepath.Join(dir, "tv", "val", "dog", "a.png"), img)
	writeFile(t, filepath.Join(dir, "flat", "cat", "a.png"), img)
	writeFile(t, filepath.Join(dir, "twice", "val", "cat", "a.png"), img)
	writeFile(t, filepath.Join(dir, "twice", "valid", "cat", "a.png"), img)

	all := filepath.Join(dir, "all")
	checkSplits(t, all, "train", "val", "test")
	checkSplits(t, "folder:"+filepath.Join(dir, "tv"), "train", "val")
	checkSplits(t, filepath.Join(dir, "flat"), "train")
	for _, tc := range []struct {
		spec, split string
		want        int
	}{
		{all, "", 3}, {all, "train", 3}, {all, "val", 2}, {all, "validation", 2}, {all, "valid", 2}, {all, "test", 1},
		{filepath.Join(dir, "tv"), "val", 2}, {filepath.Join(dir, "flat"), "train", 1},
	} {
		if got := openLen(t, tc.spec, tc.split); got != tc.want {
			t.Errorf("Open(%q, %q) = %d samples; want %d", tc.spec, tc.split, got, tc.want)
		}
	}
	ds, err := Open(filepath.Join(dir, "tv"), "val")
	if err != nil || loaders.Describe(ds).NumClasses != 2 {
		t.Errorf("Open(tv, val) = %v; want val/'s 2 classes", err)
	}
	wantNoSplit(t, filepath.Join(dir, "tv"), "test", "train, val")
	wantNoSplit(t, filepath.Join(dir, "flat"), "val", "train")
	if _, err := Open(filepath.Join(dir, "twice"), "val"); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "val/ and valid/") {
		t.Errorf("Open(val/ and valid/) = %v; want ErrSpec naming both", err)
	}
	if _, err := Open(all, "dev"); !errors.Is(err, ErrSpec) {
		t.Errorf("Open(split dev) = %v; want ErrSpec", err)
	}
	if _, err := Splits(filepath.Join(dir, "none")); err == nil {
		t.Error("Splits of a missing folder: no error")
	}
}

// TestMNISTCIFARSplits: MNIST and CIFAR have the splits whose files exist, and never val.
func TestMNISTCIFARSplits(t *testing.T) {
	dir := t.TempDir()
	img, lab := mnistFiles(4, 28, 28)
	writeFile(t, filepath.Join(dir, "m", "train-images-idx3-ubyte"), img)
	writeFile(t, filepath.Join(dir, "m", "train-labels-idx1-ubyte"), lab)
	writeFile(t, filepath.Join(dir, "m", "t10k-images-idx3-ubyte.gz"), gz(t, img))
	writeFile(t, filepath.Join(dir, "m", "t10k-labels-idx1-ubyte"), lab)
	writeFile(t, filepath.Join(dir, "c", "cifar-10-batches-bin", "test_batch.bin"), cifarRecords(cifarFileRecords, 1, func(int) byte { return 1 }))
	writeFile(t, filepath.Join(dir, "c100", "test.bin"), cifarRecords(cifarFileRecords, 2, func(int) byte { return 1 }))
	writeFile(t, filepath.Join(dir, "c100", "train.bin"), cifarRecords(5*cifarFileRecords, 2, func(int) byte { return 1 }))
	checkSplits(t, "mnist:"+filepath.Join(dir, "m"), "train", "test")
	checkSplits(t, "cifar10:"+filepath.Join(dir, "c"), "test")
	checkSplits(t, "cifar100:"+filepath.Join(dir, "c100"), "train", "test")
	wantNoSplit(t, "mnist:"+filepath.Join(dir, "m"), "val", "train, test")
	wantNoSplit(t, "cifar10:"+filepath.Join(dir, "c"), "val", "train, test")
	if _, err := Splits("mnist:" + filepath.Join(dir, "c")); !errors.Is(err, ErrNoSplit) {
		t.Errorf("Splits of a folder without MNIST's files = %v; want ErrNoSplit", err)
	}
}

// packSplits writes train, val and test samples (3, 2 and 1 per shard) with BeginSplit, and
// returns the samples by split.
func packSplits(t *testing.T, pattern string) map[string][]loaders.Sample {
	t.Helper()
	w, err := NewShardWriter(ShardWriterConfig{Pattern: pattern, MaxSamples: 2})
	if err != nil {
		t.Fatal(err)
	}
	all := testSamples(t, 9)
	bySplit := map[string][]loaders.Sample{"train": all[:5], "val": all[5:8], "test": all[8:]}
	for _, split := range []string{"train", "validation", "test"} {
		if err := w.BeginSplit(split); err != nil {
			t.Fatal(err)
		}
		for _, s := range bySplit[splitAliases[split]] {
			if err := w.Write(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bySplit
}

// sameSamples checks that ds holds want's payloads and labels, in order.
func sameSamples(t *testing.T, what string, ds loaders.Dataset, want []loaders.Sample) {
	t.Helper()
	if c, ok := ds.(io.Closer); ok {
		defer c.Close()
	}
	got := readAll(t, ds)
	if len(got) != len(want) {
		t.Fatalf("%s: %d samples; want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Label != w.Label || !bytes.Equal(g.Input.Encoded, w.Input.Encoded) || !bytes.Equal(g.Input.Pixels, w.Input.Pixels) {
			t.Errorf("%s: sample %d = label %d; want label %d and the written bytes", what, i, g.Label, w.Label)
		}
	}
}

// readSplits checks that spec has the three splits of want, each with its samples.
func readSplits(t *testing.T, spec string, want map[string][]loaders.Sample) {
	t.Helper()
	checkSplits(t, spec, "train", "val", "test")
	for split, samples := range want {
		ds, err := Open(spec, split)
		if err != nil {
			t.Fatalf("Open(%q, %q): %v", spec, split, err)
		}
		sameSamples(t, spec+" "+split, ds, samples)
	}
}

// TestShardSplits: a pack of three splits reads back by split through its folder, its index, a
// glob and a stream; a glob of one split's shards is that split; older indexes are train.
func TestShardSplits(t *testing.T) {
	dir := t.TempDir()
	want := packSplits(t, filepath.Join(dir, "shard-%s-%06d.tar"))
	names, _ := filepath.Glob(filepath.Join(dir, "shard-*"))
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	if w := []string{"shard-test-000000.tar", "shard-train-000000.tar", "shard-train-000001.tar", "shard-train-000002.tar", "shard-val-000000.tar",
		"shard-val-000001.tar"}; !slices.Equal(names, w) {
		t.Errorf("shards %v; want %v", names, w)
	}
	for _, spec := range []string{"shards:" + dir, "shards:" + filepath.Join(dir, IndexName), "shards:" + filepath.Join(dir, "shard-*.tar")} {
		readSplits(t, spec, want)
		if got := openLen(t, spec, ""); got != len(want["train"]) {
			t.Errorf("Open(%q, \"\") = %d samples; want the train split's %d", spec, got, len(want["train"]))
		}
	}
	valGlob := "shards:" + filepath.Join(dir, "shard-val-*.tar")
	checkSplits(t, valGlob, "val")
	wantNoSplit(t, valGlob, "train", "val")
	src, err := OpenStream("shards:"+dir, "val")
	if err != nil {
		t.Fatal(err)
	}
	if sized, ok := src.(loaders.SizedSource); !ok || !slices.Equal(sized.PartLens(), []int{2, 1}) {
		t.Errorf("OpenStream(val) = %v; want val's 2 shards of 2 and 1 samples", src)
	}
	if _, err := OpenStream("shards:"+dir, "dev"); !errors.Is(err, ErrSpec) {
		t.Errorf("OpenStream(split dev) = %v; want ErrSpec", err)
	}

	// An index of one split (no split field, as every pack before splits): train only.
	old := t.TempDir()
	writeShards(t, filepath.Join(old, "shard-%06d.tar"), 2, testSamples(t, 3))
	checkSplits(t, "shards:"+old, "train")
	wantNoSplit(t, "shards:"+old, "test", "train")
	if got := openLen(t, "shards:"+old, "train"); got != 3 {
		t.Errorf("old index: %d train samples; want 3", got)
	}
	// A split that is none of the three is corrupt.
	editIndexFile(t, old, func(ix *shardIndex) { ix.ShardList[0].Split = "dev" })
	if _, err := Open("shards:"+old, "train"); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), `split "dev"`) {
		t.Errorf("index with split dev = %v; want ErrCorrupt naming it", err)
	}
}

// TestShardWriterSplits: BeginSplit's errors, and the numbering of a pattern without %s.
func TestShardWriterSplits(t *testing.T) {
	dir := t.TempDir()
	w, err := NewShardWriter(ShardWriterConfig{Pattern: filepath.Join(dir, "s-%s-%04d.tar")})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testSamples(t, 1)[0]); !errors.Is(err, loaders.ErrConfig) || !strings.Contains(err.Error(), "BeginSplit") {
		t.Errorf("Write before BeginSplit with %%s = %v; want ErrConfig", err)
	}
	for _, bad := range []string{"", "dev"} {
		if err := w.BeginSplit(bad); !errors.Is(err, loaders.ErrConfig) {
			t.Errorf("BeginSplit(%q) = %v; want ErrConfig", bad, err)
		}
	}
	if err := w.BeginSplit("val"); err != nil {
		t.Fatal(err)
	}
	if err := w.BeginSplit("validation"); !errors.Is(err, loaders.ErrConfig) || !strings.Contains(err.Error(), "twice") {
		t.Errorf("BeginSplit(val) twice = %v; want ErrConfig", err)
	}
	w.Abort()
	for _, bad := range []string{"s-%d-%s.tar", "s-%s-%s.tar", "s-%s.tar", "s-%d-%d-%s.tar"} {
		if _, err := NewShardWriter(ShardWriterConfig{Pattern: filepath.Join(dir, bad)}); !errors.Is(err, loaders.ErrConfig) {
			t.Errorf("pattern %q = %v; want ErrConfig", bad, err)
		}
	}
	// Without %s, the numbers go on across the splits.
	plain := t.TempDir()
	want := packSplits(t, filepath.Join(plain, "s-%04d.tar"))
	if n, _ := filepath.Glob(filepath.Join(plain, "s-000[0-5].tar")); len(n) != 6 {
		t.Errorf("shards %v; want s-0000 ... s-0005", n)
	}
	ds, err := Open("shards:"+plain, "test")
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, "test", ds, want["test"])
}

// TestRemoteShardSplits: the splits of a pack on a web server, through its index and through a
// brace list of shards (with the index beside them).
func TestRemoteShardSplits(t *testing.T) {
	dir := t.TempDir()
	want := packSplits(t, filepath.Join(dir, "shard-%s-%06d.tar"))
	_, base := serveFiles(t, readFiles(t, dir))
	index := "shards:" + base + "/" + IndexName
	readSplits(t, index, want)
	braces := "shards:" + base + "/shard-{val,test}-{000000..000001}.tar"
	if _, err := Open(braces, "val"); err == nil {
		t.Errorf("Open(%q): no error for shard-test-000001.tar, which does not exist", braces)
	}
	braces = "shards:" + base + "/shard-val-{000000..000001}.tar"
	checkSplits(t, braces, "val")
	ds, err := Open(braces, "val")
	if err != nil {
		t.Fatal(err)
	}
	sameSamples(t, braces, ds, want["val"])
	wantNoSplit(t, braces, "test", "val")
}
