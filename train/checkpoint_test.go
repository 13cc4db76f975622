package train

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCheckpointTarget: Config.Checkpoint never replaces something that is not a checkpoint (a
// device, a FIFO, a folder, a user's file): New refuses it before any training, leaving it as it
// was; an existing checkpoint or an empty file is fine.
func TestCheckpointTarget(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("my data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "ck.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{text, fifo, dir} {
		tr, err := New(smallMLP(t), openCPU(t), SGD{LR: 0.1}, Config{Checkpoint: path})
		if err == nil {
			tr.Close()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("New with Checkpoint %s = %v; want ErrConfig", path, err)
		}
	}
	if b, _ := os.ReadFile(text); string(b) != "my data" {
		t.Errorf("%s now holds %q", text, b)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO is gone or replaced: %v %v", st, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	fit(t, newFixture(t, 64), smallMLP(t), SGD{LR: 0.1}, Config{Checkpoint: good})
	for _, path := range []string{empty, good} {
		tr, err := New(smallMLP(t), openCPU(t), SGD{LR: 0.1}, Config{Checkpoint: path})
		if err != nil {
			t.Errorf("New with Checkpoint %s = %v; want it accepted", path, err)
			continue
		}
		tr.Close()
	}
}
