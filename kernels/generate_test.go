package kernels_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stoke-ml/stoke/kernels/internal/opdef"
)

// TestGeneratedFresh: the files generated from the op table (kernels/internal/opdef) are what
// the table gives now, so that a table edit without `go generate ./kernels` fails here.
func TestGeneratedFresh(t *testing.T) {
	files, err := opdef.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v; run go generate ./kernels", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./kernels", path)
		}
	}
}
