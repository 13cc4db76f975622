package weights

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/safetensors"
)

// TestCheckFile: PyTorch's pickles, which Open cannot read, are named with how to convert them;
// torch.save's archive, safetensors (even one whose header length starts like a pickle) and
// other files pass.
func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A safetensors file whose header length (640) starts with the bytes of a protocol-2 pickle.
	header := `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	header += strings.Repeat(" ", 640-len(header))
	st := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	st = append(append(st, header...), 0, 0, 0, 0)

	for _, tc := range []struct {
		name string
		data []byte
		want string // in the error; "" for none
	}{
		{"resnet18.pth", []byte("PK\x03\x04\x00\x00\x08\x00\x00\x00archive/data.pkl"), ""}, // torch.save's zip: Open reads it
		// torch.save's legacy format: a protocol-2 pickle of its magic number first.
		{"legacy.pt", []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8}, "a pickle (protocol 2"},
		{"dump.pkl", []byte{0x80, 0x04, 0x95, 0x10, 0, 0, 0, 0, 0, 0, 0, '}', '.'}, "a pickle (protocol 4"},
		{"w.safetensors", st, ""},
		{"short", []byte{0x80}, ""},
		{"text.txt", []byte("hello, world"), ""},
	} {
		err := CheckFile(write(tc.name, tc.data))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v; want nil", tc.name, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, safetensors.ErrFormat) || !strings.HasPrefix(err.Error(), "weights ") ||
			!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "save_file(model.state_dict(), ") ||
			!strings.Contains(err.Error(), filepath.Join(dir, tc.name)) {
			t.Errorf("%s: %v; want a safetensors.ErrFormat naming the file, %q and how to convert it", tc.name, err, tc.want)
		}
	}
	if err := CheckFile(filepath.Join(dir, "missing.pth")); err != nil {
		t.Errorf("missing file: %v; want nil (the loader reports it)", err)
	}
	// The safetensors file above really is one: its 0x80 0x02 start is a header length.
	if st[0] != 0x80 || st[1] != 0x02 {
		t.Fatalf("the safetensors file starts % x; want 80 02", st[:2])
	}
	if _, err := safetensors.NewFile(bytes.NewReader(st), int64(len(st))); err != nil {
		t.Errorf("the safetensors file does not parse: %v", err)
	}
}
