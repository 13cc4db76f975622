package gpu

import (
	"errors"
	"testing"
)

// FuzzOpen: device names come from command lines and config files. Open never panics, and either
// opens the CPU device or fails with one of the documented sentinels.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{"cpu", "cuda", "cuda:1", "cpu:0", "CPU:00", "", ":", "cpu:", "cpu:-1", "cpu:99999999999999999999", "x:y:z", " cuda : 2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		d, err := Open(name)
		if err != nil {
			if !errors.Is(err, ErrUnknownBackend) && !errors.Is(err, ErrNoDevice) {
				t.Fatalf("Open(%q) error = %v; want ErrUnknownBackend or ErrNoDevice", name, err)
			}
			return
		}
		defer d.Close()
		if info := d.Info(); info.Backend == "cpu" && info.Index != 0 {
			t.Fatalf("Open(%q) = %v; want cpu:0", name, info)
		}
	})
}
