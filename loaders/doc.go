// Package loaders owns where samples come from and in what order: datasets (MNIST IDX, CIFAR
// binary, image folders, WebDataset tar shards, in-memory and user-defined ones), streams, samplers
// (sequential, shuffled, weighted, class-balanced, your own), the split between data-parallel
// ranks, targets, the shard writer, and the Loader that turns a dataset or a stream into batches on
// a device.
//
// A Dataset is random access (Len, Sample(ctx, i)); implement it to plug in your own data, and
// New makes a Loader over it. A StreamSource is read front to back, in parts, once per epoch
// (PyTorch's IterableDataset); NewStream makes a Loader over it that shuffles its parts and its
// samples through a seeded shuffle buffer. Open turns a spec string ("mnist", "cifar10:DIR", "DIR",
// "shards:GLOB", ...) into a Dataset; OpenStream("shards:GLOB") reads the same shards as a stream.
//
// A Sampler picks each epoch's indices (Config.Sampler); Config.Rank and Config.WorldSize give
// each data-parallel process its disjoint part, with equal steps per rank (EnvRank reads them from
// torchrun's environment). A Target writes each sample's label into the batch (int32 class ids by
// default, float vectors, multi-hot rows, or your own encoding), and Config.Collate may rewrite a
// whole batch in its host slot before the copy.
//
// The Loader runs one epoch as a pipeline (package pipeline) of four stages:
//
//	sampler    issues the epoch's indices in order and takes a host slot (package pinned) for each
//	           batch; the slot pool's size is the backpressure
//	transform  N workers, ordered: read the sample, decode and augment it (package transforms)
//	           straight into its place in the slot, with randomness from (seed, epoch, index)
//	collate    groups the samples of one slot
//	copy       compacts skipped samples away and hands the slot to a gpu.Feeder, which copies it
//	           into a ring of device buffers on its own stream and returns the slot to the pool
//	           once the copy's event has completed; the consumer's stream waits for the copy
//
// Config.Tracer sees every item of every stage (one span per sample and transform worker), each
// sample's read (stage ReadStage) and every host-to-device copy (stage CopyStage), timed with the
// feeder's events: what stoke profile and the profile package draw as a timeline. Config.Workers
// = AutoWorkers sizes the transform workers from a short probe.
//
// Bad input never panics: parsers check headers before allocating, errors name the dataset and the
// sample (SampleError: index, key or path) and wrap ErrCorrupt, ErrLabel, ErrIndex, ErrEmpty or the
// decoder's error (transforms.ErrTooLarge for header bombs).
//
// # Concurrency
//
// Datasets in this package are safe for concurrent Sample calls once opened. A ShardStream and a
// ShardWriter are used by one goroutine at a time, and so is every SampleStream a stream Loader opens
// (its source stage reads them). Samplers are called from the goroutine that iterates the epoch. A Loader iterates one
// epoch at a time; every goroutine an epoch starts has exited when its iteration returns (at the
// end, on error, on cancellation or when the loop breaks).
//
// # Ownership
//
// Samples from MNIST, CIFAR and Memory alias the dataset's memory and are
// read-only; ImageFolder and Shards return a new slice per call. Datasets that hold files (Shards) implement io.Closer;
// whoever opened them closes them. A Batch's device buffers belong to the Loader and are lent to
// the consumer until Batch.Release; a consumer that holds more than Prefetch+1 batches unreleased
// stalls the Loader until it releases one.
package loaders
