//go:build cuda

package cuda

// This file holds the one //export of the CUDA backend; cgo forbids C definitions in the preamble
// of such a file, so the trampoline that cuLaunchHostFunc calls lives in stream.go.

// #include <stdint.h>
import "C"

import "runtime/cgo"

// stokeCUDAHostFunc runs on a driver thread when a stream reaches a host function enqueued by
// launchHost; handle names the Go closure, which runs once.
//
//export stokeCUDAHostFunc
func stokeCUDAHostFunc(handle C.uintptr_t) {
	h := cgo.Handle(handle)
	f := h.Value().(func())
	h.Delete()
	f()
}
