// Package pyoracle finds the Python that Stoke's interop tests check it against: PyTorch,
// torchvision, timm, safetensors, onnxruntime, TensorBoard and torch.distributed, as .ci/run
// installs them (a venv over Debian's torchvision, named by $STOKE_PYTHON).
package pyoracle

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	probed = map[[2]string]error{} // by interpreter and import statement
)

// Python returns the interpreter that imports modules ("torch", "torchvision", "timm", ...):
// $STOKE_PYTHON, else python3. When it cannot import them the test is skipped, naming the
// interpreter, the modules and the import's error; but it fails when $STOKE_PYTHON names it, which
// promises the oracle (.ci/run sets it only once the imports work), so that a broken venv cannot
// pass CI by skipping. Each interpreter and set of modules is tried once per test binary.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	py, promised := os.Getenv("STOKE_PYTHON"), true
	if py == "" {
		py, promised = "python3", false
	}
	stmt := "import " + strings.Join(modules, ", ")
	mu.Lock()
	err, ok := probed[[2]string{py, stmt}]
	if !ok {
		var out []byte
		if out, err = exec.Command(py, "-c", stmt).CombinedOutput(); err != nil {
			err = &importError{err: err, out: strings.TrimSpace(string(out))}
		}
		probed[[2]string{py, stmt}] = err
	}
	mu.Unlock()
	switch {
	case err != nil && promised:
		t.Fatalf("STOKE_PYTHON=%s cannot %s: %v", py, stmt, err)
	case err != nil:
		t.Skipf("%s cannot %s (set STOKE_PYTHON to a python3 that can; .ci/run does): %v", py, stmt, err)
	}
	return py
}

type importError struct {
	err error
	out string
}

func (e *importError) Error() string {
	lines := strings.Split(e.out, "\n")
	return e.err.Error() + ": " + lines[len(lines)-1] // the exception, not the traceback
}

// Run runs script with py, in as JSON on its stdin, and decodes its stdout into out; the script's
// stderr is in the failure.
func Run(t testing.TB, py, script string, in, out any) {
	t.Helper()
	inb, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(inb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", py, err, stderr.Bytes())
	}
	if err := json.Unmarshal(outb, out); err != nil {
		t.Fatal(err)
	}
}
