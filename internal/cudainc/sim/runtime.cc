/*
 * runtime.cc: runs CUDA kernels of the simulator build of gpu/cuda/ops.cu on the CPU, and the
 * guard-page memory behind the stand-in driver. See cudasim.h for the execution model.
 *
 * Each worker thread owns up to 1024 fibers (one per CUDA thread of a block) with 32 KiB stacks
 * below a guard page. A fiber switch is a hand-written x86-64 routine that saves the six
 * callee-saved registers and the stack pointer (no system call, unlike swapcontext); other
 * architectures use ucontext. A block runs on one worker thread from start to end; the blocks of a
 * grid are shared out among the workers.
 */
#define _GNU_SOURCE 1
#include "runtime.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <algorithm>


namespace cudasim {

thread_local Thread *cur __attribute__((tls_model("initial-exec")));

[[noreturn]] void die(const char *fmt, ...) {
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "cudasim: %s\n", buf);
	fflush(stderr);
	abort();
}

/* ---- fibers ---- */

#if defined(__x86_64__)
extern "C" void cudasim_switch(void **save, void *to);
extern "C" void cudasim_fiber_start();
asm(R"(
	.text
	.globl cudasim_switch
	.hidden cudasim_switch
	.type cudasim_switch,@function
cudasim_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size cudasim_switch,.-cudasim_switch
	.globl cudasim_fiber_start
	.hidden cudasim_fiber_start
	.type cudasim_fiber_start,@function
cudasim_fiber_start:
	movq %r12, %rdi
	callq *%r13
	ud2
	.size cudasim_fiber_start,.-cudasim_fiber_start
)");
#endif

enum State { kUnstarted, kRunnable, kAtBarrier, kInWarp, kExited };

struct Worker;

struct Fiber : Thread {
#if defined(__x86_64__)
	void *sp;
#else
	ucontext_t uc;
#endif
	int stack; // the stack it runs on once started
	State state;
	int lane, warp;
	int kind, src;
	unsigned mask;
	uint64_t val, result;
};

constexpr int kMaxThreads = 1024;
constexpr size_t kStack = 32 * 1024;
constexpr size_t kPage = 4096;

struct Stack {
	char *lo, *hi;
};

struct Worker {
	Fiber fibers[kMaxThreads];
	Stack stacks[kMaxThreads + 1];
	int free_stacks[kMaxThreads + 1], nfree;
	int started; // threads started in this block, in start order
#if defined(__x86_64__)
	void *sched_sp;
#else
	ucontext_t sched;
#endif
	Block block;
	const Launch *launch;
	uint64_t linear; // the block's linear index
	bool up;         // threads start in ascending order
	int nthreads, arrived, exited;
	unsigned present[kMaxThreads / 32], waiting[kMaxThreads / 32], gone[kMaxThreads / 32];
	char *tls;       // this thread's instance of libcudasim_ops.so's TLS: the static shared memory
	size_t tls_len;
};

static thread_local Worker *self __attribute__((tls_model("initial-exec")));

static void runner_main(void *arg);

// A thread runs on the stack of the runner that started it. A runner starts the block's threads one
// after another as plain calls; when one blocks (a barrier or a warp collective), the runner's stack
// stays with it and the scheduler starts the next threads on a new runner. A block whose threads
// never block thus costs one fiber switch, not two per thread.
#if defined(__x86_64__)
static void *runner_context(Stack *st, int index) {
	uintptr_t top = (uintptr_t)st->hi & ~(uintptr_t)15;
	void **sp = (void **)(top - 7 * sizeof(void *));
	sp[0] = 0;                             // r15
	sp[1] = 0;                             // r14
	sp[2] = (void *)&runner_main;          // r13: the function
	sp[3] = (void *)(intptr_t)index;       // r12: its argument
	sp[4] = 0;                             // rbx
	sp[5] = 0;                             // rbp
	sp[6] = (void *)&cudasim_fiber_start;  // return address
	return sp;
}
static inline void start_runner(Worker *w, int index) { cudasim_switch(&w->sched_sp, runner_context(&w->stacks[index], index)); }
static inline void to_fiber(Worker *w, Fiber *f) { cudasim_switch(&w->sched_sp, f->sp); }
static inline void to_scheduler(Worker *w, Fiber *f) { cudasim_switch(&f->sp, w->sched_sp); }
static inline void leave_runner(Worker *w) {
	void *dead;
	cudasim_switch(&dead, w->sched_sp);
}
#else
static void runner_trampoline(int index) { runner_main((void *)(intptr_t)index); }
static inline void start_runner(Worker *w, int index) {
	static thread_local ucontext_t uc;
	getcontext(&uc);
	uc.uc_stack.ss_sp = w->stacks[index].lo;
	uc.uc_stack.ss_size = (size_t)(w->stacks[index].hi - w->stacks[index].lo);
	uc.uc_link = NULL;
	makecontext(&uc, (void (*)())runner_trampoline, 1, index);
	swapcontext(&w->sched, &uc);
}
static inline void to_fiber(Worker *w, Fiber *f) { swapcontext(&w->sched, &f->uc); }
static inline void to_scheduler(Worker *w, Fiber *f) { swapcontext(&f->uc, &w->sched); }
static inline void leave_runner(Worker *w) { setcontext(&w->sched); }
#endif

[[noreturn]] void fail(const char *what) {
	Worker *w = self;
	if (!w || !cur) die("%s (outside a kernel)", what);
	die("kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s", w->launch->kernel->name, w->block.idx.x, w->block.idx.y,
		w->block.idx.z, cur->idx.x, cur->idx.y, cur->idx.z, what);
}

static void release_barrier(Worker *w) {
	if (w->arrived == 0 || w->arrived + w->exited != w->nthreads) return;
	for (int i = 0; i < w->nthreads; i++)
		if (w->fibers[i].state == kAtBarrier) w->fibers[i].state = kRunnable;
	w->arrived = 0;
}

// release_warp completes the collective of warp wi over the lanes of mask m once all have arrived.
static void release_warp(Worker *w, int wi, unsigned m) {
	if ((w->waiting[wi] & m) != m) return;
	Fiber *base = &w->fibers[wi * 32];
	int first = __builtin_ctz(m);
	uint64_t ballot = 0;
	for (unsigned b = m; b; b &= b - 1) {
		int j = __builtin_ctz(b);
		if (base[j].mask != m || base[j].kind != base[first].kind) {
			cur = &base[j];
			fail("lanes of one warp collective passed different masks or reached different collectives");
		}
		ballot |= (uint64_t)(base[j].val != 0) << j;
	}
	for (unsigned b = m; b; b &= b - 1) {
		Fiber *g = &base[__builtin_ctz(b)];
		if (g->src >= 0) {
			if (!(m >> g->src & 1)) {
				cur = g;
				fail("warp shuffle reads a lane outside its mask");
			}
			g->result = base[g->src].val;
		} else {
			g->result = ballot;
		}
		g->state = kRunnable;
	}
	w->waiting[wi] &= ~m;
}

// lane_exited fails a collective that waits for a lane that has just exited (a hang on a GPU).
static void lane_exited(Worker *w, int wi, int lane) {
	Fiber *base = &w->fibers[wi * 32];
	for (unsigned b = w->waiting[wi]; b; b &= b - 1) {
		Fiber *g = &base[__builtin_ctz(b)];
		if (g->mask >> lane & 1) {
			cur = g;
			fail("warp collective waits for a lane of its mask that has exited (it would hang on a GPU)");
		}
	}
}

void syncthreads() {
	Worker *w = self;
	Fiber *f = static_cast<Fiber *>(cur);
	f->state = kAtBarrier;
	w->arrived++;
	release_barrier(w);
	to_scheduler(w, f);
}

uint64_t warp_collective(int kind, unsigned mask, uint64_t v, int src) {
	Worker *w = self;
	Fiber *f = static_cast<Fiber *>(cur);
	if (!(mask >> f->lane & 1)) fail("warp collective with a mask that does not include the calling lane");
	if (mask & ~w->present[f->warp]) fail("warp collective mask names lanes beyond the block's threads");
	f->state = kInWarp;
	f->kind = kind;
	f->mask = mask;
	f->val = v;
	f->src = src;
	if (w->gone[f->warp] & mask) fail("warp collective waits for a lane of its mask that has exited (it would hang on a GPU)");
	w->waiting[f->warp] |= 1u << f->lane;
	release_warp(w, f->warp, mask);
	to_scheduler(w, f);
	return f->result;
}

unsigned lane_id() { return (unsigned)static_cast<Fiber *>(cur)->lane; }

unsigned active_mask() {
	Fiber *f = static_cast<Fiber *>(cur);
	return self->present[f->warp] & ~self->gone[f->warp];
}

static void runner_main(void *arg) {
	int stack = (int)(intptr_t)arg;
	Worker *w = self;
	while (w->started < w->nthreads) {
		int i = w->up ? w->started : w->nthreads - 1 - w->started;
		w->started++;
		Fiber *f = &w->fibers[i];
		f->state = kRunnable;
		f->stack = stack;
		cur = f;
		w->launch->kernel->invoke(w->launch->params);
		f = static_cast<Fiber *>(cur); // the same thread: it may have blocked and resumed meanwhile
		f->state = kExited;
		w->exited++;
		w->gone[f->warp] |= 1u << f->lane;
		release_barrier(w);
		lane_exited(w, f->warp, f->lane);
	}
	cur = NULL;
	w->free_stacks[w->nfree++] = stack;
	leave_runner(w);
	die("finished runner resumed");
}

/* ---- shared memory poisoning ---- */

static int find_tls(struct dl_phdr_info *info, size_t, void *data) {
	Worker *w = static_cast<Worker *>(data);
	uintptr_t table = (uintptr_t)&cudasim_kernels;
	bool mine = false;
	size_t tls = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && table >= info->dlpi_addr + ph->p_vaddr && table < info->dlpi_addr + ph->p_vaddr + ph->p_memsz)
			mine = true;
		if (ph->p_type == PT_TLS) tls = ph->p_memsz;
	}
	if (!mine) return 0;
	w->tls = static_cast<char *>(info->dlpi_tls_data);
	w->tls_len = w->tls ? tls : 0;
	return 1;
}

// poison fills this block's shared memory with 0xff bytes: the static __shared__ variables (all of
// libcudasim_ops.so's thread-local storage) and the first `dynamic` bytes of each dynamic array.
static void poison(Worker *w, size_t dynamic) {
	char *lo = w->tls, *hi = w->tls + w->tls_len;
	std::vector<std::pair<char *, char *>> skip;
	for (const Dynamic *d = cudasim_dynamic; d->addr; d++) {
		char *p = static_cast<char *>(d->addr());
		skip.push_back({p, p + d->bytes});
		memset(p, 0xff, dynamic);
	}
	std::sort(skip.begin(), skip.end());
	for (auto &s : skip) {
		if (s.first > lo) memset(lo, 0xff, (size_t)(std::min(s.first, hi) - lo));
		if (s.second > lo) lo = s.second;
	}
	if (hi > lo) memset(lo, 0xff, (size_t)(hi - lo));
}

/* ---- workers ---- */

static void block_signals() {
	// Process-directed signals (Go's profiling timer, SIGCHLD, SIGINT) go to Go's threads, never
	// to a fiber stack; faults (SIGSEGV, SIGBUS) are synchronous and still reach the handler.
	sigset_t all;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGABRT);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
}

// An alternate signal stack, so that a fault (a fiber's stack overflow included) can be reported.
static void alt_stack() {
	stack_t ss;
	ss.ss_size = 64 * 1024;
	ss.ss_sp = malloc(ss.ss_size);
	ss.ss_flags = 0;
	sigaltstack(&ss, NULL);
}

static Worker *new_worker() {
	Worker *w = new Worker();
	size_t per = kStack + kPage;
	char *base = (char *)mmap(NULL, per * (kMaxThreads + 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) die("mmap of fiber stacks: %s", strerror(errno));
	for (int i = 0; i <= kMaxThreads; i++) {
		char *lo = base + i * per;
		mprotect(lo, kPage, PROT_NONE); // the guard page below each stack
		w->stacks[i] = Stack{lo + kPage, lo + per};
		w->free_stacks[kMaxThreads - i] = i; // stack 0 first: the same few stacks stay hot
	}
	w->nfree = kMaxThreads + 1;
	dl_iterate_phdr(find_tls, w);
	return w;
}

static void run_block(Worker *w, const Launch &l, uint64_t linear) {
	unsigned gx = l.grid[0], gy = l.grid[1];
	w->launch = &l;
	w->linear = linear;
	w->block.idx = {(unsigned)(linear % gx), (unsigned)(linear / gx % gy), (unsigned)(linear / ((uint64_t)gx * gy))};
	w->block.dim = {l.block[0], l.block[1], l.block[2]};
	w->block.grid = {l.grid[0], l.grid[1], l.grid[2]};
	int n = (int)(l.block[0] * l.block[1] * l.block[2]);
	w->nthreads = n;
	w->arrived = w->exited = 0;
	for (int i = 0; i < kMaxThreads / 32; i++) {
		int left = n - 32 * i;
		w->present[i] = left >= 32 ? ~0u : left > 0 ? (1u << left) - 1 : 0;
		w->waiting[i] = w->gone[i] = 0;
	}
	poison(w, l.shared);
	for (int i = 0; i < n; i++) {
		Fiber *f = &w->fibers[i];
		f->idx = {(unsigned)i % l.block[0], (unsigned)i / l.block[0] % l.block[1], (unsigned)i / (l.block[0] * l.block[1])};
		f->block = &w->block;
		f->state = kUnstarted;
		f->lane = i % 32;
		f->warp = i / 32;
	}
	// Threads start in ascending order in even blocks and descending in odd ones; later each pass
	// resumes every runnable thread up to its next barrier, collective or end, starting from a thread
	// and in a direction drawn from (block, pass), so that a missing barrier or __syncwarp is exposed whichever direction the
	// data flows; the same launch always runs the same way.
	w->started = 0;
	w->up = (linear & 1) == 0;
	for (uint64_t pass = 0;; pass++) {
		bool ran = false;
		while (w->started < n) {
			if (w->nfree == 0) die("kernel %s: out of fiber stacks", l.kernel->name);
			ran = true;
			start_runner(w, w->free_stacks[--w->nfree]);
		}
		if (w->exited == n) break; // the common case: no thread ever blocked
		uint64_t h = (linear + 1) * 0x9e3779b97f4a7c15ull ^ (pass + 1) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		h *= 0x94d049bb133111ebull;
		h ^= h >> 29;
		int first = (int)(h % (uint64_t)n), step = (h >> 40) & 1 ? 1 : n - 1; // a rotation, either way round
		for (int k = 0, i = first; k < n; k++, i = i + step < n ? i + step : i + step - n) {
			Fiber *f = &w->fibers[i];
			if (f->state != kRunnable) continue;
			ran = true;
			cur = f;
			to_fiber(w, f);
		}
		cur = NULL;
		if (w->exited == n && w->started == n) break;
		if (!ran) {
			int bar = 0, warp = 0;
			for (int i = 0; i < n; i++) {
				bar += w->fibers[i].state == kAtBarrier;
				warp += w->fibers[i].state == kInWarp;
			}
			die("kernel %s, block (%u,%u,%u): deadlock: %d threads wait at __syncthreads, %d in warp collectives, %d exited",
				l.kernel->name, w->block.idx.x, w->block.idx.y, w->block.idx.z, bar, warp, w->exited);
		}
	}
	// Runners of threads that exited last may still hold stacks: they are back once all threads
	// have exited and each runner has left (the loop above resumes them until then).
}

struct Job {
	const Launch *l;
	uint64_t blocks;
	std::atomic<uint64_t> next{0};
	uint64_t done = 0; // under pool.mu
	int refs = 0;      // workers inside, under pool.mu
};

// The runtime's shared state is never destroyed: a process that exits through exit() (Go's race
// runtime does) must not run destructors under threads that still use it (pthread_cond_destroy
// with waiting workers blocks forever).
struct Pool {
	std::mutex mu;
	std::condition_variable work, finished;
	std::deque<Job *> jobs;
	std::once_flag started;
};
static Pool &pool = *new Pool;

static void worker_loop() {
	block_signals();
	alt_stack();
	self = new_worker();
	std::unique_lock<std::mutex> lk(pool.mu);
	for (;;) {
		pool.work.wait(lk, [] { return !pool.jobs.empty(); });
		Job *j = pool.jobs.front();
		j->refs++;
		lk.unlock();
		uint64_t ran = 0;
		for (uint64_t b; (b = j->next.fetch_add(1)) < j->blocks;) {
			run_block(self, *j->l, b);
			ran++;
		}
		lk.lock();
		if (!pool.jobs.empty() && pool.jobs.front() == j) pool.jobs.pop_front();
		j->done += ran;
		if (--j->refs == 0 && j->done == j->blocks) pool.finished.notify_all();
	}
}

static int workers() {
	cpu_set_t set;
	int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
	return n < 1 ? 1 : n > 8 ? 8 : n;
}

void run_grid(const Launch &l) {
	std::call_once(pool.started, [] {
		for (int i = workers(); i > 0; i--) std::thread(worker_loop).detach();
	});
	Job j;
	j.l = &l;
	j.blocks = (uint64_t)l.grid[0] * l.grid[1] * l.grid[2];
	std::unique_lock<std::mutex> lk(pool.mu);
	pool.jobs.push_back(&j);
	pool.work.notify_all();
	pool.finished.wait(lk, [&] { return j.done == j.blocks && j.refs == 0; });
}

/* ---- guard-page memory ---- */

struct Region {
	uintptr_t p;
	size_t n;
	char *base;
	size_t span; // mapped bytes, guard page included
	Kind kind;
	bool freed;
};

static std::mutex &mem_mu = *new std::mutex;
static std::map<uintptr_t, Region> &regions = *new std::map<uintptr_t, Region>; // by start; live and recently freed
static std::deque<uintptr_t> &quarantine = *new std::deque<uintptr_t>;
static size_t quarantined;
constexpr size_t kQuarantineBytes = (size_t)4 << 30; // address space only: freed pages are dropped

void *alloc(size_t n, Kind kind) {
	size_t data = (n + kPage - 1) / kPage * kPage;
	size_t span = data + kPage;
	char *base = (char *)mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) return NULL;
	mprotect(base + data, kPage, PROT_NONE);
	// The last byte abuts the guard page; the start keeps the largest power-of-two alignment up to
	// 256 that the size allows (a float buffer starts 4-aligned, a 512-byte multiple 256-aligned).
	size_t align = n & (~n + 1);
	if (align > 256) align = 256;
	uintptr_t p = ((uintptr_t)base + data - n) & ~(uintptr_t)(align - 1);
	// New device memory holds garbage on a GPU: here 0xff bytes (NaN as float, -1 as int), so that
	// a read before the first write shows (compute-sanitizer's initcheck finds the same).
	if (kind == kDevice) memset((void *)p, 0xff, n);
	std::lock_guard<std::mutex> lk(mem_mu);
	regions[p] = Region{p, n, base, span, kind, false};
	return (void *)p;
}

bool release(void *ptr, Kind kind) {
	std::lock_guard<std::mutex> lk(mem_mu);
	auto it = regions.find((uintptr_t)ptr);
	if (it == regions.end() || it->second.freed || it->second.kind != kind) return false;
	Region &r = it->second;
	// Drop the pages and keep the range reserved and inaccessible: a later access faults.
	mmap(r.base, r.span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	r.freed = true;
	quarantine.push_back(r.p);
	quarantined += r.span;
	while (quarantined > kQuarantineBytes || quarantine.size() > 16384) {
		auto old = regions.find(quarantine.front());
		quarantine.pop_front();
		quarantined -= old->second.span;
		munmap(old->second.base, old->second.span);
		regions.erase(old);
	}
	return true;
}

static const Region *region_near(uintptr_t addr) {
	auto it = regions.upper_bound(addr);
	if (it != regions.end() && it->second.base <= (char *)addr) return &it->second; // in its leading slack
	if (it == regions.begin()) return NULL;
	--it;
	return (char *)addr < it->second.base + it->second.span ? &it->second : NULL;
}

bool within(uintptr_t p, size_t n, int kinds) {
	std::lock_guard<std::mutex> lk(mem_mu);
	auto it = regions.upper_bound(p);
	if (it == regions.begin()) return false;
	--it;
	const Region &r = it->second;
	return !r.freed && (r.kind & kinds) && p >= r.p && n <= r.n && p - r.p <= r.n - n;
}

void describe(uintptr_t addr, char *buf, size_t len) {
	// Called from the fault handler: a try-lock, and no lock at all rather than no report.
	bool locked = mem_mu.try_lock();
	const Region *r = region_near(addr);
	const char *kind = r && r->kind == kHost ? "mapped host" : "device";
	if (!r)
		snprintf(buf, len, "not in or next to any allocation of the stand-in driver");
	else if (r->freed)
		snprintf(buf, len, "byte %td of a %zu-byte %s allocation at 0x%zx that was freed (use after free)", (ptrdiff_t)(addr - r->p),
			r->n, kind, (size_t)r->p);
	else if (addr >= r->p + r->n)
		snprintf(buf, len, "%zu bytes past the end of a %zu-byte %s allocation at 0x%zx", (size_t)(addr - r->p - r->n), r->n, kind,
			(size_t)r->p);
	else if (addr < r->p)
		snprintf(buf, len, "%zu bytes before a %zu-byte %s allocation at 0x%zx", (size_t)(r->p - addr), r->n, kind, (size_t)r->p);
	else
		snprintf(buf, len, "byte %zu of a %zu-byte %s allocation at 0x%zx", (size_t)(addr - r->p), r->n, kind, (size_t)r->p);
	if (locked) mem_mu.unlock();
}

/* ---- faults ---- */

static thread_local const char *activity __attribute__((tls_model("initial-exec")));

Activity::Activity(const char *what) { activity = what; }
Activity::~Activity() { activity = NULL; }

static struct sigaction previous_segv, previous_bus;

static void on_fault(int sig, siginfo_t *info, void *uc) {
	Worker *w = self;
	bool in_kernel = w && cur;
	if (!in_kernel && !activity) { // not ours: Go's handler (nil dereference panics and the rest)
		struct sigaction *prev = sig == SIGSEGV ? &previous_segv : &previous_bus;
		if (prev->sa_flags & SA_SIGINFO) {
			prev->sa_sigaction(sig, info, uc);
		} else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
			prev->sa_handler(sig);
		} else {
			signal(sig, SIG_DFL);
			raise(sig);
		}
		return;
	}
	const char *access = "access";
#if defined(__x86_64__)
	access = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#endif
	uintptr_t addr = (uintptr_t)info->si_addr;
	char where[256];
	describe(addr, where, sizeof where);
	char msg[768];
	if (in_kernel) {
		Fiber *f = static_cast<Fiber *>(cur);
		const Stack &st = w->stacks[f->stack];
		if ((char *)addr >= st.lo - kPage && (char *)addr < st.lo)
			snprintf(where, sizeof where, "the thread's %zu KiB stack overflowed", kStack / 1024);
		snprintf(msg, sizeof msg, "invalid %s at 0x%zx by kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s\n", access, (size_t)addr,
			w->launch->kernel->name, w->block.idx.x, w->block.idx.y, w->block.idx.z, cur->idx.x, cur->idx.y, cur->idx.z, where);
	} else {
		snprintf(msg, sizeof msg, "invalid %s at 0x%zx by %s: %s\n", access, (size_t)addr, activity, where);
	}
	(void)!write(2, "cudasim: ", 9);
	(void)!write(2, msg, strlen(msg));
	signal(SIGABRT, SIG_DFL);
	abort();
}

void install_fault_handler() {
	static std::once_flag once;
	std::call_once(once, [] {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGSEGV, &sa, &previous_segv);
		sigaction(SIGBUS, &sa, &previous_bus);
	});
}

} // namespace cudasim
