//go:build cuda

package nccl

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <nccl.h>

int stoke_dl_load_nccl(const char *soname, char *err, size_t n); // nccl_dl.c

// Communicators and streams travel as integers, so that no Go pointer reaches C.
static ncclResult_t stoke_nccl_id(void *out) {
	ncclUniqueId id;
	ncclResult_t r = ncclGetUniqueId(&id);
	memcpy(out, &id, sizeof id);
	return r;
}

static ncclResult_t stoke_nccl_init(uintptr_t *comm, int nranks, const void *idbytes, int rank) {
	ncclUniqueId id;
	memcpy(&id, idbytes, sizeof id);
	ncclComm_t c = NULL;
	ncclResult_t r = ncclCommInitRank(&c, nranks, id, rank);
	*comm = (uintptr_t)c;
	return r;
}

static ncclResult_t stoke_nccl_allreduce(uintptr_t buf, size_t count, int dtype, int op, uintptr_t comm, uintptr_t stream) {
	return ncclAllReduce((const void *)buf, (void *)buf, count, (ncclDataType_t)dtype, (ncclRedOp_t)op, (ncclComm_t)comm,
		(cudaStream_t)stream);
}

static ncclResult_t stoke_nccl_async(uintptr_t comm, ncclResult_t *err) { return ncclCommGetAsyncError((ncclComm_t)comm, err); }
static ncclResult_t stoke_nccl_destroy(uintptr_t comm) { return ncclCommDestroy((ncclComm_t)comm); }
static ncclResult_t stoke_nccl_abort(uintptr_t comm) { return ncclCommAbort((ncclComm_t)comm); }
static const char *stoke_nccl_last(uintptr_t comm) { return ncclGetLastError((ncclComm_t)comm); }
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/gpu/cuda"
)

// bootstrap is what New needs of the process group: the rank, the number of ranks, and a
// broadcast of a few bytes from rank 0: a *collective.Group, whose Broadcast goes through its store, as
// PyTorch's ProcessGroupNCCL passes the id through its store.
type bootstrap interface {
	Rank() int
	Size() int
	Broadcast(ctx context.Context, buf []byte, root int) error
}

var _ bootstrap = (*collective.Group)(nil)

// DType is the element type of an NCCL all-reduce.
type DType uint8

const (
	// Float32 is IEEE single precision (ncclFloat32).
	Float32 DType = iota
	// BFloat16 is bfloat16 (ncclBfloat16), as gradients are when training in bf16; NCCL rounds
	// each partial sum to bfloat16.
	BFloat16
	// Float16 is IEEE half precision (ncclFloat16), as gradients are when training in fp16 (DDP's
	// fp16_compress_hook); NCCL rounds each partial sum to fp16, past 65504 to Inf.
	Float16
)

// String returns the type's name.
func (t DType) String() string {
	switch t {
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Float16:
		return "float16"
	}
	return fmt.Sprintf("DType(%d)", uint8(t))
}

// size is the element size in bytes, 0 for an unknown type.
func (t DType) size() int {
	switch t {
	case Float32:
		return 4
	case BFloat16, Float16:
		return 2
	}
	return 0
}

func (t DType) nccl() C.int {
	switch t {
	case BFloat16:
		return C.ncclBfloat16
	case Float16:
		return C.ncclFloat16
	}
	return C.ncclFloat32
}

// ncclLib is NCCL's soname for the major version of the headers the binary was built with.
var ncclLib = "libnccl.so." + strconv.Itoa(C.NCCL_MAJOR)

var ncclLoaded struct {
	once sync.Once
	err  error
}

// loadNCCL loads NCCL (nccl_dl.c) once; every call returns the first call's error.
func loadNCCL() error {
	ncclLoaded.once.Do(func() {
		so := C.CString(ncclLib)
		defer C.free(unsafe.Pointer(so))
		var msg [512]C.char
		if C.stoke_dl_load_nccl(so, &msg[0], C.size_t(len(msg))) != 0 {
			ncclLoaded.err = fmt.Errorf("nccl: cannot load NCCL: %s (install NCCL %d, e.g. PyPI's nvidia-nccl-cu13, or put its %s on LD_LIBRARY_PATH)",
				C.GoString(&msg[0]), C.NCCL_MAJOR, ncclLib)
		}
	})
	return ncclLoaded.err
}

// Comm is one rank's NCCL communicator (see the package documentation for its concurrency and
// ownership rules).
//
// A data-parallel step enqueues, on the compute stream, each bucket's AllReduce right after the
// backward work that produces its gradients, then the optimizer's work, and waits with
// Synchronize (or an event) before it reads results on the host; Synchronize is also where a
// failed collective surfaces.
type Comm struct {
	dev  gpu.Device
	rank int
	size int

	mu      sync.RWMutex // comm and aborted; held (read) during every call that uses comm
	comm    C.uintptr_t  // 0 once closed or aborted
	aborted bool         // ncclCommAbort was called (by Synchronize)
}

// New creates this rank's communicator on dev. Rank 0 calls ncclGetUniqueId and sends the
// 128-byte id to the others through b.Broadcast; then every rank calls ncclCommInitRank on dev's
// context thread, which returns once all b.Size() ranks have joined (or NCCL gives up). ctx bounds
// the exchange of the id; the join is bounded by NCCL's own bootstrap timeout.
//
// dev must be a CUDA device (an error wrapping gpu.ErrForeign otherwise), a different one on each
// rank.
func New(ctx context.Context, b bootstrap, dev gpu.Device) (*Comm, error) {
	rank, size := b.Rank(), b.Size()
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d of %d ranks", rank, size)
	}
	if err := loadNCCL(); err != nil {
		return nil, err
	}
	var id [C.NCCL_UNIQUE_ID_BYTES]byte
	if rank == 0 {
		var r C.ncclResult_t
		if err := cuda.Do(dev, func() error { r = C.stoke_nccl_id(unsafe.Pointer(&id[0])); return nil }); err != nil {
			return nil, fmt.Errorf("nccl: %w", err)
		}
		if r != C.ncclSuccess {
			return nil, callError("ncclGetUniqueId", r, 0, dev)
		}
	}
	if size > 1 {
		if err := b.Broadcast(ctx, id[:], 0); err != nil {
			return nil, fmt.Errorf("nccl: rank %d: broadcasting the unique id: %w", rank, err)
		}
	}
	var comm C.uintptr_t
	var r C.ncclResult_t
	err := cuda.Do(dev, func() error {
		r = C.stoke_nccl_init(&comm, C.int(size), unsafe.Pointer(&id[0]), C.int(rank))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	if r != C.ncclSuccess {
		return nil, callError(fmt.Sprintf("ncclCommInitRank(rank %d of %d)", rank, size), r, 0, dev)
	}
	return &Comm{dev: dev, rank: rank, size: size, comm: comm}, nil
}

// callError names the call, NCCL's string for r and the last message NCCL logged.
func callError(call string, r C.ncclResult_t, comm C.uintptr_t, dev gpu.Device) error {
	msg := fmt.Sprintf("nccl: %s on %s: %s", call, dev.Info(), C.GoString(C.ncclGetErrorString(r)))
	if last := C.GoString(C.stoke_nccl_last(comm)); last != "" {
		msg += ": " + last
	}
	return errors.New(msg)
}

// AllReduce enqueues, on s, NCCL's all-reduce of count elements of type dtype in buf from
// offBytes, in place: afterwards every rank's range holds the sum (Sum) or mean (Avg) of all
// ranks' ranges. It returns once the work is enqueued; s must be a stream of the communicator's
// device, and it should be the stream on which the data were produced, so that the all-reduce
// runs after them without a wait. count 0 enqueues nothing.
//
// Bad arguments (a range outside buf, a buffer or stream of another device or backend, an
// unknown type or operation) give an error at once; so does a closed or aborted communicator
// (wrapping gpu.ErrClosed). A failure while the work runs is NCCL's asynchronous error: Synchronize
// returns it.
func (c *Comm) AllReduce(s gpu.Stream, buf gpu.Buffer, offBytes, count int, dtype DType, op collective.Op) error {
	es := dtype.size()
	if es == 0 {
		return fmt.Errorf("nccl: all-reduce of unknown type %v", dtype)
	}
	var nop C.int
	switch op {
	case collective.Sum:
		nop = C.ncclSum
	case collective.Avg:
		nop = C.ncclAvg
	default:
		return fmt.Errorf("nccl: all-reduce with unknown operation %d", op)
	}
	if offBytes < 0 || count < 0 || offBytes%es != 0 || count > (buf.Len()-offBytes)/es || offBytes > buf.Len() {
		return fmt.Errorf("nccl: all-reduce of %d %v from byte %d of a %d-byte buffer: out of range or misaligned",
			count, dtype, offBytes, buf.Len())
	}
	ptr, bdev, err := cuda.Pointer(buf)
	if err == nil && bdev != c.dev {
		err = fmt.Errorf("the buffer is memory of %s: %w", bdev.Info(), gpu.ErrForeign)
	}
	if err != nil {
		return fmt.Errorf("nccl: the buffer is not memory of %s: %w", c.dev.Info(), err)
	}
	stream, sdev, err := cuda.DriverStream(s)
	if err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	if sdev != c.dev {
		return fmt.Errorf("nccl: stream of %s, communicator of %s: %w", sdev.Info(), c.dev.Info(), gpu.ErrForeign)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.comm == 0 || c.aborted {
		return fmt.Errorf("nccl: all-reduce on a closed or aborted communicator: %w", gpu.ErrClosed)
	}
	if count == 0 {
		return nil
	}
	var r C.ncclResult_t
	err = cuda.Do(c.dev, func() error {
		r = C.stoke_nccl_allreduce(C.uintptr_t(ptr)+C.uintptr_t(offBytes), C.size_t(count), dtype.nccl(), nop, c.comm,
			C.uintptr_t(uintptr(unsafe.Pointer(stream.C()))))
		return nil
	})
	if err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	if r != C.ncclSuccess {
		return callError(fmt.Sprintf("ncclAllReduce(%d %v, rank %d of %d)", count, dtype, c.rank, c.size), r, c.comm, c.dev)
	}
	return nil
}

// asyncErr is the communicator's asynchronous error (ncclCommGetAsyncError), nil while there is
// none or once it is closed. The caller holds c.mu (read).
func (c *Comm) asyncErr() error {
	if c.comm == 0 || c.aborted {
		return nil
	}
	var a C.ncclResult_t
	if r := C.stoke_nccl_async(c.comm, &a); r != C.ncclSuccess {
		return callError("ncclCommGetAsyncError", r, c.comm, c.dev)
	}
	if a == C.ncclSuccess || a == C.ncclInProgress {
		return nil
	}
	return callError(fmt.Sprintf("all-reduce (rank %d of %d, asynchronous error)", c.rank, c.size), a, c.comm, c.dev)
}

// pollEvery is how often Synchronize asks NCCL for an asynchronous error while it waits.
const pollEvery = 5 * time.Millisecond

// Synchronize waits until s has run all the work enqueued on it so far, all-reduces included, and
// returns the stream's error or the communicator's asynchronous error. When the communicator
// fails (a peer left, ranks disagreed), or ctx ends first, it aborts the communicator
// (ncclCommAbort: NCCL's work in flight on every stream ends and its buffers hold no result), and
// returns that error; later AllReduce calls fail and Close only releases. It has joined its
// polling goroutine when it returns.
func (c *Comm) Synchronize(ctx context.Context, s gpu.Stream) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // joined below
		defer wg.Done()
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				c.mu.RLock()
				err := c.asyncErr()
				c.mu.RUnlock()
				if err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	err := s.Synchronize(sctx)
	close(stop)
	wg.Wait()
	if err == nil {
		c.mu.RLock()
		err = c.asyncErr() // one that came as the stream finished
		c.mu.RUnlock()
		if err == nil {
			return nil
		}
	} else if sctx.Err() == nil {
		return fmt.Errorf("nccl: %w", err) // the stream's own error
	}
	if cause := context.Cause(sctx); sctx.Err() != nil && cause != nil {
		err = cause
	}
	if aerr := c.abort(); aerr != nil {
		return errors.Join(err, aerr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("nccl: waiting for rank %d's all-reduces (aborted the communicator): %w", c.rank, err)
	}
	return err
}

// abort calls ncclCommAbort, which also frees the communicator, once.
func (c *Comm) abort() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.comm == 0 || c.aborted {
		return nil
	}
	c.aborted = true
	comm := c.comm
	c.comm = 0
	var r C.ncclResult_t
	if err := cuda.Do(c.dev, func() error { r = C.stoke_nccl_abort(comm); return nil }); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	if r != C.ncclSuccess {
		return callError("ncclCommAbort", r, 0, c.dev)
	}
	return nil
}

// Close releases the communicator: ncclCommDestroy, which waits for the all-reduces still queued
// on the streams; or ncclCommAbort when the communicator has an asynchronous error (a destroy would
// wait for work that cannot finish), and nothing more when Synchronize has already aborted it.
// Call it after Synchronize; other ranks' collectives with this one fail from then on. Closing
// twice returns nil.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.comm == 0 {
		return nil // closed, or aborted (which freed it)
	}
	comm := c.comm
	c.comm = 0
	call, fn := "ncclCommDestroy", func() C.ncclResult_t { return C.stoke_nccl_destroy(comm) }
	var a C.ncclResult_t
	if C.stoke_nccl_async(comm, &a) != C.ncclSuccess || (a != C.ncclSuccess && a != C.ncclInProgress) {
		call, fn = "ncclCommAbort", func() C.ncclResult_t { return C.stoke_nccl_abort(comm) }
	}
	var r C.ncclResult_t
	if err := cuda.Do(c.dev, func() error { r = fn(); return nil }); err != nil {
		return fmt.Errorf("nccl: %w", err)
	}
	if r != C.ncclSuccess {
		return callError(call, r, 0, c.dev)
	}
	return nil
}
