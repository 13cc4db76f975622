package datasets

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
)

// Small CIFAR files keep the tests fast; the record count is checked the same way.
func init() { cifarFileRecords = 3 }

// cifarRecords builds n CIFAR records; pixel plane c, position p of record i holds byte(i+c*7+p).
func cifarRecords(n, labelBytes int, label func(i int) byte) []byte {
	var b bytes.Buffer
	for i := range n {
		for range labelBytes - 1 {
			b.WriteByte(99) // coarse label, ignored
		}
		b.WriteByte(label(i))
		for c := range 3 {
			for p := range 1024 {
				b.WriteByte(byte(i + c*7 + p))
			}
		}
	}
	return b.Bytes()
}

func TestParseCIFAR(t *testing.T) {
	tests := []struct {
		name    string
		classes int
		data    []byte
		wantN   int
		wantErr error
	}{
		{"cifar10", 10, cifarRecords(3, 1, func(i int) byte { return byte(i) }), 3, nil},
		{"cifar100", 100, cifarRecords(2, 2, func(i int) byte { return byte(50 + i) }), 2, nil},
		{"partial record", 10, cifarRecords(2, 1, func(int) byte { return 0 })[:3073+100], 0, loaders.ErrCorrupt},
		{"cifar100 read as cifar10", 10, cifarRecords(3, 2, func(int) byte { return 0 }), 0, loaders.ErrCorrupt},
		{"empty", 10, nil, 0, loaders.ErrEmpty},
		{"bad classes", 7, cifarRecords(1, 1, func(int) byte { return 0 }), 0, ErrSpec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCIFAR(tc.name, tc.classes, bytes.NewReader(tc.data))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseCIFAR error = %v; want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Len() != tc.wantN {
				t.Fatalf("Len() = %d; want %d", c.Len(), tc.wantN)
			}
			for i, s := range readAll(t, c) {
				in := s.Input
				if in.H != 32 || in.W != 32 || in.C != 3 {
					t.Fatalf("Sample(%d) shape %dx%dx%d; want 32x32x3", i, in.H, in.W, in.C)
				}
				// HWC: pixel (y=1, x=2), channel 2 comes from plane 2, position 34.
				if got, want := in.Pixels[(1*32+2)*3+2], byte(i+14+34); got != want {
					t.Errorf("Sample(%d) pixel (1,2,2) = %d; want %d", i, got, want)
				}
			}
		})
	}
}

func TestCIFARLabelOutOfRange(t *testing.T) {
	c, err := ParseCIFAR("cifar10", 10, bytes.NewReader(cifarRecords(2, 1, func(i int) byte { return byte(9 + i) })))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sample(context.Background(), 0); err != nil {
		t.Errorf("Sample(0) label 9: %v", err)
	}
	if _, err := c.Sample(context.Background(), 1); !errors.Is(err, loaders.ErrLabel) {
		t.Errorf("Sample(1) label 10 error = %v; want ErrLabel", err)
	}
}

func TestOpenCIFAR(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "cifar-10-batches-bin")
	for i, f := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"} {
		writeFile(t, filepath.Join(sub, f), cifarRecords(cifarFileRecords, 1, func(int) byte { return byte(i) }))
	}
	writeFile(t, filepath.Join(dir, "train.bin"), cifarRecords(5*cifarFileRecords, 2, func(int) byte { return 77 }))
	tests := []struct {
		classes   int
		split     string
		wantN     int
		lastLabel int
	}{{10, "train", 5 * cifarFileRecords, 4}, {100, "train", 5 * cifarFileRecords, 77}}
	for _, tc := range tests {
		c, err := OpenCIFAR(dir, tc.classes, tc.split)
		if err != nil {
			t.Fatalf("OpenCIFAR(%d, %s): %v", tc.classes, tc.split, err)
		}
		s, err := c.Sample(context.Background(), c.Len()-1)
		if err != nil {
			t.Fatal(err)
		}
		if c.Len() != tc.wantN || s.Label != tc.lastLabel {
			t.Errorf("OpenCIFAR(%d, %s) = %d samples, last label %d; want %d, %d", tc.classes, tc.split, c.Len(), s.Label, tc.wantN, tc.lastLabel)
		}
	}
	if _, err := OpenCIFAR(dir, 10, "test"); err == nil {
		t.Error("OpenCIFAR(10, test) without test_batch.bin: no error")
	}
}

// TestCIFARRecordCount: a CIFAR file cut at a record boundary, empty, or with a record too many is
// an error naming the file, never a smaller (or larger) dataset.
func TestCIFARRecordCount(t *testing.T) {
	for _, n := range []int{0, cifarFileRecords - 1, cifarFileRecords + 1} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "test_batch.bin"), cifarRecords(n, 1, func(int) byte { return 1 }))
		_, err := OpenCIFAR(dir, 10, "test")
		if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "test_batch.bin") {
			t.Errorf("OpenCIFAR with %d records (want %d) = %v; want ErrCorrupt naming the file", n, cifarFileRecords, err)
		}
	}
}

func FuzzParseCIFAR(f *testing.F) {
	f.Add(cifarRecords(1, 1, func(int) byte { return 3 }), false)
	f.Add(cifarRecords(1, 2, func(int) byte { return 30 }), true)
	f.Fuzz(func(t *testing.T, data []byte, hundred bool) {
		if len(data) > 64<<10 {
			return // large inputs only repeat records and slow the fuzzer down
		}
		classes := 10
		if hundred {
			classes = 100
		}
		c, err := ParseCIFAR("fuzz", classes, bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := range c.Len() {
			if _, err := c.Sample(context.Background(), i); err != nil && !errors.Is(err, loaders.ErrLabel) {
				t.Fatalf("Sample(%d) error = %v; want nil or ErrLabel", i, err)
			}
		}
	})
}
