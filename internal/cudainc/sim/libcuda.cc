/*
 * libcuda.cc: a CPU stand-in for the part of the CUDA driver API that Stoke uses, with the real
 * driver's semantics, so that the CUDA backend's Go code and its kernels run on a machine without a
 * GPU (scripts/cuda-sim.sh builds it as libcuda.so.1):
 *
 *   - each stream is a thread executing its queue in order: copies, kernel launches, cuBLAS calls
 *     (libcublas.cc), host functions (called from the stream's thread, as the driver calls them
 *     from one of its own), event records and waits (cuStreamWaitEvent holds the stream until the
 *     event's latest recording has been reached); all asynchronous to the host;
 *   - copies from or to pageable host memory are synchronous as the driver's are (H2D returns once
 *     the source may be reused, D2H once the data is there); from page-locked memory
 *     (cuMemHostRegister, cuMemHostAlloc) they are asynchronous and land 0.3 ms after their stream
 *     reaches them (a DMA's latency), so that a missing stream wait shows as stale data;
 *   - cuModuleLoadData takes the real NVRTC PTX and cuModuleGetFunction resolves a kernel by name in
 *     it and in the simulator build of the same ops.cu (libcudasim_ops.so); the parameter list of
 *     the PTX entry must match the C++ signature;
 *   - cuLaunchKernel runs the kernel (runtime.cc) with the grid, block, dynamic shared memory and
 *     parameters given; the parameter values are copied at the launch, as the driver does;
 *   - device and mapped host memory come from a guard-page allocator (runtime.cc): an access past
 *     the end of an allocation or after its cuMemFree faults, and the fault is reported with the
 *     kernel, block and thread, or the copy, that made it. A copy range outside its allocation is
 *     refused with CUDA_ERROR_INVALID_VALUE, as the driver refuses it.
 *
 * Parameter checking: the driver gets no count with kernelParams. Stoke's launcher
 * (gpu/cuda/launch.go) ends the array with a NULL and then a pointer to a descriptor of its
 * argument sizes; a real driver reads only as many entries as the kernel has parameters, so both are
 * ignored on a GPU. Here a count or a size that differs from the kernel's C++ signature fails the
 * launch with CUDA_ERROR_INVALID_VALUE and a message naming the kernel.
 *
 * FAKECUDA_NODEVICE=1 makes cuInit fail with CUDA_ERROR_NO_DEVICE, as on a machine with a driver
 * and no GPU. Only the driver's types and error codes come from NVIDIA's cuda.h.
 */
#define _GNU_SOURCE 1
#include <cuda.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime.h"

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
#undef cuMemHostGetDevicePointer
#undef cuLaunchKernel

#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace cudasim;

static CUresult misuse(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static CUresult misuse(CUresult r, const char *fmt, ...) {
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "cudasim: %s\n", buf);
	return r;
}

static int initialised;

EXPORT CUresult cuInit(unsigned int flags) {
	(void)flags;
	const char *nodev = getenv("FAKECUDA_NODEVICE");
	if (nodev && *nodev == '1') return CUDA_ERROR_NO_DEVICE;
	install_fault_handler();
	initialised = 1;
	return CUDA_SUCCESS;
}

/* NVRTC 13 dlopens libcuda.so.1 and asks for the driver's private export tables (for its compile
 * cache); the stand-in has none, and says so. */
EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *) {
	if (table) *table = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
	case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
	case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
	case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
	case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
	case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
	case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
	case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
	case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
	case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) { return cuGetErrorName(r, s); }

#define NEED_INIT() \
	do { \
		if (!initialised) return CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

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

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice) {
	NEED_INIT();
	strncpy(name, "Stoke CUDA stand-in (CPU)", (size_t)len);
	if (len > 0) name[len - 1] = 0;
	return CUDA_SUCCESS;
}

static const size_t device_memory = (size_t)16 << 30;

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice) {
	NEED_INIT();
	*bytes = device_memory;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice) {
	NEED_INIT();
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *v = 1; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 * 1024; break;
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}

static int primary_refs;
static std::mutex &global_mu = *new std::mutex; // never destroyed (see runtime.cc)

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice) {
	NEED_INIT();
	std::lock_guard<std::mutex> lk(global_mu);
	primary_refs++;
	*c = (CUcontext)&primary_refs;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) {
	std::lock_guard<std::mutex> lk(global_mu);
	return --primary_refs < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

/* The context must be current on the calling thread for every call below, as with the driver. */
static thread_local CUcontext current;

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
	current = c;
	return CUDA_SUCCESS;
}

#define NEED_CTX() \
	do { \
		if (!current) return CUDA_ERROR_INVALID_CONTEXT; \
	} while (0)

/* ---- events ---- */

struct CUevent_st {
	std::mutex mu;
	std::condition_variable cv;
	unsigned long recorded = 0, completed = 0; /* recordings enqueued, recordings reached */
	struct timespec at = {};
};

EXPORT CUresult cuEventCreate(CUevent *e, unsigned int) {
	NEED_CTX();
	*e = new CUevent_st();
	return CUDA_SUCCESS;
}

/* The driver releases an event still referenced by queued work once that work is done; this
 * stand-in never frees events, which is as safe and costs a few bytes per event. */
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
	NEED_CTX();
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuEventQuery(CUevent e) {
	NEED_CTX();
	std::lock_guard<std::mutex> lk(e->mu);
	return e->completed >= e->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
	NEED_CTX();
	std::unique_lock<std::mutex> lk(e->mu);
	unsigned long want = e->recorded;
	e->cv.wait(lk, [&] { return e->completed >= want; });
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
	NEED_CTX();
	if (cuEventQuery(start) != CUDA_SUCCESS || cuEventQuery(end) != CUDA_SUCCESS) return CUDA_ERROR_NOT_READY;
	*ms = (float)((end->at.tv_sec - start->at.tv_sec) * 1e3 + (end->at.tv_nsec - start->at.tv_nsec) / 1e6);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) { return cuEventElapsedTime(ms, start, end); }

/* ---- streams ---- */

enum OpKind { OP_COPY, OP_HOST, OP_RECORD, OP_WAIT, OP_LAUNCH, OP_WORK };

struct Op {
	OpKind kind;
	void *dst = nullptr;
	const void *src = nullptr;
	size_t n = 0;
	const char *what = nullptr; // for the fault report
	CUhostFn fn = nullptr;
	void (*work)(void *) = nullptr;
	void *data = nullptr;
	CUevent ev = nullptr;
	unsigned long gen = 0;
	Launch launch = {};
	std::vector<unsigned char> args; // the launch's parameter values
	std::vector<void *> params;
	bool done = false;   // under the stream's lock
	bool waited = false; // the enqueuer waits for done and deletes the op (synchronous copies)
	Op *next = nullptr;
};

struct CUstream_st {
	std::mutex mu;
	std::condition_variable cv;
	Op *head = nullptr, *tail = nullptr;
	bool stopping = false;
	pthread_t worker;
};

static std::mutex &streams_mu = *new std::mutex;
static std::set<CUstream> &streams = *new std::set<CUstream>;

static void run_op(Op *o) {
	switch (o->kind) {
	case OP_COPY: {
		// An asynchronous copy lands a DMA latency after its stream reaches it, so that work on
		// another stream that does not wait for it reads the old contents.
		if (!o->waited) {
			struct timespec latency = {0, 300 * 1000};
			nanosleep(&latency, NULL);
		}
		Activity a(o->what);
		memcpy(o->dst, o->src, o->n);
		break;
	}
	case OP_HOST: o->fn(o->data); break;
	case OP_WORK: o->work(o->data); break;
	case OP_LAUNCH: run_grid(o->launch); break;
	case OP_RECORD: {
		std::lock_guard<std::mutex> lk(o->ev->mu);
		clock_gettime(CLOCK_MONOTONIC, &o->ev->at);
		if (o->gen > o->ev->completed) o->ev->completed = o->gen;
		o->ev->cv.notify_all();
		break;
	}
	case OP_WAIT: {
		std::unique_lock<std::mutex> lk(o->ev->mu);
		o->ev->cv.wait(lk, [&] { return o->ev->completed >= o->gen; });
		break;
	}
	}
}

static void *stream_worker(void *arg) {
	CUstream s = (CUstream)arg;
	std::unique_lock<std::mutex> lk(s->mu);
	for (;;) {
		s->cv.wait(lk, [&] { return s->head || s->stopping; });
		Op *o = s->head;
		if (!o) return NULL; /* stopping and drained */
		lk.unlock();
		run_op(o); /* the op stays queued while it runs: Destroy and drains wait for it */
		lk.lock();
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		o->done = true;
		bool waited = o->waited;
		s->cv.notify_all();
		if (!waited) delete o;
	}
}

static CUresult enqueue(CUstream s, Op *p, bool wait = false) {
	if (!s) {
		delete p;
		return misuse(CUDA_ERROR_INVALID_HANDLE, "the legacy default stream (NULL) is not emulated; Stoke uses its own streams");
	}
	p->waited = wait;
	std::unique_lock<std::mutex> lk(s->mu);
	if (s->tail) s->tail->next = p;
	else s->head = p;
	s->tail = p;
	s->cv.notify_all();
	if (wait) {
		s->cv.wait(lk, [&] { return p->done; });
		delete p;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int) {
	NEED_CTX();
	CUstream s = new CUstream_st();
	pthread_create(&s->worker, NULL, stream_worker, s);
	std::lock_guard<std::mutex> lk(streams_mu);
	streams.insert(s);
	*ps = s;
	return CUDA_SUCCESS;
}

/* Like the driver, destroying a stream with queued work lets that work finish first. */
EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
	NEED_CTX();
	{
		std::lock_guard<std::mutex> lk(streams_mu);
		if (!streams.erase(s)) return CUDA_ERROR_INVALID_HANDLE;
	}
	{
		std::lock_guard<std::mutex> lk(s->mu);
		s->stopping = true;
		s->cv.notify_all();
	}
	pthread_join(s->worker, NULL);
	delete s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
	NEED_CTX();
	if (!s) return misuse(CUDA_ERROR_INVALID_HANDLE, "cuStreamSynchronize: the legacy default stream is not emulated");
	std::unique_lock<std::mutex> lk(s->mu);
	s->cv.wait(lk, [&] { return !s->head; });
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
	NEED_CTX();
	unsigned long gen;
	{
		std::lock_guard<std::mutex> lk(e->mu);
		gen = ++e->recorded;
	}
	Op *o = new Op{OP_RECORD};
	o->ev = e;
	o->gen = gen;
	return enqueue(s, o);
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int) {
	NEED_CTX();
	unsigned long gen;
	{
		std::lock_guard<std::mutex> lk(e->mu);
		gen = e->recorded;
	}
	Op *o = new Op{OP_WAIT};
	o->ev = e;
	o->gen = gen;
	return enqueue(s, o);
}

EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) {
	NEED_CTX();
	Op *o = new Op{OP_HOST};
	o->fn = fn;
	o->data = data;
	return enqueue(s, o);
}

extern "C" __attribute__((visibility("default"))) int cudasim_enqueue(void *stream, void (*fn)(void *), void *data) {
	Op *o = new Op{OP_WORK};
	o->work = fn;
	o->data = data;
	return enqueue((CUstream)stream, o);
}

/* ---- memory ---- */

static size_t device_live; // bytes, under global_mu
static std::map<void *, size_t> &device_sizes = *new std::map<void *, size_t>;
static std::map<uintptr_t, size_t> &registered = *new std::map<uintptr_t, size_t>; // cuMemHostRegister ranges, under global_mu

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CTX();
	if (n == 0) return CUDA_ERROR_INVALID_VALUE;
	{
		std::lock_guard<std::mutex> lk(global_mu);
		if (device_live + n > device_memory) return CUDA_ERROR_OUT_OF_MEMORY;
		device_live += n;
	}
	void *m = alloc(n, kDevice);
	std::lock_guard<std::mutex> lk(global_mu);
	if (!m) {
		device_live -= n;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	device_sizes[m] = n;
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

// drain waits until every stream has run all its queued work: cuMemFree synchronizes the device.
static void drain() {
	std::vector<CUstream> all;
	{
		std::lock_guard<std::mutex> lk(streams_mu);
		all.assign(streams.begin(), streams.end());
	}
	for (CUstream s : all) {
		std::unique_lock<std::mutex> lk(s->mu);
		s->cv.wait(lk, [&] { return !s->head; });
	}
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	NEED_CTX();
	drain();
	if (!release((void *)(uintptr_t)p, kDevice)) return misuse(CUDA_ERROR_INVALID_VALUE, "cuMemFree(0x%llx): not a live device allocation", (unsigned long long)p);
	std::lock_guard<std::mutex> lk(global_mu);
	device_live -= device_sizes[(void *)(uintptr_t)p];
	device_sizes.erase((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

// pinned: [p, p+n) is page-locked host memory (registered or allocated by cuMemHostAlloc).
static bool pinned(const void *p, size_t n) {
	if (within((uintptr_t)p, n, kHost)) return true;
	std::lock_guard<std::mutex> lk(global_mu);
	auto it = registered.upper_bound((uintptr_t)p);
	if (it == registered.begin()) return false;
	--it;
	return (uintptr_t)p - it->first + n <= it->second;
}

static CUresult copy(const char *api, CUstream s, void *dst, const void *src, size_t n, bool dst_dev, bool src_dev) {
	NEED_CTX();
	if (n == 0) return CUDA_SUCCESS;
	if (dst_dev && !within((uintptr_t)dst, n, kDevice | kHost)) {
		char d[256];
		describe((uintptr_t)dst + n - 1, d, sizeof d);
		return misuse(CUDA_ERROR_INVALID_VALUE, "%s: destination [0x%zx, +%zu) is not inside one device allocation (its last byte: %s)", api,
			(size_t)dst, n, d);
	}
	if (src_dev && !within((uintptr_t)src, n, kDevice | kHost)) {
		char d[256];
		describe((uintptr_t)src + n - 1, d, sizeof d);
		return misuse(CUDA_ERROR_INVALID_VALUE, "%s: source [0x%zx, +%zu) is not inside one device allocation (its last byte: %s)", api,
			(size_t)src, n, d);
	}
	const void *host = !dst_dev ? dst : !src_dev ? src : nullptr;
	bool sync = host && !pinned(host, n);
	Op *o = new Op{OP_COPY};
	o->dst = dst;
	o->src = src;
	o->n = n;
	o->what = sync ? (dst_dev ? "cuMemcpyHtoDAsync (synchronous)" : "cuMemcpyDtoHAsync (synchronous)") : api;
	return enqueue(s, o, sync);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	return copy("cuMemcpyHtoDAsync", s, (void *)(uintptr_t)dst, src, n, true, false);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
	return copy("cuMemcpyDtoHAsync", s, dst, (const void *)(uintptr_t)src, n, false, true);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	return copy("cuMemcpyDtoDAsync", s, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, true, true);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int) {
	NEED_CTX();
	if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
	std::lock_guard<std::mutex> lk(global_mu);
	auto it = registered.upper_bound((uintptr_t)p + n - 1);
	if (it != registered.begin() && std::prev(it)->first + std::prev(it)->second > (uintptr_t)p)
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	registered[(uintptr_t)p] = n;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostUnregister(void *p) {
	NEED_CTX();
	std::lock_guard<std::mutex> lk(global_mu);
	return registered.erase((uintptr_t)p) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int) {
	NEED_CTX();
	if (n == 0) return CUDA_ERROR_INVALID_VALUE;
	void *m = alloc(n, kHost);
	if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
	*pp = m;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void *p) {
	NEED_CTX();
	drain();
	return release(p, kHost) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Unified addressing: a mapped host allocation has the same address on the device. */
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags) {
	NEED_CTX();
	if (flags != 0 || !within((uintptr_t)p, 1, kHost)) return CUDA_ERROR_INVALID_VALUE;
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* ---- modules and launches ---- */

struct Entry {
	std::vector<unsigned> sizes; // from the PTX
};

struct CUfunc_st {
	std::string name;
	const Kernel *kernel;
};

struct CUmod_st {
	std::map<std::string, Entry> entries;
	std::map<std::string, CUfunc_st *> functions;
};

// parse_ptx collects the .entry directives of a PTX module and the sizes of their parameters.
static bool parse_ptx(const char *ptx, std::map<std::string, Entry> &out) {
	if (!strstr(ptx, ".version") || !strstr(ptx, ".target")) return false;
	for (const char *p = ptx; (p = strstr(p, ".entry ")); ) {
		p += 7;
		const char *open = strchr(p, '(');
		if (!open) return false;
		std::string name(p, open);
		while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.pop_back();
		const char *close = strchr(open, ')');
		if (!close) return false;
		Entry e;
		std::string params(open + 1, close);
		size_t at = 0;
		while ((at = params.find(".param", at)) != std::string::npos) {
			size_t end = params.find(',', at);
			std::string decl = params.substr(at, end == std::string::npos ? std::string::npos : end - at);
			at += 6;
			unsigned size = 0;
			size_t br = decl.find('[');
			if (br != std::string::npos) {
				size = (unsigned)atoi(decl.c_str() + br + 1); // .align A .b8 name[N]
			} else {
				for (const char *t : {".u8", ".s8", ".b8", ".u16", ".s16", ".b16", ".f16", ".u32", ".s32", ".b32", ".f32", ".u64", ".s64", ".b64", ".f64"}) {
					size_t k = decl.find(std::string(t) + " ");
					if (k != std::string::npos) {
						size = (unsigned)atoi(t + 2) / 8;
						break;
					}
				}
			}
			if (!size) return false;
			e.sizes.push_back(size);
		}
		out[name] = e;
		p = close;
	}
	return true;
}

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
	NEED_CTX();
	CUmod_st *mod = new CUmod_st();
	if (!parse_ptx((const char *)image, mod->entries)) {
		delete mod;
		return misuse(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: the stand-in runs PTX modules from NVRTC only (no cubin or fatbin), and this is not one");
	}
	*m = mod;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule) {
	NEED_CTX();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
	NEED_CTX();
	auto e = m->entries.find(name);
	if (e == m->entries.end()) return CUDA_ERROR_NOT_FOUND;
	auto have = m->functions.find(name);
	if (have != m->functions.end()) {
		*f = have->second;
		return CUDA_SUCCESS;
	}
	const Kernel *k = cudasim_kernels;
	while (k->name && strcmp(k->name, name)) k++;
	if (!k->name)
		return misuse(CUDA_ERROR_NOT_FOUND, "kernel %s is in the PTX but not in the simulator build of ops.cu: declare it on one line as "
			"`extern \"C\" __global__ void %s(` so that scripts/cuda-sim.sh registers it", name, name);
	std::vector<unsigned> cpp(k->sizes, k->sizes + k->nparams);
	if (cpp != e->second.sizes) {
		std::string a, b;
		for (unsigned v : e->second.sizes) a += " " + std::to_string(v);
		for (unsigned v : cpp) b += " " + std::to_string(v);
		return misuse(CUDA_ERROR_INVALID_IMAGE, "kernel %s: the PTX parameter sizes (%s ) differ from the simulator build's C++ signature (%s ): "
			"the stand-in was built from another ops.cu; rebuild it (make cuda-sim)", name, a.c_str(), b.c_str());
	}
	CUfunc_st *fn = new CUfunc_st{name, k};
	m->functions[name] = fn;
	*f = fn;
	return CUDA_SUCCESS;
}

// The descriptor Stoke's launcher puts after the NULL that ends kernelParams.
struct ArgSizes {
	char magic[8]; // "stokearg"
	unsigned n;
	unsigned char size[];
};

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
	unsigned shared, CUstream s, void **params, void **extra) {
	NEED_CTX();
	if (!f) return CUDA_ERROR_INVALID_HANDLE;
	const Kernel *k = f->kernel;
	const char *name = k->name;
	if (extra) return misuse(CUDA_ERROR_NOT_SUPPORTED, "launch of %s: the stand-in takes kernelParams, not extra", name);
	if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64 ||
		(unsigned long long)bx * by * bz > 1024)
		return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: grid (%u,%u,%u) block (%u,%u,%u) is outside the device's limits", name, gx, gy, gz,
			bx, by, bz);
	if (shared > kMaxDynamicShared)
		return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: %u bytes of dynamic shared memory; the limit is %zu", name, shared, kMaxDynamicShared);
	int n = k->nparams;
	if (n > 0 && !params) return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: no kernelParams for %d parameters", name, n);
	for (int i = 0; i < n; i++)
		if (!params[i])
			return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: %d arguments; its C++ signature has %d parameters", name, i, n);
	if (params && params[n])
		return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: more arguments than its %d parameters (or kernelParams lacks the NULL that "
			"Stoke's launcher ends it with)", name, n);
	const ArgSizes *as = params ? (const ArgSizes *)params[n + 1] : nullptr;
	if (!as || memcmp(as->magic, "stokearg", 8) != 0 || as->n != (unsigned)n)
		return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: no argument-size descriptor after the NULL (launch through gpu/cuda/launch.go)", name);
	Op *o = new Op{OP_LAUNCH};
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		if (as->size[i] != k->sizes[i]) {
			delete o;
			return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: argument %d is %u bytes; the kernel's parameter %d is %u bytes", name, i,
				as->size[i], i, k->sizes[i]);
		}
		total += (k->sizes[i] + 7) / 8 * 8;
	}
	o->args.resize(total + 8);
	o->params.resize(n + 1);
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		memcpy(&o->args[at], params[i], k->sizes[i]);
		if (k->pointer[i]) {
			uintptr_t v;
			memcpy(&v, &o->args[at], sizeof v);
			if (v && !within(v, 0, kDevice | kHost)) {
				char d[256];
				describe(v, d, sizeof d);
				delete o;
				return misuse(CUDA_ERROR_INVALID_VALUE, "launch of %s: pointer argument %d (0x%zx) is not device memory: %s", name, i, (size_t)v, d);
			}
		}
		o->params[i] = &o->args[at];
		at += (k->sizes[i] + 7) / 8 * 8;
	}
	o->launch = Launch{k, o->params.data(), {gx, gy, gz}, {bx, by, bz}, shared};
	return enqueue(s, o);
}
