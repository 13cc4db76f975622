//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
)

// The driver objects behind the gpu package's interfaces, for code that calls CUDA itself (NCCL in
// collective/nccl, a kernel or library of your own): PyTorch's Tensor.data_ptr and Stream.cuda_stream.
// Work enqueued this way is ordered with Stoke's on the same stream; make every driver call through
// Do.

// Pointer returns the device address of b's first byte (0 for an empty buffer) and the device that
// owns it. Buffers of other backends give an error wrapping gpu.ErrForeign, freed ones
// gpu.ErrFreed.
func Pointer(b gpu.Buffer) (cu.DevicePtr, gpu.Device, error) {
	cb, err := buffer(b)
	if err != nil {
		return 0, nil, fmt.Errorf("cuda: %w", err)
	}
	return cb.ptr, cb.dev, nil
}

// DriverStream returns the driver stream behind s and the device it belongs to. Streams of other
// backends give an error wrapping gpu.ErrForeign, closed ones gpu.ErrClosed.
func DriverStream(s gpu.Stream) (cu.Stream, gpu.Device, error) {
	cs, err := stream(s)
	if err != nil {
		return cu.Stream{}, nil, fmt.Errorf("cuda: %w", err)
	}
	return cs.s, cs.dev, nil
}

// Do runs fn on the OS thread where d's context is current and returns its error: every driver
// call for d (launches, library calls, module loads) must be made there, which also keeps them in
// call order. fn must not call Do. Devices of other backends give an error wrapping
// gpu.ErrForeign.
func Do(d gpu.Device, fn func() error) error {
	cd, ok := d.(*cudaDevice)
	if !ok || cd == nil {
		return fmt.Errorf("cuda: device %T is not a CUDA device: %w", d, gpu.ErrForeign)
	}
	if err := cd.th.do(fn); err != errThreadClosed {
		return err
	}
	return fmt.Errorf("cuda: %s: %w", cd.info, errThreadClosed)
}

// buffer resolves b to a live CUDA buffer; its error is the cause, for the caller to prefix.
func buffer(b gpu.Buffer) (*cudaBuffer, error) {
	cb, ok := b.(*cudaBuffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("buffer %T is not CUDA memory: %w", b, gpu.ErrForeign)
	}
	if cb.freed.Load() {
		return nil, fmt.Errorf("buffer of %d bytes on %s: %w", cb.n, cb.dev.info, gpu.ErrFreed)
	}
	return cb, nil
}

// stream resolves s to an open CUDA stream; its error is the cause, for the caller to prefix.
func stream(s gpu.Stream) (*cudaStream, error) {
	cs, ok := s.(*cudaStream)
	if !ok || cs == nil {
		return nil, fmt.Errorf("stream %T is not a CUDA stream: %w", s, gpu.ErrForeign)
	}
	if cs.closed.Load() {
		return nil, fmt.Errorf("stream of %s: %w", cs.dev.info, gpu.ErrClosed)
	}
	return cs, nil
}
