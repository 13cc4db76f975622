// Package gputest opens the CUDA device for the tests of a -tags cuda build, which importing it
// links the CUDA backend into.
package gputest

import (
	"errors"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	_ "github.com/stoke-ml/stoke/gpu/cuda" // the backend the tests open, in a -tags cuda build
)

// CUDA opens cuda:0 for a test. The test skips where no device opens (no GPU, no driver), but
// fails in a binary without the CUDA backend (a build without -tags cuda), where every CUDA test
// would otherwise skip silently.
func CUDA(t testing.TB) gpu.Device {
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
