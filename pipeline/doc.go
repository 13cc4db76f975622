// Package pipeline is Stoke's generic staged concurrency engine: sources, parallel maps that keep
// input order or not, batching, prefetch and sinks, composed into one Pipeline that runs under one
// context. It knows nothing of images or GPUs; loaders/ builds the data path out of it.
//
// A pipeline is declared first and run once:
//
//	p := pipeline.New()
//	src := pipeline.FromSlice(p, "index", indices)
//	dec := pipeline.Map(p, "decode", src, decode, pipeline.Workers(4), pipeline.Ordered(true))
//	bat := pipeline.Batch(p, "batch", dec, 64)
//	for b, err := range pipeline.Iter(ctx, p, bat) { ... }
//
// Every queue is consumed by exactly one stage (or by Iter); Run reports a queue that nobody
// consumes, because its producer would block forever.
//
// A stage function learns which of its stage's workers runs it from WorkerIndex(ctx), so
// per-worker state (scratch memory, decoders) lives in a slice indexed by it, without a lock. A
// function that waits for downstream to hand back a resource (a free buffer) says so with
// Blocked(ctx, d), and that time counts as the stage's blocked time, not its busy time.
// SuggestWorkers sizes a parallel stage from the measured busy shares.
//
// # Concurrency
//
// Every stage runs in its own goroutines under one errgroup. Stages are joined by bounded channels,
// so a slow consumer slows its producers (backpressure) instead of growing memory. An ordered Map
// holds at most Window results ahead of the one it is waiting for, so one slow item cannot make
// memory grow without bound. The first error cancels the whole pipeline and is returned as a
// *StageError naming the stage and the index of the item; a panic inside a user function becomes
// such an error too, with its stack. Run and Iter return only after every goroutine has exited.
//
// Stats may be called at any time, from any goroutine, while the pipeline runs and after.
//
// # Ownership
//
// Values travel by assignment: a value sent downstream belongs to the next stage. Batch allocates a
// new slice per batch, owned by the receiver.
package pipeline
