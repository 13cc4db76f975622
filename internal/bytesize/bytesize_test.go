package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 10 << 30: "10.0 GiB", 1 << 62: "4.0 EiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q; want %q", n, got, want)
		}
	}
}
