// Package datasets holds the dataset formats that a loaders.Loader reads, and Open, which turns a
// spec string into one of them: MNIST IDX (MNIST, ParseMNIST, OpenMNIST), CIFAR binary (CIFAR),
// image folders (ImageFolder), WebDataset tar shards, plain, gzip or zstd (Shards, ShardStream,
// NewShardSource for a stream loader), on local disk, in S3 or on a web server (Opener, with a
// cache of local copies), and the ShardWriter that writes them with the index that makes a sample
// one read (stoke pack).
//
// Open("cifar10:DIR", "train"), Open("shards:GLOB", "") and the others return a loaders.Dataset;
// OpenStream("shards:GLOB", "") reads the same shards as a loaders.StreamSource.
//
// # Splits
//
// A dataset has up to three splits, train, val and test, and Splits(spec) lists those a spec
// has: MNIST and CIFAR have train and test; a folder has its subfolders train/, val/ (or valid/,
// validation/, the names torchvision's datasets and Kaggle's exports use; Open's split argument
// takes them too) and test/, and a folder of class folders is a train split alone; shards have the
// splits their index.json records (ShardWriter.BeginSplit; stoke pack writes every split of its
// input into one index), and shards without one, or packed before splits, are train. A split a
// dataset does not have is an error wrapping ErrNoSplit that names those it has. The vocabulary these
// share with the Loader (Dataset, Sample, Info, SampleError, the sentinel errors) is package
// loaders': this package imports loaders, never the reverse, so a dataset of your own is written
// against loaders alone, exactly as these are. Open is here, not in loaders, because it names
// every format of this package. The bare spec "mnist" is the command line's (it runs go mod
// download); the library takes "mnist:DIR", and DownloadMNIST(ctx, DIR) fetches the four files
// into DIR once.
//
// Remote shards through a cache implement loaders.ReadPlanner (random access) and
// loaders.PartPrefetcher (streams): the Loader tells them what it will read next, as it tells any
// dataset of yours that implements them.
//
// Bad input never panics: parsers check headers before allocating, errors name the dataset and the
// sample (loaders.SampleError: index, key or path) and wrap loaders.ErrCorrupt, ErrLabel, ErrIndex,
// ErrEmpty or the decoder's error (transforms.ErrTooLarge for header bombs).
//
// # Concurrency
//
// Datasets in this package are safe for concurrent Sample calls once opened. A ShardStream and a
// ShardWriter are used by one goroutine at a time. Remote shards with a cache download ahead on the
// cache's goroutines, which Close joins.
//
// # Ownership
//
// Samples from MNIST and CIFAR alias the dataset's memory and are read-only; ImageFolder and
// Shards return a new slice per call. Datasets that hold files (Shards, a source from OpenStream
// with a cache) implement io.Closer; whoever opened them closes them.
package datasets
