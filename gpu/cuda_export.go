//go:build cuda

package gpu

import (
	"fmt"

	"gorgonia.org/cu"
)

// The functions below give the CUDA op set (kernels/, built with the same tag) the driver objects
// behind this package's interfaces; nothing else should need them.

// CUDAPointer returns the device address of b's first byte (0 for an empty buffer). Buffers of
// other backends give ErrForeign, freed ones ErrFreed.
func CUDAPointer(b Buffer) (cu.DevicePtr, error) {
	cb, ok := b.(*cudaBuffer)
	if !ok || cb == nil {
		return 0, fmt.Errorf("gpu: buffer %T is not CUDA memory: %w", b, ErrForeign)
	}
	if cb.freed.Load() {
		return 0, fmt.Errorf("gpu: buffer of %d bytes on %s: %w", cb.n, cb.dev.info, ErrFreed)
	}
	return cb.ptr, nil
}

// CUDABufferDevice returns the device that owns b, or nil for buffers of other backends.
func CUDABufferDevice(b Buffer) Device {
	if cb, ok := b.(*cudaBuffer); ok && cb != nil {
		return cb.dev
	}
	return nil
}

// CUDAStream returns the driver stream behind s and the device it belongs to. Streams of other
// backends give ErrForeign, closed ones ErrClosed.
func CUDAStream(s Stream) (cu.Stream, Device, error) {
	cs, ok := s.(*cudaStream)
	if !ok || cs == nil {
		return cu.Stream{}, nil, fmt.Errorf("gpu: stream %T is not a CUDA stream: %w", s, ErrForeign)
	}
	if err := cs.open("use"); err != nil {
		return cu.Stream{}, nil, err
	}
	return cs.s, cs.dev, nil
}

// CUDADo runs fn on the OS thread where d's context is current and returns its error: every
// driver call for d (launches, cuBLAS, module loads) must be made there. fn must not call CUDADo.
func CUDADo(d Device, fn func() error) error {
	cd, ok := d.(*cudaDevice)
	if !ok || cd == nil {
		return fmt.Errorf("gpu: device %T is not a CUDA device: %w", d, ErrForeign)
	}
	return cd.th.do(fn)
}
