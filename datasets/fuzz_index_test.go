package datasets

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
)

// FuzzShardIndex feeds hostile index.json files to a folder of real shards (plain, zstd and gzip,
// written by ShardWriter) and reads the dataset they make: no panic, and when the index is
// accepted, every sample read is the one packed under its key, and a listed shard whose samples all
// read gives every sample it holds (none quietly dropped, none read twice). An accepted index also
// survives its own encoding.
func FuzzShardIndex(f *testing.F) {
	dir := f.TempDir()
	samples := testSamples(f, 6)
	writeShards(f, filepath.Join(dir, "a-%06d.tar"), 3, samples)
	ixA, _ := os.ReadFile(filepath.Join(dir, IndexName))
	writeShards(f, filepath.Join(dir, "z-%06d.tar.zst"), 4, samples)
	ixZ, _ := os.ReadFile(filepath.Join(dir, IndexName))
	writeShards(f, filepath.Join(dir, "g-%06d.tar.gz"), 6, samples)
	ixG, _ := os.ReadFile(filepath.Join(dir, IndexName))
	// Which samples each shard holds, by key.
	want := map[string]map[string]loaders.Sample{}
	for _, ix := range [][]byte{ixA, ixZ, ixG} {
		ds, err := OpenShardIndex(writeIndex(f, dir, ix))
		if err != nil {
			f.Fatal(err)
		}
		for _, s := range readAll(f, ds) {
			shard, key, _ := strings.Cut(s.Key, ":")
			if want[filepath.Base(shard)] == nil {
				want[filepath.Base(shard)] = map[string]loaders.Sample{}
			}
			want[filepath.Base(shard)][key] = s
		}
		ds.Close()
	}
	for _, ix := range [][]byte{ixA, ixZ, ixG} {
		f.Add(ix)
		var v shardIndex
		json.Unmarshal(ix, &v)
		v.ShardList = append(v.ShardList[:1:1], v.ShardList...) // a shard twice
		b, _ := json.Marshal(v)
		f.Add(b)
		// The last sample left out (read as a smaller dataset before 275f421).
		json.Unmarshal(ix, &v)
		v.ShardList[0].Sizes, v.ShardList[0].NSamples = v.ShardList[0].Sizes[:1], 1
		b, _ = json.Marshal(v)
		f.Add(b)
	}
	f.Add([]byte(`{"__kind__":"wids-shard-index-v1","shardlist":[{"url":"../a-000000.tar","nsamples":3,"filesize":9216}]}`))
	f.Add([]byte(`{"__kind__":"wids-shard-index-v1","shardlist":[{"url":"a-000000.tar","nsamples":1e8,"filesize":1.5}]}`))
	f.Fuzz(func(t *testing.T, index []byte) {
		ix, perr := parseShardIndex("fuzz", index)
		if perr == nil {
			b, err := ix.marshal()
			if err != nil {
				t.Fatalf("accepted index does not encode: %v", err)
			}
			if _, err := parseShardIndex("fuzz", b); err != nil {
				t.Fatalf("accepted index, re-encoded, is refused: %v\n%s", err, b)
			}
		}
		ds, err := OpenShardIndex(writeIndex(t, dir, index))
		if err != nil {
			if perr == nil && !errors.Is(err, loaders.ErrCorrupt) && !errors.Is(err, loaders.ErrEmpty) && !errors.Is(err, os.ErrNotExist) && !errors.Is(err,
				ErrNotRegular) {
				t.Fatalf("Open: %v; want an error wrapping ErrCorrupt, ErrEmpty or a missing file", err)
			}
			return
		}
		defer ds.Close()
		if perr != nil {
			t.Fatalf("parse refused the index (%v), Open took it", perr)
		}
		read := map[string]int{}    // samples read per shard
		failed := map[string]bool{} // shards with a sample that failed
		seen := map[string]bool{}
		for i := range ds.Len() {
			s, err := ds.Sample(context.Background(), i)
			if err != nil {
				var se *loaders.SampleError
				if !errors.As(err, &se) || se.Index != i {
					t.Fatalf("Sample(%d): %v; want a SampleError naming it", i, err)
				}
				shard, _, _ := strings.Cut(se.Key, ":")
				failed[filepath.Base(shard)] = true
				continue
			}
			shard, key, _ := strings.Cut(s.Key, ":")
			shard = filepath.Base(shard)
			w, ok := want[shard][key]
			if !ok || !sameSample(s, w) {
				t.Fatalf("sample %d (%s) is not the one packed under its key", i, s.Key)
			}
			if seen[s.Key] {
				t.Fatalf("sample %s read twice", s.Key)
			}
			seen[s.Key] = true
			read[shard]++
		}
		for shard, n := range read {
			if !failed[shard] && n != len(want[shard]) {
				t.Fatalf("shard %s: %d samples read without an error, it holds %d", shard, n, len(want[shard]))
			}
		}
	})
}

// writeIndex writes index.json into dir and returns its path.
func writeIndex(t testing.TB, dir string, b []byte) string {
	p := filepath.Join(dir, IndexName)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzFrames reads tar bytes through a hostile frame table over hostile compressed bytes: no
// panic, memory that grows with what the frames really hold (not with what the table claims), and
// bytes that, when the read succeeds, are those the whole stream decompresses to.
func FuzzFrames(f *testing.F) {
	const frame = 1500 // small, so that the fuzzer's inputs stay small
	tarBytes := make([]byte, 3*frame)
	for i := range tarBytes {
		tarBytes[i] = byte(i * i >> 7)
	}
	for _, comp := range []string{"zst", "gz"} {
		var out bytes.Buffer
		fw, err := newFrameWriter(&out, comp)
		if err != nil {
			f.Fatal(err)
		}
		for k := range 3 {
			fw.Write(tarBytes[k*frame : (k+1)*frame])
			fw.cut()
		}
		fw.Close()
		f.Add(out.Bytes(), encodeFrames(fw.frames), uint32(frame-100), uint32(200))
		f.Add(out.Bytes(), encodeFrames(fw.frames), uint32(0), uint32(3*frame))
		// The first frame claims more tar than it holds; the second claims less.
		fr := append([][2]int64(nil), fw.frames...)
		fr[0][1], fr[1][1] = fr[0][1]+512, fr[1][1]-512
		f.Add(out.Bytes(), encodeFrames(fr), uint32(0), uint32(100))
	}
	// A zstd frame then a gzip member, read across both; a frame claiming 200 MiB it does not hold
	// (the claim was allocated before ad2fff9).
	var mixed bytes.Buffer
	var frames [][2]int64
	for _, comp := range []string{"zst", "gz"} {
		fw, _ := newFrameWriter(&mixed, comp)
		fw.Write(tarBytes[:frame])
		fw.cut()
		fw.Close()
		frames = append(frames, fw.frames...)
	}
	f.Add(mixed.Bytes(), encodeFrames(frames), uint32(frame-10), uint32(20))
	f.Add(mixed.Bytes(), encodeFrames([][2]int64{{frames[0][0], 200 << 20}, frames[1]}), uint32(0), uint32(10))
	f.Fuzz(func(t *testing.T, comp, table []byte, off, n uint32) {
		e := shardEntry{Sizes: []int64{}, FileSize: int64(len(comp))}
		for len(table) >= 8 {
			e.Frames = append(e.Frames, [2]int64{int64(binary.LittleEndian.Uint32(table)), int64(binary.LittleEndian.Uint32(table[4:]))})
			table = table[8:]
		}
		if e.Frames == nil || e.checkFrames() != nil {
			return
		}
		ft := newFrameTable(e.Frames)
		if int64(n) > ft.size() || n > 1<<22 {
			return
		}
		p := make([]byte, n)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ft.readAt(bytes.NewReader(comp), p, int64(off))
		runtime.ReadMemStats(&after)
		// The frames that hold the bytes, and the decoder's buffers (a 128 KiB block, the
		// window of what it decoded so far).
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(4*len(comp)+2*int(n))+8<<20 {
			t.Fatalf("reading %d bytes through frames of %d compressed bytes allocated %d bytes", n, len(comp), grew)
		}
		if err != nil {
			if !errors.Is(err, loaders.ErrCorrupt) {
				t.Fatalf("readAt: %v; want ErrCorrupt", err)
			}
			return
		}
		r, done, err := decompress(bytes.NewReader(comp))
		if err != nil {
			t.Fatalf("frames read, the stream does not open: %v", err)
		}
		defer done()
		whole, err := io.ReadAll(io.LimitReader(r, ft.size()+1))
		if err != nil || int64(len(whole)) != ft.size() {
			return // frames of mixed kinds read one by one, not as one stream
		}
		if !bytes.Equal(p, whole[off:int64(off)+int64(n)]) {
			t.Fatalf("frames read bytes %d-%d unlike the stream", off, int64(off)+int64(n)-1)
		}
	})
}

func encodeFrames(frames [][2]int64) []byte {
	var b []byte
	for _, fr := range frames {
		b = binary.LittleEndian.AppendUint32(b, uint32(fr[0]))
		b = binary.LittleEndian.AppendUint32(b, uint32(fr[1]))
	}
	return b
}
