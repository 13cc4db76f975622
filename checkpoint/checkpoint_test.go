package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func sample() *File {
	return &File{Model: "m: linear 3->1", Builder: "m 1x1x3->1", Optimizer: "sgd lr=0.1", Seed: 7, Epochs: 2, Steps: 30,
		State: json.RawMessage(`{"Batches":30}`), History: json.RawMessage(`[{"epoch":1},{"epoch":2}]`),
		Tensors: []Tensor{
			{Name: "0.linear.weight", Shape: []int{1, 3}, Values: [][]float32{{1, -2, 3}, {0.5, 0, float32(math.Inf(1))}}},
			{Name: "0.linear.bias", Shape: []int{1}, Values: [][]float32{{-0.25}, {0}}},
		}}
}

// TestRoundTrip: Write then Read gives the File back, and Sniff knows the file; a file that is
// not a checkpoint (or not a regular file) is refused.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck")
	want := sample()
	if err := Write(path, want, nil); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v\nwant %+v", got, want)
	}
	if !Sniff(path) {
		t.Error("Sniff of a checkpoint: false")
	}
	text := filepath.Join(dir, "notes")
	if err := os.WriteFile(text, []byte("my notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if Sniff(text) {
		t.Error("Sniff of a text file: true")
	}
	if _, err := Read(text); !errors.Is(err, ErrFormat) {
		t.Errorf("Read of a text file: %v; want ErrFormat", err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Read of a folder: %v", err)
	}
}

// seal wraps a payload in a header of the given version and its checksum.
func seal(version uint32, p []byte) []byte {
	out := binary.LittleEndian.AppendUint32([]byte(magic), version)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
	out = append(out, p...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(p, castagnoli))
}

// TestVersion1: a version 1 file (no builder, no state, its history as six float64 per epoch, no
// shapes) decodes with its history in History1.
func TestVersion1(t *testing.T) {
	var p []byte
	str := func(s string) {
		p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
		p = append(p, s...)
	}
	u64 := func(v uint64) { p = binary.LittleEndian.AppendUint64(p, v) }
	f64 := func(v float64) { u64(math.Float64bits(v)) }
	str("m")
	str("sgd")
	u64(3)                                     // seed
	p = binary.LittleEndian.AppendUint32(p, 1) // epochs
	u64(10)                                    // steps
	p = binary.LittleEndian.AppendUint32(p, 1) // history records
	for _, v := range []float64{1, 0.5, 0.9, 2, 100, 0.1} {
		f64(v)
	}
	p = binary.LittleEndian.AppendUint32(p, 1) // tensors
	str("0.linear.bias")
	p = binary.LittleEndian.AppendUint32(p, 1) // value sets
	u64(2)
	p = binary.LittleEndian.AppendUint32(p, math.Float32bits(1.5))
	p = binary.LittleEndian.AppendUint32(p, math.Float32bits(-1))
	f, err := Decode(seal(1, p))
	if err != nil {
		t.Fatal(err)
	}
	want := &File{Model: "m", Optimizer: "sgd", Seed: 3, Epochs: 1, Steps: 10,
		History1: []Epoch1{{Epoch: 1, TrainLoss: 0.5, TestAcc: 0.9, Seconds: 2, SamplesPerS: 100, DataWaitFraction: 0.1}},
		Tensors:  []Tensor{{Name: "0.linear.bias", Values: [][]float32{{1.5, -1}}}}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("version 1: %+v\nwant %+v", f, want)
	}
}

// TestCorrupt: each kind of damage is refused with ErrFormat and says what it found, and no
// length read from the file allocates more than the file holds.
func TestCorrupt(t *testing.T) {
	good := sample().Encode()
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	version := bytes.Clone(good)
	binary.LittleEndian.PutUint32(version[8:], 4)
	// A sound header over a payload that claims 2^31 tensors.
	var huge []byte
	for range 3 {
		huge = binary.LittleEndian.AppendUint32(huge, 0)
	}
	huge = binary.LittleEndian.AppendUint64(huge, 0)
	huge = binary.LittleEndian.AppendUint32(huge, 0)
	huge = binary.LittleEndian.AppendUint64(huge, 0)
	for range 2 {
		huge = binary.LittleEndian.AppendUint64(huge, 4)
		huge = append(huge, "null"...)
	}
	huge = binary.LittleEndian.AppendUint32(huge, 1<<31)
	notJSON := sample()
	notJSON.State = json.RawMessage("{")
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"text", []byte("hello, this is not a checkpoint at all"), "bad magic"},
		{"truncated", good[:len(good)-10], "truncated or padded"},
		{"padded", append(bytes.Clone(good), 0), "truncated or padded"},
		{"bit flip", flipped, "checksum mismatch"},
		{"a version past the single-file format", version, "version 4"},
		{"2^31 tensors", seal(3, huge), "2147483648 tensors"},
		{"state not JSON", notJSON.Encode(), "not JSON"},
	} {
		_, err := Decode(c.b)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrFormat saying %q", c.name, err, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	good := sample().Encode()
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("Decode error %v does not wrap ErrFormat", err)
			}
			return
		}
		// What decodes encodes to a checkpoint that decodes to the same (a version 1 file's
		// history aside, the same bytes).
		again := got.Encode()
		got2, err := Decode(again)
		if err != nil {
			t.Fatalf("decode of an encoded checkpoint: %v", err)
		}
		if !bytes.Equal(again, got2.Encode()) {
			t.Fatalf("decode then encode is not stable")
		}
	})
}

// TestStreamed: Write takes the nil sets from its Fill a set at a time, holding one tensor's
// values (not the file's bytes, nor every tensor's values) beyond what the File holds; Read
// allocates the values and little else; a Fill's error leaves the old file in place.
func TestStreamed(t *testing.T) {
	const tensors, n = 8, 1 << 21 // 8 tensors of 8 MiB
	f := &File{Model: "big", Builder: "big", Optimizer: "sgd"}
	for i := range tensors {
		f.Tensors = append(f.Tensors, Tensor{Name: fmt.Sprint("t", i), Shape: []int{n / 4, 4}, Values: make([][]float32, 2)})
	}
	value := func(i, k, j int) float32 { return float32(i*1000+k*100) + float32(j%97) }
	fill := func(i, k int, dst []float32) error {
		for j := range dst {
			dst[j] = value(i, k, j)
		}
		return nil
	}
	path := filepath.Join(t.TempDir(), "ck")
	allocated := func(do func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		do()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var err error
	payload := uint64(tensors * 2 * 4 * n)
	if a := allocated(func() { err = Write(path, f, fill) }); err != nil || a > 4*n+1<<20 {
		t.Fatalf("Write of a %d MiB payload allocated %d MiB (error %v); want one tensor's %d MiB and buffers", payload>>20, a>>20, err, 4*n>>20)
	}
	var got *File
	if a := allocated(func() { got, err = Read(path) }); err != nil || a > payload+1<<20 {
		t.Fatalf("Read of a %d MiB payload allocated %d MiB (error %v); want the values and buffers", payload>>20, a>>20, err)
	}
	for i, tt := range got.Tensors {
		for k, v := range tt.Values {
			for _, j := range []int{0, 1, n / 2, n - 1} {
				if v[j] != value(i, k, j) {
					t.Fatalf("tensor %d set %d value %d: %v; want %v", i, k, j, v[j], value(i, k, j))
				}
			}
		}
	}
	before, _ := os.ReadFile(path)
	dirBefore, _ := os.ReadDir(filepath.Dir(path))
	boom := errors.New("device lost")
	err = Write(path, f, func(i, k int, dst []float32) error {
		if i == 5 {
			return boom
		}
		return fill(i, k, dst)
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "tensor t5") {
		t.Fatalf("Write with a failing Fill: %v; want its error naming tensor t5", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("a failed Write changed the file")
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 2 || !slices.EqualFunc(entries, dirBefore, func(a, b os.DirEntry) bool { return a.Name() == b.Name() }) {
		t.Fatalf("a failed Write left %d files; want the checkpoint and its training state as they were", len(entries))
	}
}
