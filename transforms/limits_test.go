package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// pngHeader returns a PNG of only its signature, IHDR and IEND: enough for the header, nothing to
// decode (a regression that decodes it fails on the missing data, not with ErrTooLarge).
func pngHeader(w, h int, depth, colorType byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		b.Write(c)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	chunk("IHDR", append(ihdr, depth, colorType, 0, 0, 0))
	chunk("IEND", nil)
	return b.Bytes()
}

// TestDecodeLimitInBytes: the decode limit counts the memory a decode takes, so a 16-bit PNG with
// fewer pixels than the pixel limit is still refused from its header.
func TestDecodeLimitInBytes(t *testing.T) {
	tests := []struct {
		name          string
		w, h          int
		depth, colour byte
		bytes         int64
		tooLarge      bool
	}{
		{"16-bit RGBA 10000x10000", 10000, 10000, 16, 6, 11 * 1e8, true},
		{"16-bit gray 9000x9000, under the pixel limit", 9000, 9000, 16, 0, 5 * 81e6, true},
		{"8-bit RGBA 10000x10000", 10000, 10000, 8, 6, 4 * 1e8, false},
		{"8-bit gray 100x100", 100, 100, 8, 0, 1e4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := pngHeader(tc.w, tc.h, tc.depth, tc.colour)
			info, err := DecodeInfo(b)
			if err != nil {
				t.Fatal(err)
			}
			if info.DecodedBytes != tc.bytes {
				t.Errorf("DecodedBytes = %d; want %d", info.DecodedBytes, tc.bytes)
			}
			err = Compose().Admit(info)
			if errors.Is(err, ErrTooLarge) != tc.tooLarge {
				t.Errorf("Admit = %v; want ErrTooLarge %v", err, tc.tooLarge)
			}
			if tc.tooLarge {
				// Apply refuses it from the header too, before any decoding.
				err := Compose(ResizeTo(4, 4)).NewWorker().Apply(make([]byte, 48), Input{Encoded: b}, nil)
				if !errors.Is(err, ErrTooLarge) {
					t.Errorf("Apply = %v; want ErrTooLarge", err)
				}
			}
		})
	}
	// A JPEG header claiming 65535x65535 is refused from the header as well.
	jpg := []byte{0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0xff, 0xff, 0xff, 0xff, 1, 1, 0x11, 0, 0xff, 0xd9}
	info, err := DecodeInfo(jpg)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compose().Admit(info); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Admit(65535x65535 JPEG) = %v; want ErrTooLarge", err)
	}
}
