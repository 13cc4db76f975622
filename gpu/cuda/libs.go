//go:build cuda

package cuda

/*
#include <stdlib.h>
#include <cuda.h>
#include <cublas_v2.h>

// libs_dl.c
int stoke_dl_load_nvrtc(const char *soname, char *err, size_t n);
int stoke_dl_load_cublas(const char *soname, char *err, size_t n);
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// cudaLib is a library of the op set, loaded at its first use (libs_dl.c) under the soname of the
// major version whose headers the binary was built with.
type cudaLib struct {
	name, soname string
	load         func(soname, msg *C.char, n C.size_t) C.int
	once         sync.Once
	err          error
}

var (
	nvrtcLib = &cudaLib{name: "NVRTC", soname: fmt.Sprintf("libnvrtc.so.%d", C.CUDA_VERSION/1000),
		load: func(so, msg *C.char, n C.size_t) C.int { return C.stoke_dl_load_nvrtc(so, msg, n) }}
	cublasLib = &cudaLib{name: "cuBLAS", soname: fmt.Sprintf("libcublas.so.%d", C.CUBLAS_VER_MAJOR),
		load: func(so, msg *C.char, n C.size_t) C.int { return C.stoke_dl_load_cublas(so, msg, n) }}
)

// Load loads the library once; every call returns the first call's error.
func (l *cudaLib) Load() error {
	l.once.Do(func() {
		so := C.CString(l.soname)
		defer C.free(unsafe.Pointer(so))
		var msg [512]C.char
		if l.load(so, &msg[0], C.size_t(len(msg))) != 0 {
			l.err = fmt.Errorf("cuda: cannot load %s: %s (install CUDA %d's %s, or put it on LD_LIBRARY_PATH)",
				l.name, C.GoString(&msg[0]), C.CUDA_VERSION/1000, l.soname)
		}
	})
	return l.err
}
