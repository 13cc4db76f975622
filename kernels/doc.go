// Package kernels is the operation set that training needs (GEMM and batched GEMM, elementwise
// functions and their gradients, broadcast arithmetic, reductions, strided copies, softmax,
// fused attention, layer and batch norm, convolution, pooling, losses, optimizer updates, uint8 ->
// float32 normalization, and the device half of a JPEG decode: RenderRecords, which turns the
// records of transforms.Worker.ApplyCoefficients into pixels), enqueued on a gpu.Stream of the
// device it runs on.
//
// An op set (Ops) exists per backend: For(dev) picks the one registered for dev's backend. The CPU
// op set (registered as "cpu") runs each op as a host function over the Go memory behind CPU
// buffers; it is also the reference every other backend is tested against. The CUDA op set lives
// with the rest of the CUDA backend in package gpu/cuda, which registers it as "cuda"; it
// implements the same interface and semantics. The argument checks are the package's, not a backend's: For puts them in front of
// whichever op set it returns (a user's registered one too), so every backend refuses a bad call
// with the same error before the call reaches it. ForPrecision(dev, BF16 or FP16) gives an op set
// of dev whose products (Gemm, GemmStrided and Conv2D; DepthwiseConv2D stays fp32) take 16-bit operands with fp32 accumulation:
// mixed precision, for every op set that implements MixedPrecision. PrepareConv2D and PrepareGemm
// give a convolution or a product over weights that stay as they are (inference), prepared once
// by an op set that implements Preparer (the CPU's transforms and packs them) and otherwise the
// plain op over them.
//
// Operands are typed views (F32, I32, U8) into device buffers: a buffer, an element offset and a
// length, so that one allocation can hold many tensors. Matrices are row-major and packed; images
// are NCHW.
//
// # Concurrency
//
// Ops values are safe for concurrent use. An op runs when its stream reaches it, after everything
// enqueued before it on that stream, and an op's outputs are ready for later work on the same
// stream; ordering across streams is by events (gpu.Stream.Wait). Shape and argument errors are
// returned by the enqueueing call, before anything is enqueued; errors that depend on the data (a
// label out of range) become the stream's sticky error.
//
// # Ownership
//
// Ops neither allocate nor free device memory, with two exceptions: the bf16/fp16 CUDA op sets
// (ForPrecision) keep a block of 16-bit memory per stream (for the last few streams) for the
// converted operands of the products, until the device closes; the CPU op set's prepared
// convolutions and products keep their forms of the weights (Go memory) while they are in use;
// and the CPU op set's RenderRecords renders into the scratch of transforms Workers it keeps for
// the next call (Go memory: it leaves ws alone). The caller owns every buffer and
// must keep it alive, and unchanged where an op reads it, until the stream has run the op. Host
// slices given to an op (NormalizeU8's mean and std, the shapes and strides of Binary, SumTo and
// CopyStrided) are copied when it is enqueued.
//
// # Determinism
//
// Every op gives bit-for-bit the same result on every run: parallel CPU work is split into a
// fixed number of parts that does not depend on the number of cores, and reductions add in a fixed
// order.
package kernels

//go:generate go run ./internal/opdef/gen
