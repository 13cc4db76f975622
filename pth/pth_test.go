package pth

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/safetensors"
)

// testdata/small.pth and checkpoint.pth were written by torch 1.13's torch.save: an OrderedDict
// of float32, float16, bfloat16 and float64 tensors, a transposed view, a row of the same
// storage, an int64 num_batches_tracked and a scalar; and a checkpoint dict holding it under
// "state_dict" beside an epoch and an optimizer's settings.

func read(t *testing.T, path string) []safetensors.Tensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !Zip(b) {
		t.Fatalf("%s does not start as a zip archive", path)
	}
	ts, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestRead: every tensor comes back with its name, shape and values, in the state_dict's order,
// views read through their strides; a checkpoint gives its state_dict.
func TestRead(t *testing.T) {
	want := []safetensors.Tensor{
		{Name: "fc.weight", Shape: []int{2, 3}, F32: []float32{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}},
		{Name: "fc.bias", Shape: []int{2}, F32: []float32{0.5, -1}},
		{Name: "half.weight", Shape: []int{3}, F32: []float32{1.5, -2.25, 65504}},
		{Name: "bf.weight", Shape: []int{2}, F32: []float32{3, -0.5}},
		{Name: "double.weight", Shape: []int{2}, F32: []float32{0.1, 0.2}},
		{Name: "t.weight", Shape: []int{4, 3}, F32: []float32{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{Name: "shared.weight", Shape: []int{4}, F32: []float32{4, 5, 6, 7}},
		{Name: "bn.num_batches_tracked", Shape: []int{}, I64: []int64{7}},
		{Name: "scalar", Shape: []int{}, F32: []float32{2.5}},
	}
	for _, path := range []string{"testdata/small.pth", "testdata/checkpoint.pth"} {
		got := read(t, path)
		if len(got) != len(want) {
			t.Fatalf("%s: %d tensors; want %d", path, len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.F32, w.F32) || !slices.Equal(g.I64, w.I64) {
				t.Errorf("%s: tensor %d = %+v; want %+v", path, i, g, w)
			}
		}
	}
}

// archive is a torch.save-like zip of a data.pkl and storages.
func archive(t *testing.T, pkl []byte, storages map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	add := func(name string, data []byte) {
		w, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	add("archive/data.pkl", pkl)
	for k, v := range storages {
		add("archive/data/"+k, v)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadCompressed: a storage compressed in the archive (torch.save stores its records) is
// refused: a few kB of deflated zeros could claim gigabytes.
func TestReadCompressed(t *testing.T) {
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, data := range map[string][]byte{"archive/data.pkl": tensorPickle(4, 0, 4), "archive/data/0": make([]byte, 16)} {
		w, _ := z.Create(name) // deflated
		w.Write(data)
	}
	z.Close()
	if _, err := Read(bytes.NewReader(b.Bytes()), int64(b.Len())); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "compressed") {
		t.Errorf("a compressed storage: %v; want ErrFormat saying so", err)
	}
}

// tensorPickle is a pickle of {"w": a FloatStorage tensor of numel elements, offset, shape [n],
// stride [1]}.
func tensorPickle(numel, offset, n byte) []byte { return stridedPickle(numel, offset, n, 1) }

func stridedPickle(numel, offset, n, stride byte) []byte {
	return []byte("\x80\x02" + dictOfTensor(numel, offset, n, stride) + ".")
}

// dictOfTensor is the pickle opcodes of {"w": the tensor}.
func dictOfTensor(numel, offset, n, stride byte) string {
	return "}(X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK" +
		string([]byte{numel}) + "tQK" + string([]byte{offset}) + "K" + string([]byte{n}) + "\x85K" + string([]byte{stride}) + "\x85\x89)tRu"
}

// TestReadRefuses: what is not a state_dict, or would run code, or lies outside its storage, is
// ErrFormat saying what it found, before anything is allocated for it.
func TestReadRefuses(t *testing.T) {
	small, err := os.ReadFile("testdata/small.pth")
	if err != nil {
		t.Fatal(err)
	}
	four := make([]byte, 16)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", small[:len(small)/2], "not a zip archive"},
		{"no pickle", archive(t, nil, nil)[:0], "not a zip archive"},
		{"code", archive(t, []byte("\x80\x02cos\nsystem\nX\x02\x00\x00\x00lsq\x00\x85R."), nil), "os.system, which a state_dict does not hold"},
		{"a list", archive(t, []byte("\x80\x02]."), nil), "not a state_dict"},
		{"a tensor", archive(t, tensorPickle(4, 0, 4), map[string][]byte{"0": four}), ""},
		{"past its storage", archive(t, tensorPickle(4, 2, 4), map[string][]byte{"0": four}), "outside its storage"},
		{"a storage shorter than it says", archive(t, tensorPickle(8, 0, 8), map[string][]byte{"0": four}), "outside its storage"},
		{"no storage", archive(t, tensorPickle(4, 0, 4), nil), "no storage 0"},
		{"truncated pickle", archive(t, tensorPickle(4, 0, 4)[:30], map[string][]byte{"0": four}), "truncated pickle"},
		{"an unknown opcode", archive(t, []byte("\x80\x02\xff."), nil), "opcode 0xff"},
		{"an expanded view", archive(t, stridedPickle(1, 0, 200, 0), map[string][]byte{"0": four[:4]}), "more elements than its storage"},
		{"two tuple keys", archive(t, []byte("\x80\x02}(K\x01\x85K\x01K\x02\x85K\x02u."), nil), "not a tensor"},
		{"two list keys", archive(t, []byte("\x80\x02}(]K\x01]K\x02u."), nil), "not a tensor"},
		{"a list in itself", archive(t, []byte("\x80\x02](NNNNeNaq\x00Naq\x01h\x00h\x01aQ."), nil), "not a storage"},
		// A checkpoint's other objects (an argparse.Namespace of its arguments) are inert.
		{"beside an argparse.Namespace", archive(t, []byte("\x80\x02}(X\x04\x00\x00\x00argscargparse\nNamespace\n)R}X\x02\x00\x00\x00lrK\x01sb"+
			"X\x0a\x00\x00\x00state_dict"+dictOfTensor(4, 0, 4, 1)+"u."), map[string][]byte{"0": four}), ""},
		{"an argparse.Namespace for a tensor", archive(t, []byte("\x80\x02}(X\x01\x00\x00\x00wcargparse\nNamespace\n)Ru."), nil),
			"argparse.Namespace, which a state_dict does not hold"},
	} {
		_, err := Read(bytes.NewReader(tc.b), int64(len(tc.b)))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrFormat saying %q", tc.name, err, tc.want)
		}
	}
}

// FuzzRead: no archive makes Read panic or hang.
func FuzzRead(f *testing.F) {
	for _, p := range []string{"testdata/small.pth", "testdata/checkpoint.pth"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		Read(bytes.NewReader(b), int64(len(b)))
	})
}
