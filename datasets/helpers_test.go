package datasets

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/stoke-ml/stoke/loaders"
)

// idx builds an IDX file of uint8 data with the given dimensions.
func idx(dims []int, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 8, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(data)
	return b.Bytes()
}

// mnistFiles returns n images of h x w whose pixels are (i + y*w + x) mod 256, and labels i mod 10.
func mnistFiles(n, h, w int) (images, labels []byte) {
	px := make([]byte, n*h*w)
	for i := range px {
		px[i] = byte(i/(h*w) + i%(h*w))
	}
	lab := make([]byte, n)
	for i := range lab {
		lab[i] = byte(i % 10)
	}
	return idx([]int{n, h, w}, px), idx([]int{n}, lab)
}

func gz(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

type member struct {
	name string
	data []byte
}

// tarOf builds a tar archive of regular-file members in order.
func tarOf(t testing.TB, members ...member) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range members {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(m.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every sample of ds, failing the test on the first error.
func readAll(t testing.TB, ds loaders.Dataset) []loaders.Sample {
	t.Helper()
	out := make([]loaders.Sample, ds.Len())
	for i := range out {
		s, err := ds.Sample(context.Background(), i)
		if err != nil {
			t.Fatalf("Sample(%d): %v", i, err)
		}
		out[i] = s
	}
	return out
}
