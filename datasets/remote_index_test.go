package datasets

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/remote"
	"github.com/stoke-ml/stoke/internal/remote/remotetest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// folderFiles returns the files of dir as a server serves them under folder/.
func folderFiles(t *testing.T, files map[string][]byte, folder, dir string) {
	t.Helper()
	for name, b := range readFiles(t, dir) {
		files[folder+"/"+name] = b
	}
}

// TestRemoteBracesIndex: a brace list of remote shards that stoke pack wrote is opened through the
// index.json beside them, one GET and no GET of a shard; without an index (404) the shards are
// scanned as before; a shard that the index does not list, or that does not fit its entry, is an
// error naming the shard.
func TestRemoteBracesIndex(t *testing.T) {
	samples := testSamples(t, 11)
	files := map[string][]byte{}
	for _, kind := range []string{"tar", "tar.zst"} {
		dir := t.TempDir()
		writeShards(t, filepath.Join(dir, "shard-%06d."+kind), 4, samples)
		folderFiles(t, files, kind, dir)
		// The same shards without their index.
		for name, b := range readFiles(t, dir) {
			if name != IndexName {
				files["bare-"+kind+"/"+name] = b
			}
		}
	}
	files["tar/shard-000009.tar"] = files["tar/shard-000000.tar"] // of another pack
	bad := t.TempDir()
	writeShards(t, filepath.Join(bad, "shard-%06d.tar"), 4, samples)
	editIndexFile(t, bad, func(ix *shardIndex) { ix.ShardList[1].FileSize = 1024 }) // shorter than its runs
	folderFiles(t, files, "bad", bad)
	h, base := serveFiles(t, files)

	local := t.TempDir()
	writeShards(t, filepath.Join(local, "shard-%06d.tar"), 4, samples)
	ds, err := Open("shards:"+filepath.Join(local, "*.tar"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, ds)
	ds.(*Shards).Close()

	shardGETs := func(folder, kind string) (n []int) {
		for k := range 3 {
			n = append(n, h.Requests(fmt.Sprintf("%s/shard-%06d.%s", folder, k, kind)))
		}
		return n
	}
	for _, kind := range []string{"tar", "tar.zst"} {
		for _, o := range []Opener{{}, {CacheDir: t.TempDir()}} {
			t.Run(fmt.Sprintf("%s cache=%v", kind, o.CacheDir != ""), func(t *testing.T) {
				indexGETs, before := h.Requests(kind+"/"+IndexName), shardGETs(kind, kind)
				ds, err := o.Open("shards:"+base+"/"+kind+"/shard-{000000..000002}."+kind, "")
				if err != nil {
					t.Fatal(err)
				}
				defer ds.(*Shards).Close()
				if n := shardGETs(kind, kind); !slices.Equal(n, before) {
					t.Fatalf("GETs of the shards to open them: %v; want %v, none more (the index locates their samples)", n, before)
				}
				if n := h.Requests(kind+"/"+IndexName) - indexGETs; n != 1 {
					t.Fatalf("%d GETs of %s, want 1", n, IndexName)
				}
				if got := digest(t, ds); got != want {
					t.Fatalf("through the index: %s; on disk: %s", got, want)
				}
			})
		}
		t.Run("no index "+kind, func(t *testing.T) {
			folder := "bare-" + kind
			ds, err := Open("shards:"+base+"/"+folder+"/shard-{000000..000002}."+kind, "")
			if err != nil {
				t.Fatal(err)
			}
			defer ds.(*Shards).Close()
			if n := shardGETs(folder, kind); slices.Min(n) == 0 {
				t.Fatalf("GETs of the shards to open them: %v; want each scanned", n)
			}
			if n := h.Requests(folder + "/" + IndexName); n != 1 {
				t.Fatalf("%d GETs of the missing %s, want 1", n, IndexName)
			}
			if got := digest(t, ds); got != want {
				t.Fatalf("scanned: %s; on disk: %s", got, want)
			}
		})
	}
	// A shard that the index does not list is refused, as on local disk.
	_, err = Open("shards:"+base+"/tar/shard-{000000,000001,000002,000009}.tar", "")
	if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "shard "+base+"/tar/shard-000009.tar") || !strings.Contains(err.Error(),
		"not listed in "+base+"/tar/"+IndexName) {
		t.Fatalf("a shard the index does not list: %v; want ErrCorrupt naming the shard and the index URL", err)
	}
	_, err = Open("shards:"+base+"/bad/shard-{000000..000002}.tar", "")
	if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "shard "+base+"/bad/shard-000001.tar") {
		t.Fatalf("an index entry that does not fit its shard: %v; want ErrCorrupt naming the shard's URL", err)
	}
}

// TestRemotePrefetchFollowsRank: with two ranks splitting the shards, rank 0's cache downloads its
// own shards (ahead, in the order it reads them) and never one that only rank 1 reads.
func TestRemotePrefetchFollowsRank(t *testing.T) {
	loadertest.NoLeaks(t)
	dir := t.TempDir()
	writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 2, testSamples(t, 16))
	files := readFiles(t, dir)
	h, base := serveFiles(t, files)
	ds, err := Opener{CacheDir: t.TempDir()}.Open("shards:"+base+"/shard-{000000..000007}.tar", "")
	if err != nil {
		t.Fatal(err)
	}
	sh := ds.(*Shards)
	l := newLoader(t, ds, loaders.Config{Batch: 2, Workers: 2, Shuffle: true, Seed: 3, WorldSize: 2, Transform: transforms.Compose(transforms.ResizeTo(3, 3))})
	// The shards rank 0 reads: those of the indices its epochs yield.
	starts := sh.ShardStarts()
	mine := map[int]bool{}
	for e := range 2 {
		for _, b := range epoch(t, l, e, -1) {
			for _, i := range b.indices {
				k, _ := slices.BinarySearch(starts, i+1)
				mine[k-1] = true
			}
		}
	}
	l.Close()
	sh.Close() // waits for the downloads ahead
	if len(mine) != 4 {
		t.Fatalf("rank 0 of 2 read shards %v; want 4 of the 8, whole shards split between the ranks", mine)
	}
	for k := range 8 {
		n := h.Requests(fmt.Sprintf("shard-%06d.tar", k))
		if mine[k] && n != 1 || !mine[k] && n != 0 {
			t.Errorf("shard %d (rank 0's: %v): %d GETs by rank 0; want %d", k, mine[k], n, map[bool]int{true: 1}[mine[k]])
		}
	}

	// The order: the shards of the indices to come, as they are first reached.
	sh.PlanReads([]int{5, 4, 0, 1, 12, 13, 2, 0})
	for _, tc := range []struct {
		shard int
		want  []int
	}{{2, []int{0, 6, 1}}, {0, []int{6, 1}}, {1, []int{}}, {3, []int{}}} {
		if got := sh.remote.following(tc.shard); !slices.Equal(got, tc.want) {
			t.Errorf("after shard %d: %v; want %v", tc.shard, got, tc.want)
		}
	}
}

// TestS3GlobIndex: an s3:// glob of shards that stoke pack wrote is opened through the index.json
// beside them (one listing, one GET, none of a shard), on the S3-compatible server of
// remotetest.S3EndpointEnv (skipped without one); without an index the shards are scanned; a size
// that the listing and the index disagree on is an error naming the shard and the index.
func TestS3GlobIndex(t *testing.T) {
	dir := t.TempDir()
	samples := testSamples(t, 10)
	writeShards(t, filepath.Join(dir, "shard-%06d.tar.zst"), 3, samples)
	files := map[string][]byte{}
	folderFiles(t, files, "train", dir)
	for name, b := range readFiles(t, dir) {
		if name != IndexName {
			files["bare/"+name] = b
		}
	}
	local, err := Open("shards:"+filepath.Join(dir, "*.tar.zst"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, local)
	editIndexFile(t, dir, func(ix *shardIndex) { ix.ShardList[1].FileSize++; ix.ShardList[1].Frames = nil })
	folderFiles(t, files, "bad", dir)
	bucket := remotetest.S3(t, files)
	h := remotetest.S3Proxy(t, nil)
	old := client
	t.Cleanup(func() { client = old })
	client = &remote.Client{Timeout: 5 * time.Second, Backoff: time.Millisecond}
	shardGETs := func(folder string) (n []int) {
		for k := range 4 {
			n = append(n, h.Requests(fmt.Sprintf("%s/%s/shard-%06d.tar.zst", bucket, folder, k)))
		}
		return n
	}

	ds, err := Open("shards:s3://"+bucket+"/train/shard-*.tar.zst", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := shardGETs("train"); slices.Max(n) != 0 {
		t.Fatalf("GETs of the shards to open them: %v; want none", n)
	}
	if n := h.Requests(bucket + "/train/" + IndexName); n != 1 {
		t.Fatalf("%d GETs of %s, want 1", n, IndexName)
	}
	if got := digest(t, ds); got != want {
		t.Fatalf("through the index: %s; on disk: %s", got, want)
	}
	ds.(*Shards).Close()

	ds, err = Open("shards:s3://"+bucket+"/bare/shard-*.tar.zst", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := shardGETs("bare"); slices.Min(n) == 0 || h.Requests(bucket+"/bare/"+IndexName) != 1 {
		t.Fatalf("without an index: GETs of the shards %v (want each scanned), of %s %d (want 1)", n, IndexName, h.Requests(bucket+"/bare/"+IndexName))
	}
	if got := digest(t, ds); got != want {
		t.Fatalf("scanned: %s; on disk: %s", got, want)
	}
	ds.(*Shards).Close()

	_, err = Open("shards:s3://"+bucket+"/bad/shard-*.tar.zst", "")
	if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "shard s3://"+bucket+"/bad/shard-000001.tar.zst") || !strings.Contains(err.Error(),
		"s3://"+bucket+"/bad/index.json says") {
		t.Fatalf("an index whose size is not the listing's: %v; want ErrCorrupt naming the shard and the index", err)
	}
}
