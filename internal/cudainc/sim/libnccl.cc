/*
 * libnccl.cc: a CPU stand-in for the NCCL calls Stoke makes (scripts/cuda-sim.sh builds it as
 * libnccl.so.2), with NCCL's semantics, so that a data-parallel run of the CUDA backend runs its
 * ranks as processes on a machine without a GPU:
 *
 *   - ncclGetUniqueId starts the rendezvous root, a thread of the calling process listening on
 *     127.0.0.1 (an ephemeral port), as NCCL's bootstrap root is a thread of the process that asked
 *     for the id; the 128-byte id holds a magic, the port and a random 64-bit token;
 *   - ncclCommInitRank connects to the root and blocks until all nranks ranks have joined; the root
 *     refuses a wrong token, a rank outside [0, nranks) or taken twice, and an nranks that differs
 *     from the first rank's; a rank missing after the timeout fails the others;
 *   - ncclAllReduce checks its arguments as NCCL does (a NULL or destroyed communicator, a NULL
 *     buffer with count > 0, an unknown datatype or operation: ncclInvalidArgument; buffers outside
 *     device memory: ncclInvalidArgument, as NCCL's pointer check) and enqueues, on the stand-in
 *     stream, a host task that sends sendbuff to the root and receives the result into recvbuff;
 *     in place when they are equal. The root reduces in rank order, each step rounded to the type
 *     (float32, float64, float16 and bfloat16 rounded to nearest even), ncclAvg on a floating type
 *     as NCCL computes it (each rank's values premultiplied by 1/nranks, then summed); the same
 *     bytes go back to every rank, so the result is identical on all of them;
 *   - a collective that differs between ranks (count, datatype, operation) fails on every rank with
 *     ncclInvalidUsage, and a rank that does not join a collective within NCCLSIM_TIMEOUT seconds
 *     (default 60) of the first fails the others with ncclRemoteError, where NCCL would hang: the
 *     task then leaves recvbuff untouched and the error becomes the communicator's asynchronous
 *     error (ncclCommGetAsyncError), after which further collectives on it fail at the call;
 *   - ncclCommDestroy waits for the communicator's queued collectives, ncclCommAbort fails the one
 *     in flight at once; neither waits for the other ranks. The root answers the rank of its own
 *     process last, so that process may exit after its last collective; a rank that aborts or
 *     exits while others still have collectives to do fails them (the root tells them that a rank
 *     left, or has gone itself);
 *   - ncclGroupStart/End nest; collectives inside a group are enqueued at once (in call order on
 *     each stream, which is what a group guarantees for one communicator per process);
 *   - ncclGetErrorString has NCCL's strings; ncclGetLastError(comm) the stand-in's last message
 *     (the Go errors include it), which it also prints to stderr ("ncclsim: ...") when NCCL_DEBUG
 *     is WARN, INFO or TRACE, as NCCL prints its warnings.
 *
 * Not modelled: several communicators sharing one GPU's work in a group, the other collectives,
 * nonblocking communicators (ncclCommInitRankConfig), the order of NCCL's ring and tree reductions
 * (a result that needs rounding can differ from NCCL's beyond two nonzero terms), and the timing.
 * Only the types and codes come from NVIDIA's nccl.h.
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "halfconv.h"
#include "runtime.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace cudasim;

namespace {

constexpr char kIdMagic[8] = {'S', 'T', 'K', 'N', 'C', 'C', 'L', '1'};
constexpr uint32_t kHello = 0x4e43484c, kColl = 0x4e43434c, kReply = 0x4e435250; // NCHL, NCCL, NCRP
constexpr unsigned kCommMagic = 0x4e43434d;                                         // NCCM

struct Id {
	char magic[8];
	uint16_t port;
	uint16_t pad;
	uint32_t pad2;
	uint64_t token;
};
static_assert(sizeof(Id) <= sizeof(ncclUniqueId), "the id fits NCCL's 128 bytes");

struct Hello {
	uint32_t magic;
	int32_t nranks, rank;
	int32_t pid; // the root answers the rank in its own process last
	uint64_t token;
};

struct CollHeader {
	uint32_t magic;
	int32_t dtype, op;
	uint32_t pad;
	uint64_t seq, count;
};

struct Reply {
	uint32_t magic;
	int32_t result;
	uint32_t msglen;
	uint32_t pad;
};

double timeout_s() {
	const char *v = getenv("NCCLSIM_TIMEOUT");
	double t = v ? atof(v) : 0;
	return t > 0 ? t : 60;
}

double now() {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

thread_local std::string last_error; // for ncclGetLastError(NULL)

// debug_warn: NCCL_DEBUG asks for warnings (WARN, INFO or TRACE), as NCCL reads it.
bool debug_warn() {
	const char *v = getenv("NCCL_DEBUG");
	return v && (!strcasecmp(v, "WARN") || !strcasecmp(v, "INFO") || !strcasecmp(v, "TRACE"));
}

ncclResult_t fail(std::string *sink, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ncclResult_t fail(std::string *sink, ncclResult_t r, const char *fmt, ...) {
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (debug_warn()) fprintf(stderr, "ncclsim: %s\n", buf);
	last_error = buf;
	if (sink) *sink = buf;
	return r;
}

size_t type_size(int t) {
	switch (t) {
	case ncclFloat16:
	case ncclBfloat16: return 2;
	case ncclFloat32: return 4;
	case ncclFloat64: return 8;
	default: return 0; // not modelled
	}
}

const char *type_name(int t) {
	switch (t) {
	case ncclFloat16: return "ncclFloat16";
	case ncclBfloat16: return "ncclBfloat16";
	case ncclFloat32: return "ncclFloat32";
	case ncclFloat64: return "ncclFloat64";
	default: return "?";
	}
}

const char *op_name(int op) {
	static const char *names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
	return op >= 0 && op < ncclNumOps ? names[op] : "?";
}

/* ---- sockets: every wait has a deadline (0: none) ---- */

// wait_fd polls fd for events until deadline; 1 ready, 0 timed out, -1 error.
int wait_fd(int fd, short events, double deadline) {
	for (;;) {
		int ms = -1;
		if (deadline > 0) {
			double left = deadline - now();
			if (left <= 0) return 0;
			ms = (int)(left * 1000) + 1;
		}
		struct pollfd p = {fd, events, 0};
		int n = poll(&p, 1, ms);
		if (n < 0 && errno == EINTR) continue;
		if (n < 0) return -1;
		if (n > 0) return 1;
	}
}

// read_full reads n bytes; 1 done, 0 timed out, -1 EOF or error.
int read_full(int fd, void *buf, size_t n, double deadline) {
	char *p = static_cast<char *>(buf);
	while (n > 0) {
		int w = wait_fd(fd, POLLIN, deadline);
		if (w <= 0) return w;
		ssize_t k = read(fd, p, n);
		if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
		if (k <= 0) return -1;
		p += k;
		n -= (size_t)k;
	}
	return 1;
}

int write_full(int fd, const void *buf, size_t n, double deadline) {
	const char *p = static_cast<const char *>(buf);
	while (n > 0) {
		int w = wait_fd(fd, POLLOUT, deadline);
		if (w <= 0) return w;
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
		if (k <= 0) return -1;
		p += k;
		n -= (size_t)k;
	}
	return 1;
}

// gone reports whether the peer of fd has closed it (EOF or an error, without blocking).
bool gone(int fd) {
	char b;
	ssize_t k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int send_reply(int fd, ncclResult_t r, const std::string &msg, const void *data, size_t n, double deadline) {
	Reply rep = {kReply, (int32_t)r, (uint32_t)msg.size(), 0};
	if (write_full(fd, &rep, sizeof rep, deadline) <= 0) return -1;
	if (write_full(fd, msg.data(), msg.size(), deadline) <= 0) return -1;
	return n ? write_full(fd, data, n, deadline) : 1;
}

/* ---- the reduction ---- */

float load(int t, const void *p, size_t i) {
	switch (t) {
	case ncclFloat16: return half_to_float(static_cast<const uint16_t *>(p)[i]);
	case ncclBfloat16: return bf16_to_float(static_cast<const uint16_t *>(p)[i]);
	default: return static_cast<const float *>(p)[i];
	}
}

void store(int t, void *p, size_t i, float v) {
	switch (t) {
	case ncclFloat16: static_cast<uint16_t *>(p)[i] = float_to_half(v); break;
	case ncclBfloat16: static_cast<uint16_t *>(p)[i] = float_to_bf16(v); break;
	default: static_cast<float *>(p)[i] = v;
	}
}

// round_to rounds v to type t (exactly, for float32: a float is already there).
float round_to(int t, float v) {
	switch (t) {
	case ncclFloat16: return half_to_float(float_to_half(v));
	case ncclBfloat16: return bf16_to_float(float_to_bf16(v));
	default: return v;
	}
}

template <typename T> T combine(int op, T a, T b) {
	switch (op) {
	case ncclProd: return a * b;
	case ncclMax: return a > b || a != a ? a : b;
	case ncclMin: return a < b || a != a ? a : b;
	default: return a + b; // ncclSum, and ncclAvg after the premultiplication
	}
}

// reduce folds src (rank r's values) into acc: acc = src for rank 0, else acc = acc (op) src,
// rounded to the type after each step. Avg premultiplies each rank's values by 1/nranks.
void reduce(int t, int op, int r, int nranks, void *acc, const void *src, size_t count) {
	if (t == ncclFloat64) {
		double *a = static_cast<double *>(acc);
		const double *s = static_cast<const double *>(src);
		double scale = 1.0 / nranks;
		for (size_t i = 0; i < count; i++) {
			double v = op == ncclAvg ? s[i] * scale : s[i];
			a[i] = r == 0 ? v : combine(op, a[i], v);
		}
		return;
	}
	float scale = round_to(t, 1.0f / (float)nranks);
	for (size_t i = 0; i < count; i++) {
		float v = load(t, src, i);
		if (op == ncclAvg) v = round_to(t, v * scale);
		store(t, acc, i, r == 0 ? v : combine(op, load(t, acc, i), v));
	}
}

/* ---- the rendezvous root ---- */

struct Root {
	int listener;
	uint64_t token;
};

// serve is the root's loop: the join, then one collective after another, until every rank has
// left. On an error it tells every rank and then only drains the connections until they close.
void serve(Root *root) {
	double timeout = timeout_s();
	std::vector<int> conns; // by rank
	int nranks = 0, joined = 0, local = -1;
	double join_deadline = 0;
	std::string msg;
	ncclResult_t err = ncclSuccess;
	// The join: accept until nranks have said hello.
	while (nranks == 0 || joined < nranks) {
		int w = wait_fd(root->listener, POLLIN, join_deadline);
		if (w == 0) {
			err = fail(&msg, ncclRemoteError, "ncclCommInitRank: %d of %d ranks joined within %.0f s (NCCLSIM_TIMEOUT)", joined, nranks,
				timeout);
			break;
		}
		int fd = accept(root->listener, nullptr, nullptr);
		if (fd < 0) continue;
		set_nonblock(fd);
		Hello h;
		if (read_full(fd, &h, sizeof h, now() + timeout) <= 0 || h.magic != kHello) {
			close(fd);
			continue;
		}
		ncclResult_t r = ncclSuccess;
		std::string why;
		if (h.token != root->token)
			r = fail(&why, ncclInvalidArgument, "ncclCommInitRank: the unique id's token does not match its root's (a stale id?)");
		else if (nranks != 0 && h.nranks != nranks)
			r = fail(&why, ncclInvalidUsage, "ncclCommInitRank: rank %d says nranks %d, rank(s) before it said %d", h.rank, h.nranks, nranks);
		else if (h.rank < 0 || h.rank >= h.nranks)
			r = fail(&why, ncclInvalidArgument, "ncclCommInitRank: rank %d outside [0, %d)", h.rank, h.nranks);
		else if (nranks != 0 && conns[h.rank] >= 0)
			r = fail(&why, ncclInvalidUsage, "ncclCommInitRank: rank %d joined twice", h.rank);
		if (r != ncclSuccess) {
			send_reply(fd, r, why, nullptr, 0, now() + timeout);
			close(fd);
			continue;
		}
		if (nranks == 0) {
			nranks = h.nranks;
			conns.assign(nranks, -1);
			join_deadline = now() + timeout;
		}
		conns[h.rank] = fd;
		if (h.pid == getpid()) local = h.rank;
		joined++;
	}
	close(root->listener);
	for (int fd : conns)
		if (fd >= 0) send_reply(fd, err, msg, nullptr, 0, now() + timeout);
	std::vector<bool> open(conns.size(), true);
	for (size_t r = 0; r < conns.size(); r++) open[r] = conns[r] >= 0;
	std::vector<char> acc, buf;
	uint64_t seq = 0;
	// Collectives (or, after an error, draining) until every rank has closed its connection.
	for (;;) {
		std::vector<struct pollfd> ps;
		for (size_t r = 0; r < conns.size(); r++)
			if (open[r]) ps.push_back({conns[r], POLLIN, 0});
		if (ps.empty()) break;
		if (poll(ps.data(), ps.size(), -1) < 0) continue;
		if (err != ncclSuccess) { // broken: discard until EOF
			for (auto &p : ps) {
				if (!p.revents) continue;
				char sink[1 << 16];
				ssize_t k = read(p.fd, sink, sizeof sink);
				if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
					for (size_t r = 0; r < conns.size(); r++)
						if (conns[r] == p.fd) open[r] = false;
					close(p.fd);
				}
			}
			continue;
		}
		// A rank that closes its connection between collectives has left (ncclCommDestroy);
		// data on any other connection begins a collective.
		bool data = false;
		for (auto &p : ps) {
			if (!p.revents) continue;
			char b;
			ssize_t k = recv(p.fd, &b, 1, MSG_PEEK);
			if (k > 0) {
				data = true;
			} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
				for (size_t r = 0; r < conns.size(); r++)
					if (conns[r] == p.fd) open[r] = false;
				close(p.fd);
			}
		}
		if (!data) continue;
		// A collective begins: every rank's header within the timeout of the first.
		double deadline = now() + timeout;
		std::vector<CollHeader> hs(conns.size());
		for (size_t r = 0; r < conns.size() && err == ncclSuccess; r++) {
			int got = open[r] ? read_full(conns[r], &hs[r], sizeof hs[r], deadline) : -1;
			if (got == 1 && hs[r].magic == kColl) continue;
			if (got == 0)
				err = fail(&msg, ncclRemoteError, "ncclAllReduce #%llu: rank %zu did not join within %.0f s (NCCLSIM_TIMEOUT) of the first rank",
					(unsigned long long)seq + 1, r, timeout);
			else
				err = fail(&msg, ncclRemoteError, "ncclAllReduce #%llu: rank %zu has left (destroyed, aborted or exited)", (unsigned long long)seq + 1, r);
			if (got < 0 && open[r]) {
				open[r] = false;
				close(conns[r]);
			}
		}
		seq++;
		for (size_t r = 1; r < conns.size() && err == ncclSuccess; r++) {
			const CollHeader &a = hs[0], &b = hs[r];
			if (a.count != b.count || a.dtype != b.dtype || a.op != b.op)
				err = fail(&msg, ncclInvalidUsage,
					"ncclAllReduce #%llu: ranks disagree: rank 0 has count %llu %s %s, rank %zu count %llu %s %s", (unsigned long long)seq,
					(unsigned long long)a.count, type_name(a.dtype), op_name(a.op), r, (unsigned long long)b.count, type_name(b.dtype),
					op_name(b.op));
		}
		size_t n = err == ncclSuccess ? hs[0].count * type_size(hs[0].dtype) : 0;
		acc.resize(n);
		buf.resize(n);
		for (size_t r = 0; r < conns.size() && err == ncclSuccess; r++) {
			int got = read_full(conns[r], buf.data(), n, deadline);
			if (got <= 0)
				err = fail(&msg, ncclRemoteError, "ncclAllReduce #%llu: rank %zu's data %s", (unsigned long long)seq, r,
					got == 0 ? "did not arrive in time" : "stopped (rank left)");
			else
				reduce(hs[0].dtype, hs[0].op, (int)r, (int)conns.size(), acc.data(), buf.data(), hs[0].count);
		}
		// A rank that left (aborted) after sending its data gets no result, and nor do the others.
		for (size_t r = 0; r < conns.size() && err == ncclSuccess; r++)
			if (gone(conns[r]))
				err = fail(&msg, ncclRemoteError, "ncclAllReduce #%llu: rank %zu left (aborted) before the result", (unsigned long long)seq, r);
		// The rank of this process last: once it has its result, every other rank's is in the
		// kernel's hands and arrives even if this process exits.
		for (size_t i = 0; i < conns.size(); i++) {
			size_t r = local < 0 ? i : (local + 1 + i) % conns.size();
			if (open[r]) send_reply(conns[r], err, msg, acc.data(), err == ncclSuccess ? n : 0, now() + timeout);
		}
	}
	delete root;
}

void *serve_thread(void *arg) {
	serve(static_cast<Root *>(arg));
	return nullptr;
}

/* ---- communicators ---- */

} // namespace

struct ncclComm {
	unsigned magic = kCommMagic;
	int rank = 0, nranks = 0;
	int fd = -1;
	uint64_t seq = 0;     // collectives enqueued
	std::mutex mu;
	std::condition_variable cv;
	int inflight = 0; // enqueued, not yet run
	bool aborted = false, destroyed = false;
	std::atomic<int> async{ncclSuccess};
	std::string last; // under mu
};

namespace {

// remember makes msg the communicator's last error (ncclGetLastError).
void remember(ncclComm *c, const std::string &msg) {
	std::lock_guard<std::mutex> lk(c->mu);
	c->last = msg;
}

// COMM_FAIL is fail() for an error of a call on communicator c.
#define COMM_FAIL(c, r, ...) \
	({ \
		std::string m_; \
		ncclResult_t r_ = fail(&m_, r, __VA_ARGS__); \
		remember(c, m_); \
		r_; \
	})

ncclComm *comm_of(ncclComm_t c) { return c && c->magic == kCommMagic && !c->destroyed ? c : nullptr; }

struct Task {
	ncclComm *comm;
	const void *send;
	void *recv;
	CollHeader h;
};

void set_async(ncclComm *c, ncclResult_t r, const std::string &msg) {
	std::lock_guard<std::mutex> lk(c->mu);
	if (c->async.load() == ncclSuccess) {
		c->last = msg;
		c->async.store(r);
	}
}

// run_task is the collective's device work, on the stream's thread.
void run_task(void *arg) {
	Task *t = static_cast<Task *>(arg);
	ncclComm *c = t->comm;
	size_t n = t->h.count * type_size(t->h.dtype);
	double deadline = now() + 2 * timeout_s() + 10; // the root's own timeout comes first
	std::string msg;
	ncclResult_t r = static_cast<ncclResult_t>(c->async.load());
	if (r == ncclSuccess && c->aborted) r = fail(&msg, ncclInvalidUsage, "ncclAllReduce: the communicator was aborted");
	if (r == ncclSuccess) {
		Activity a("ncclAllReduce");
		Reply rep = {};
		bool replied = false;
		// Send the header and the data, watching for an early (error) reply.
		int ok = write_full(c->fd, &t->h, sizeof t->h, deadline);
		const char *p = static_cast<const char *>(t->send);
		size_t left = n;
		while (ok > 0 && left > 0) {
			struct pollfd pf = {c->fd, POLLIN | POLLOUT, 0};
			int w = poll(&pf, 1, 1000);
			if (w < 0 && errno == EINTR) continue;
			if (now() > deadline) ok = 0;
			if (w <= 0) continue;
			if (pf.revents & POLLIN) {
				ok = read_full(c->fd, &rep, sizeof rep, deadline);
				replied = true;
				break;
			}
			if (pf.revents & (POLLERR | POLLHUP)) {
				ok = -1;
				break;
			}
			ssize_t k = send(c->fd, p, left < (1 << 20) ? left : (1 << 20), MSG_NOSIGNAL);
			if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
			if (k <= 0) ok = -1;
			else {
				p += k;
				left -= (size_t)k;
			}
		}
		if (ok > 0 && !replied) ok = read_full(c->fd, &rep, sizeof rep, deadline);
		if (ok > 0 && rep.magic != kReply) ok = -1;
		if (ok > 0 && rep.result != ncclSuccess) {
			std::string why(rep.msglen, '\0');
			read_full(c->fd, &why[0], why.size(), deadline);
			r = static_cast<ncclResult_t>(rep.result);
			msg = why;
		} else if (ok > 0) {
			if (rep.msglen) ok = -1;
			else ok = read_full(c->fd, t->recv, n, deadline);
		}
		if (r == ncclSuccess && ok <= 0)
			r = fail(&msg, ncclRemoteError, "ncclAllReduce #%llu on rank %d: %s", (unsigned long long)t->h.seq, c->rank,
				c->aborted ? "the communicator was aborted" : ok == 0 ? "no answer from the root in time" : "the connection to the root broke");
	}
	if (r != ncclSuccess) set_async(c, r, msg);
	{
		std::lock_guard<std::mutex> lk(c->mu);
		c->inflight--;
		c->cv.notify_all();
	}
	delete t;
}

// leave waits for the communicator's queued collectives (failing them first when aborting) and
// closes its connection.
ncclResult_t leave(ncclComm_t comm, bool abort) {
	ncclComm *c = comm_of(comm);
	if (!c) return fail(nullptr, ncclInvalidArgument, "%s: NULL or destroyed communicator", abort ? "ncclCommAbort" : "ncclCommDestroy");
	std::unique_lock<std::mutex> lk(c->mu);
	if (abort) {
		c->aborted = true;
		shutdown(c->fd, SHUT_RDWR); // a collective in flight fails at once
	}
	c->cv.wait(lk, [&] { return c->inflight == 0; });
	c->destroyed = true; // kept allocated: a later use reports ncclInvalidArgument
	close(c->fd);
	c->fd = -1;
	return ncclSuccess;
}

} // namespace

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

EXPORT const char *ncclGetLastError(ncclComm_t comm) {
	ncclComm *c = comm && comm->magic == kCommMagic ? comm : nullptr;
	if (c) {
		std::lock_guard<std::mutex> lk(c->mu);
		if (!c->last.empty()) {
			thread_local std::string copy;
			copy = c->last;
			return copy.c_str();
		}
	}
	return last_error.c_str();
}

EXPORT ncclResult_t ncclGetVersion(int *version) {
	if (!version) return fail(nullptr, ncclInvalidArgument, "ncclGetVersion: NULL version");
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
	if (!out) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: NULL uniqueId");
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) return fail(nullptr, ncclSystemError, "ncclGetUniqueId: socket: %s", strerror(errno));
	struct sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof a;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		close(fd);
		return fail(nullptr, ncclSystemError, "ncclGetUniqueId: listening on 127.0.0.1: %s", strerror(errno));
	}
	Root *root = new Root{fd, 0};
	int rnd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (rnd < 0 || read(rnd, &root->token, sizeof root->token) != (ssize_t)sizeof root->token) root->token = (uint64_t)now() * 2654435761u ^ (uint64_t)getpid();
	if (rnd >= 0) close(rnd);
	uint64_t token = root->token; // root belongs to its thread from its start
	pthread_t th;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int e = pthread_create(&th, &attr, serve_thread, root);
	pthread_attr_destroy(&attr);
	if (e != 0) {
		close(fd);
		delete root;
		return fail(nullptr, ncclSystemError, "ncclGetUniqueId: starting the root: %s", strerror(e));
	}
	Id id = {};
	memcpy(id.magic, kIdMagic, sizeof kIdMagic);
	id.port = ntohs(a.sin_port);
	id.token = token;
	memset(out, 0, sizeof *out);
	memcpy(out, &id, sizeof id);
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId uid, int rank) {
	if (!out) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: NULL comm");
	*out = nullptr;
	if (nranks < 1) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: nranks %d < 1", nranks);
	if (rank < 0 || rank >= nranks) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank %d outside [0, %d)", rank, nranks);
	Id id;
	memcpy(&id, &uid, sizeof id);
	if (memcmp(id.magic, kIdMagic, sizeof kIdMagic) != 0 || id.port == 0)
		return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: not a unique id from ncclGetUniqueId");
	double timeout = timeout_s(), deadline = now() + timeout + 5;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) return fail(nullptr, ncclSystemError, "ncclCommInitRank: socket: %s", strerror(errno));
	struct sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(id.port);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return fail(nullptr, ncclRemoteError, "ncclCommInitRank: rank %d: connecting to the root at 127.0.0.1:%u: %s", rank, id.port, strerror(errno));
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	set_nonblock(fd);
	Hello h = {kHello, nranks, rank, (int32_t)getpid(), id.token};
	Reply rep = {};
	int ok = write_full(fd, &h, sizeof h, deadline);
	if (ok > 0) ok = read_full(fd, &rep, sizeof rep, deadline);
	if (ok > 0 && rep.magic == kReply && rep.result != ncclSuccess) {
		std::string why(rep.msglen, '\0');
		read_full(fd, &why[0], why.size(), deadline);
		close(fd);
		return fail(nullptr, static_cast<ncclResult_t>(rep.result), "%s (rank %d)", why.c_str(), rank);
	}
	if (ok <= 0 || rep.magic != kReply || rep.msglen != 0) {
		close(fd);
		return fail(nullptr, ncclRemoteError, "ncclCommInitRank: rank %d: the root %s", rank, ok == 0 ? "did not answer in time" : "closed the connection");
	}
	ncclComm *c = new ncclComm();
	c->rank = rank;
	c->nranks = nranks;
	c->fd = fd;
	*out = c;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) { return leave(comm, false); }

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return leave(comm, true); }

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
	ncclComm *c = comm_of(comm);
	if (!c || !err) return fail(nullptr, ncclInvalidArgument, "ncclCommGetAsyncError: NULL or destroyed communicator, or NULL asyncError");
	*err = static_cast<ncclResult_t>(c->async.load());
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
	ncclComm *c = comm_of(comm);
	if (!c || !count) return fail(nullptr, ncclInvalidArgument, "ncclCommCount: NULL or destroyed communicator, or NULL count");
	*count = c->nranks;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
	ncclComm *c = comm_of(comm);
	if (!c || !rank) return fail(nullptr, ncclInvalidArgument, "ncclCommUserRank: NULL or destroyed communicator, or NULL rank");
	*rank = c->rank;
	return ncclSuccess;
}

static thread_local int group_depth;

EXPORT ncclResult_t ncclGroupStart() {
	group_depth++;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd() {
	if (group_depth == 0) return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart");
	group_depth--;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
	cudaStream_t stream) {
	ncclComm *c = comm_of(comm);
	if (!c) return fail(nullptr, ncclInvalidArgument, "ncclAllReduce: NULL or destroyed communicator");
	if ((int)datatype < 0 || (int)datatype >= ncclNumTypes) return COMM_FAIL(c, ncclInvalidArgument, "ncclAllReduce: invalid datatype %d", (int)datatype);
	if ((int)op < 0 || (int)op >= ncclNumOps) return COMM_FAIL(c, ncclInvalidArgument, "ncclAllReduce: invalid operation %d", (int)op);
	size_t es = type_size(datatype);
	if (es == 0)
		return COMM_FAIL(c, ncclInternalError, "ncclAllReduce: datatype %d is not modelled by the stand-in (float16/32/64, bfloat16 are)", (int)datatype);
	if (count > 0 && (!sendbuff || !recvbuff))
		return COMM_FAIL(c, ncclInvalidArgument, "ncclAllReduce: %s is NULL (count %zu)", sendbuff ? "recvbuff" : "sendbuff", count);
	if (count > 0 && (count > SIZE_MAX / es || !within((uintptr_t)sendbuff, count * es, kDevice | kHost) ||
					 !within((uintptr_t)recvbuff, count * es, kDevice | kHost)))
		return COMM_FAIL(c, ncclInvalidArgument, "ncclAllReduce: %s's %zu elements of %s are not inside one device allocation",
			!within((uintptr_t)sendbuff, count * es, kDevice | kHost) ? "sendbuff" : "recvbuff", count, type_name(datatype));
	ncclResult_t async = static_cast<ncclResult_t>(c->async.load());
	if (async != ncclSuccess) return fail(nullptr, async, "ncclAllReduce: the communicator has failed before: %s", ncclGetLastError(c));
	if (!stream) return COMM_FAIL(c, ncclInvalidUsage, "ncclAllReduce: the legacy default stream (NULL) is not emulated");
	Task *t = new Task{c, sendbuff, recvbuff, {kColl, (int32_t)datatype, (int32_t)op, 0, 0, count}};
	{
		std::lock_guard<std::mutex> lk(c->mu);
		t->h.seq = ++c->seq;
		c->inflight++;
	}
	if (cudasim_enqueue(stream, run_task, t) != 0) {
		{
			std::lock_guard<std::mutex> lk(c->mu);
			c->inflight--;
		}
		delete t;
		return COMM_FAIL(c, ncclUnhandledCudaError, "ncclAllReduce: enqueueing on the stream failed");
	}
	return ncclSuccess;
}
