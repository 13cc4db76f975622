package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestLinesModeOnNonTerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, Auto, "epoch 1", "step", 10) // a bytes.Buffer is not a terminal
	for range 10 {
		b.Add(1)
	}
	b.SetSuffix("loss 0.5")
	b.Finish()
	b.Finish()
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("Lines output = %q; want exactly the final line (updates are throttled)", out)
	}
	for _, want := range []string{"epoch 1: 10/10 step (100%)", "step/s", "loss 0.5"} {
		if !strings.Contains(out, want) {
			t.Errorf("final line %q lacks %q", out, want)
		}
	}
}

func TestQuietPrintsNothing(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, Quiet, "x", "img", 3)
	b.Add(3)
	b.Finish()
	if buf.Len() != 0 {
		t.Errorf("Quiet wrote %q; want nothing", buf.String())
	}
}
