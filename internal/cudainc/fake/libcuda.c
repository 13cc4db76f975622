/*
 * libcuda.c: a CPU stand-in for the part of the CUDA driver API that Stoke's gpu package uses, so
 * that the CUDA backend's Go code (its context thread, streams, events, host functions, caching
 * allocator, the Feeder over CUDA streams) runs its tests on a machine without a GPU:
 *
 *   scripts/cuda-check.sh builds it as libcuda.so (SONAME libcuda.so.1) and runs
 *   go test -tags cuda ./gpu/ against it.
 *
 * Each stream is a worker thread executing its queue in order: copies are memcpy, host functions
 * are called from the worker thread (as the driver calls them from one of its threads), events
 * record the time at which the stream reached them, and cuStreamWaitEvent blocks the stream until
 * the event's latest recording completed. Device memory is host memory. It runs no kernels: the
 * kernels package's tests need a GPU. FAKECUDA_NODEVICE=1 makes cuInit fail with
 * CUDA_ERROR_NO_DEVICE, as on a machine with a driver and no GPU.
 *
 * Only the driver's types and error codes come from the real cuda.h; nothing of NVIDIA's code.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The real header maps these names to versioned symbols; define the exported symbols by hand. */
#undef cuDeviceTotalMem
#undef cuDevicePrimaryCtxRelease
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuEventElapsedTime
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemcpyDtoDAsync
#undef cuMemHostRegister

#define EXPORT __attribute__((visibility("default")))

static int initialised;

EXPORT CUresult cuInit(unsigned int flags) {
	(void)flags;
	const char *nodev = getenv("FAKECUDA_NODEVICE");
	if (nodev && *nodev == '1') return CUDA_ERROR_NO_DEVICE;
	initialised = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
	case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
	case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
	default: *s = "CUDA_ERROR_INVALID_VALUE"; break;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) { return cuGetErrorName(r, s); }

#define NEED_INIT() do { if (!initialised) return CUDA_ERROR_NOT_INITIALIZED; } while (0)

EXPORT CUresult cuDeviceGetCount(int *n) {
	NEED_INIT();
	*n = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	NEED_INIT();
	if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	(void)d;
	NEED_INIT();
	strncpy(name, "Stoke fake CUDA device", (size_t)len);
	if (len > 0) name[len - 1] = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	(void)d;
	NEED_INIT();
	*bytes = (size_t)1 << 30;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
	(void)d;
	NEED_INIT();
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}

static int primary_refs;
static pthread_mutex_t global_mu = PTHREAD_MUTEX_INITIALIZER;

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	(void)d;
	NEED_INIT();
	pthread_mutex_lock(&global_mu);
	primary_refs++;
	pthread_mutex_unlock(&global_mu);
	*c = (CUcontext)&primary_refs;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	(void)d;
	pthread_mutex_lock(&global_mu);
	int refs = --primary_refs;
	pthread_mutex_unlock(&global_mu);
	return refs < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

/* The context must be current on the calling thread for every call below, as with the driver. */
static __thread CUcontext current;

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
	current = c;
	return CUDA_SUCCESS;
}

#define NEED_CTX() do { if (!current) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

/* ---- events ---- */

struct CUevent_st {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned long recorded, completed; /* recordings enqueued, recordings reached */
	struct timespec at;
};

EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags) {
	(void)flags;
	NEED_CTX();
	struct CUevent_st *ev = calloc(1, sizeof *ev);
	pthread_mutex_init(&ev->mu, NULL);
	pthread_cond_init(&ev->cv, NULL);
	*e = ev;
	return CUDA_SUCCESS;
}

/* The driver releases an event still referenced by queued work once that work is done; this
 * stand-in never frees events, which is as safe and costs a few bytes per test. */
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
	NEED_CTX();
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuEventQuery(CUevent e) {
	NEED_CTX();
	pthread_mutex_lock(&e->mu);
	int done = e->completed >= e->recorded;
	pthread_mutex_unlock(&e->mu);
	return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
	NEED_CTX();
	if (cuEventQuery(start) != CUDA_SUCCESS || cuEventQuery(end) != CUDA_SUCCESS) return CUDA_ERROR_NOT_READY;
	*ms = (float)((end->at.tv_sec - start->at.tv_sec) * 1e3 + (end->at.tv_nsec - start->at.tv_nsec) / 1e6);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) { return cuEventElapsedTime(ms, start, end); }

/* ---- streams ---- */

enum op_kind { OP_COPY, OP_HOST, OP_RECORD, OP_WAIT };

struct op {
	enum op_kind kind;
	void *dst;
	const void *src;
	size_t n;
	CUhostFn fn;
	void *data;
	CUevent ev;
	unsigned long gen;
	struct op *next;
};

struct CUstream_st {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct op *head, *tail;
	int stopping;
	pthread_t worker;
};

static void run_op(struct op *o) {
	switch (o->kind) {
	case OP_COPY: memcpy(o->dst, o->src, o->n); break;
	case OP_HOST: o->fn(o->data); break;
	case OP_RECORD:
		pthread_mutex_lock(&o->ev->mu);
		clock_gettime(CLOCK_MONOTONIC, &o->ev->at);
		if (o->gen > o->ev->completed) o->ev->completed = o->gen;
		pthread_cond_broadcast(&o->ev->cv);
		pthread_mutex_unlock(&o->ev->mu);
		break;
	case OP_WAIT:
		pthread_mutex_lock(&o->ev->mu);
		while (o->ev->completed < o->gen) pthread_cond_wait(&o->ev->cv, &o->ev->mu);
		pthread_mutex_unlock(&o->ev->mu);
		break;
	}
}

static void *worker(void *arg) {
	struct CUstream_st *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
		struct op *o = s->head;
		if (!o) { /* stopping and drained */
			pthread_mutex_unlock(&s->mu);
			return NULL;
		}
		pthread_mutex_unlock(&s->mu);
		run_op(o); /* the op stays queued while it runs: Destroy waits for it */
		pthread_mutex_lock(&s->mu);
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		free(o);
	}
}

static CUresult enqueue(CUstream s, struct op o) {
	if (!s) return CUDA_ERROR_INVALID_HANDLE; /* the legacy default stream is not emulated */
	struct op *p = malloc(sizeof *p);
	*p = o;
	p->next = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->tail) s->tail->next = p; else s->head = p;
	s->tail = p;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
	(void)flags;
	NEED_CTX();
	struct CUstream_st *s = calloc(1, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_create(&s->worker, NULL, worker, s);
	*ps = s;
	return CUDA_SUCCESS;
}

/* Like the driver, destroying a stream with queued work lets that work finish first. */
EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
	NEED_CTX();
	pthread_mutex_lock(&s->mu);
	s->stopping = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->worker, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
	NEED_CTX();
	pthread_mutex_lock(&e->mu);
	unsigned long gen = ++e->recorded;
	pthread_mutex_unlock(&e->mu);
	return enqueue(s, (struct op){.kind = OP_RECORD, .ev = e, .gen = gen});
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
	(void)flags;
	NEED_CTX();
	pthread_mutex_lock(&e->mu);
	unsigned long gen = e->recorded;
	pthread_mutex_unlock(&e->mu);
	return enqueue(s, (struct op){.kind = OP_WAIT, .ev = e, .gen = gen});
}

EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) {
	NEED_CTX();
	return enqueue(s, (struct op){.kind = OP_HOST, .fn = fn, .data = data});
}

/* ---- memory ---- */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CTX();
	void *m = aligned_alloc(256, (n + 255) / 256 * 256);
	if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	NEED_CTX();
	free((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	NEED_CTX();
	return enqueue(s, (struct op){.kind = OP_COPY, .dst = (void *)(uintptr_t)dst, .src = src, .n = n});
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
	NEED_CTX();
	return enqueue(s, (struct op){.kind = OP_COPY, .dst = dst, .src = (const void *)(uintptr_t)src, .n = n});
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	NEED_CTX();
	return enqueue(s, (struct op){.kind = OP_COPY, .dst = (void *)(uintptr_t)dst, .src = (const void *)(uintptr_t)src, .n = n});
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
	(void)flags;
	NEED_CTX();
	return p && n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemHostUnregister(void *p) {
	NEED_CTX();
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
