// Package loaders owns where samples come from and in what order: datasets (MNIST IDX, CIFAR
// binary, image folders, WebDataset tar shards, in-memory and user-defined ones), samplers
// (sequential, shuffled, distributed), the shard writer, and the Loader that turns a dataset into
// batches on a device.
//
// A Dataset is random access (Len, Sample(ctx, i)); implement it to plug in your own data. A Stream
// is for sources that cannot seek. Open turns a spec string ("mnist", "cifar10:DIR", "DIR",
// "shards:GLOB", ...) into a Dataset.
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
// Config.Tracer sees every item of every stage (one span per sample and transform worker) and
// every host-to-device copy (stage CopyStage), timed with the feeder's events: what stoke profile
// draws as a timeline.
//
// Bad input never panics: parsers check headers before allocating, errors name the dataset and the
// sample (SampleError: index, key or path) and wrap ErrCorrupt, ErrLabel, ErrIndex, ErrEmpty or the
// decoder's error (transforms.ErrTooLarge for header bombs).
//
// # Concurrency
//
// Datasets in this package are safe for concurrent Sample calls once opened. A ShardStream and a
// ShardWriter are used by one goroutine at a time. A Sampler is a value. A Loader iterates one
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
