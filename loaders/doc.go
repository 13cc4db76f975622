// Package loaders owns where samples come from and in what order: datasets (MNIST IDX, CIFAR
// binary, image folders, WebDataset tar shards, in-memory and user-defined ones), samplers
// (sequential, shuffled, distributed), the shard writer, and the Loader that turns a dataset into
// batches on a device.
//
// A Dataset is random access (Len, Sample(ctx, i)); implement it to plug in your own data. A Stream
// is for sources that cannot seek. Open turns a spec string ("mnist", "cifar10:DIR", "DIR",
// "shards:GLOB", ...) into a Dataset.
//
// Bad input never panics: parsers check headers before allocating, errors name the dataset and the
// sample (index, key or path) and wrap ErrCorrupt, ErrLabel, ErrIndex, ErrEmpty or the decoder's
// error.
//
// # Concurrency
//
// Datasets in this package are safe for concurrent Sample calls once opened. A ShardStream and a
// ShardWriter are used by one goroutine at a time. A Sampler is a value.
//
// # Ownership
//
// Samples from MNIST, CIFAR and Memory alias the dataset's memory and are read-only; ImageFolder
// and Shards return a new slice per call. Datasets that hold files (Shards) implement io.Closer;
// whoever opened them closes them.
package loaders
