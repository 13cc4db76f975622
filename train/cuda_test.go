//go:build cuda

package train

import (
	"errors"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	_ "github.com/stoke-ml/stoke/gpu/cuda" // the backend these tests open
)

// openCUDA opens cuda:0 for the CUDA tests of this package. They skip where no device opens (no
// GPU, no driver), but a test binary without the backend fails: they would all skip silently.
func openCUDA(t *testing.T) gpu.Device {
	t.Helper()
	dev, err := gpu.Open("cuda")
	if errors.Is(err, gpu.ErrUnknownBackend) {
		t.Fatal(err)
	}
	if err != nil {
		t.Skip(err)
	}
	return dev
}
