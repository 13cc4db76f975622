//go:build cuda

package train

import (
	"testing"

	"github.com/stoke-ml/stoke/internal/gputest"
)

// TestCUDAPoolBeforeReLUExact is TestPoolBeforeReLUExact on the CUDA op set (on the stand-in in
// CI): its ReLU and pooling kernels give the reordered model the written order's bits too.
func TestCUDAPoolBeforeReLUExact(t *testing.T) {
	dev := gputest.CUDA(t)
	t.Cleanup(func() { dev.Close() }) // after the test data's buffers (cleanups run last first)
	poolBeforeReLUExact(t, dev)
}
