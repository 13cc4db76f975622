/*
 * nccl_test.cc: checks the stand-in NCCL (libnccl.cc) against the API's rules in one process with
 * one rank (the multi-rank runs are the Go tests of dist/nccl): the argument checks, the
 * error strings, the 16-bit and 64-bit types, the operations the Go code does not use, and a
 * destroyed communicator. Built and run by scripts/cuda-sim.sh; prints "nccl_test: ok".
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "nccl_test: line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, "\n"); \
			failures++; \
		} \
	} while (0)

#define MUST(call) \
	do { \
		int r_ = (int)(call); \
		if (r_ != 0) { \
			fprintf(stderr, "nccl_test: %s = %d\n", #call, r_); \
			exit(1); \
		} \
	} while (0)

int main() {
	CUdevice dev;
	CUcontext ctx;
	CUstream s;
	MUST(cuInit(0));
	MUST(cuDeviceGet(&dev, 0));
	MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
	MUST(cuCtxSetCurrent(ctx));
	MUST(cuStreamCreate(&s, 0));
	cudaStream_t cs = (cudaStream_t)s;
	CUdeviceptr d;
	MUST(cuMemAlloc(&d, 64));
	void *buf = (void *)d;

	CHECK(strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)") == 0, "error string");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
	CHECK(ncclGetUniqueId(NULL) == ncclInvalidArgument, "ncclGetUniqueId(NULL)");

	ncclUniqueId id, junk;
	memset(&junk, 0, sizeof junk);
	ncclComm_t comm = NULL;
	MUST(ncclGetUniqueId(&id));
	CHECK(ncclCommInitRank(&comm, 1, junk, 0) == ncclInvalidArgument, "an id not from ncclGetUniqueId");
	CHECK(ncclCommInitRank(&comm, 1, id, 1) == ncclInvalidArgument, "rank 1 of 1");
	CHECK(ncclCommInitRank(&comm, 0, id, 0) == ncclInvalidArgument, "0 ranks");
	MUST(ncclCommInitRank(&comm, 1, id, 0));
	int n = 0, rank = -1;
	MUST(ncclCommCount(comm, &n));
	MUST(ncclCommUserRank(comm, &rank));
	CHECK(n == 1 && rank == 0, "count %d, rank %d", n, rank);

	CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, NULL, cs) == ncclInvalidArgument, "NULL communicator");
	CHECK(ncclAllReduce(NULL, buf, 4, ncclFloat32, ncclSum, comm, cs) == ncclInvalidArgument, "NULL sendbuff");
	CHECK(ncclAllReduce(buf, NULL, 4, ncclFloat32, ncclSum, comm, cs) == ncclInvalidArgument, "NULL recvbuff");
	CHECK(ncclAllReduce(buf, buf, 17, ncclFloat32, ncclSum, comm, cs) == ncclInvalidArgument, "past the allocation");
	CHECK(strstr(ncclGetLastError(comm), "not inside one device allocation") != NULL, "last error: %s", ncclGetLastError(comm));
	float host[4];
	CHECK(ncclAllReduce(host, host, 4, ncclFloat32, ncclSum, comm, cs) == ncclInvalidArgument, "host (not device) memory");
	CHECK(ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, comm, cs) == ncclInvalidArgument, "datatype 99");
	CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)99, comm, cs) == ncclInvalidArgument, "op 99");
	CHECK(ncclAllReduce(buf, buf, 0, ncclFloat32, ncclSum, comm, cs) == ncclSuccess, "count 0");

	// One rank: the result is the input, through every type and operation; out of place too.
	const uint16_t bf16[4] = {0x3f80, 0xc000, 0x4049, 0x0000}; // 1, -2, 3.140625, 0
	const uint16_t f16[4] = {0x3c00, 0xc000, 0x4248, 0x0000};  // 1, -2, 3.140625, 0
	const double f64[4] = {1, -2, 3.25, 1e300};
	struct {
		ncclDataType_t t;
		const void *v;
		size_t n;
	} cases[] = {{ncclBfloat16, bf16, 8}, {ncclFloat16, f16, 8}, {ncclFloat64, f64, 32}};
	for (auto &c : cases) {
		for (int op = ncclSum; op < ncclNumOps; op++) {
			unsigned char out[32] = {0};
			MUST(cuMemcpyHtoDAsync(d, c.v, c.n, s));
			MUST(ncclGroupStart());
			MUST(ncclAllReduce(buf, (char *)buf + 32, 4, c.t, (ncclRedOp_t)op, comm, cs));
			MUST(ncclGroupEnd());
			MUST(cuStreamSynchronize(s));
			MUST(cuMemcpyDtoHAsync(out, d + 32, c.n, s));
			MUST(cuStreamSynchronize(s));
			CHECK(memcmp(out, c.v, c.n) == 0, "1 rank, type %d, op %d: the result differs from the input", (int)c.t, op);
		}
	}
	ncclResult_t async = ncclInternalError;
	MUST(ncclCommGetAsyncError(comm, &async));
	CHECK(async == ncclSuccess, "async error %d", (int)async);
	MUST(ncclCommDestroy(comm));
	CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, cs) == ncclInvalidArgument, "destroyed communicator");
	CHECK(ncclCommDestroy(comm) == ncclInvalidArgument, "destroyed twice");

	// ncclCommAbort of an idle communicator.
	MUST(ncclGetUniqueId(&id));
	MUST(ncclCommInitRank(&comm, 1, id, 0));
	MUST(ncclCommAbort(comm));
	CHECK(ncclCommGetAsyncError(comm, &async) == ncclInvalidArgument, "aborted communicator");

	if (failures) return 1;
	printf("nccl_test: ok\n");
	return 0;
}
