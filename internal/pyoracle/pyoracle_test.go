package pyoracle

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a test that records Fatalf and Skipf instead of ending.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

// TestPolicy: an interpreter that imports the modules is returned; one that cannot is a skip when
// it is python3's guess, and a failure when $STOKE_PYTHON promised it.
func TestPolicy(t *testing.T) {
	t.Setenv("STOKE_PYTHON", "/bin/true") // imports anything
	r := &recorder{TB: t}
	if py := Python(r, "anything"); py != "/bin/true" || r.fatal != "" || r.skip != "" {
		t.Errorf("an interpreter that imports: %q, fatal %q, skip %q", py, r.fatal, r.skip)
	}
	t.Setenv("STOKE_PYTHON", "/bin/false")
	r = &recorder{TB: t}
	Python(r, "torch", "timm")
	if !strings.Contains(r.fatal, "STOKE_PYTHON=/bin/false cannot import torch, timm") {
		t.Errorf("a promised interpreter that cannot import: fatal %q, skip %q", r.fatal, r.skip)
	}
	t.Setenv("STOKE_PYTHON", "")
	t.Setenv("PATH", t.TempDir()) // no python3
	r = &recorder{TB: t}
	Python(r, "numpy", "scipy")
	if r.fatal != "" || !strings.Contains(r.skip, "python3 cannot import numpy, scipy") {
		t.Errorf("no python3: fatal %q, skip %q", r.fatal, r.skip)
	}
}
