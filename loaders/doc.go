// Package loaders owns the vocabulary of data (Dataset, Sample, Info, Describer, SampleError,
// SampleStream, StreamSource and the sentinel errors), where samples go in what order (samplers:
// sequential, shuffled, weighted, class-balanced, your own; the split between data-parallel
// ranks; subsets; targets and the collate hook) and the Loader that turns a dataset or a stream
// into batches on a device. The dataset formats (MNIST, CIFAR, image folders, tar shards, remote
// shards) and the spec opener are package datasets, which imports this one.
//
// A Dataset is random access (Len, Sample(ctx, i)); implement it to plug in your own data, and
// New makes a Loader over it. A StreamSource is read front to back, in parts, once per epoch
// (PyTorch's IterableDataset); NewStream makes a Loader over it that shuffles its parts and its
// samples through a seeded shuffle buffer. datasets.Open turns a spec string ("cifar10:DIR",
// "DIR", "shards:GLOB", ...) into a Dataset. A dataset that fetches ahead of its reads implements
// ReadPlanner (a stream source, PartPrefetcher): the Loader tells it what this rank reads next.
//
// A Sampler picks each epoch's indices (Config.Sampler); Config.Rank and Config.WorldSize give
// each data-parallel process its disjoint part, with equal steps per rank (EnvRank reads them from
// torchrun's environment). A Target writes each sample's label into the batch (int32 class ids by
// default, float vectors, multi-hot rows, or your own encoding); Config.Mix mixes each batch
// (MixUp, CutMix) in its host slot before the copy and says in Batch.Mix what it drew, and
// Config.Collate may rewrite a whole batch there.
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
// Bad samples never panic: errors name the dataset and the sample (SampleError: index, key or
// path) and wrap ErrCorrupt, ErrLabel, ErrIndex, ErrEmpty or the decoder's error
// (transforms.ErrTooLarge for header bombs); CheckIndex and CheckLabel build them for a dataset.
//
// # Concurrency
//
// Memory, Subset and WithClasses are safe for concurrent Sample calls. Every SampleStream a stream
// Loader opens is used by one goroutine at a time (its source stage reads them). Samplers and
// ReadPlanner are called from the goroutine that iterates the epoch, PartPrefetcher from the
// epoch's source stage. A Loader iterates one epoch at a time; every goroutine an epoch starts has exited when its iteration returns (at the
// end, on error, on cancellation or when the loop breaks).
//
// # Ownership
//
// Samples from Memory alias the dataset's memory and are read-only. The Loader does not close its
// dataset: whoever opened it closes it. A Batch's device buffers belong to the Loader and are lent to
// the consumer until Batch.Release; a consumer that holds more than Prefetch+1 batches unreleased
// stalls the Loader until it releases one.
package loaders
