package loaders

import (
	"context"
	"errors"
	"fmt"

	"github.com/stoke-ml/stoke/transforms"
)

// Sentinel errors callers check with errors.Is.
var (
	// ErrCorrupt marks a file or sample whose bytes do not follow its format (bad magic, truncated
	// record, malformed tar member, unparsable label); a SampleError whose image does not decode
	// (transforms.ErrCorrupt) matches it too.
	ErrCorrupt = errors.New("corrupt data")
	// ErrStorage marks a sample that the store failed to deliver (HTTP 403, 404, 5xx after the
	// retries, a network failure, an object replaced while it was read): not a bad sample, so the
	// Skip policy does not skip it.
	ErrStorage = errors.New("storage failed")
	// ErrLabel marks a label outside [0, NumClasses).
	ErrLabel = errors.New("label out of range")
	// ErrIndex marks a sample index outside [0, Len()).
	ErrIndex = errors.New("index out of range")
	// ErrEmpty marks a dataset, split or class folder without samples.
	ErrEmpty = errors.New("no samples")
)

// Sample is one example before transformation.
//
// The slices in Input may alias the dataset's own memory (datasets.MNIST, CIFAR, compressed Shards and
// in-memory datasets hand out views of what they hold): a Sample is read-only for its receiver.
type Sample struct {
	Input transforms.Input
	// Label is the class id, the target of the default Config.Target (Class).
	Label int
	// Labels are the classes of a multi-label sample, the target of MultiHot.
	Labels []int
	// Target is a float target (regression values, soft labels), the target of Vector.
	Target []float32
	// Key names the sample in errors: a file path or a shard member key; empty for datasets
	// whose samples are named by their index only (MNIST, CIFAR, most in-memory data).
	Key string
}

// Dataset is a random-access source of samples, the one the Loader and its samplers work with.
//
// Sample must be safe for concurrent use by many goroutines (the Loader calls it from every
// worker) and must return an error, never panic, for bad data: wrap ErrCorrupt, ErrLabel or the
// decoder's error and name the sample. An index outside [0, Len()) is an error wrapping ErrIndex.
type Dataset interface {
	Len() int
	Sample(ctx context.Context, i int) (Sample, error)
}

// SampleStream is a source that cannot seek (a tar shard read from a pipe, a network stream). Next
// returns the next sample, or an error wrapping io.EOF once the stream is exhausted. A SampleStream is
// used by one goroutine at a time. Close releases what it holds; it may be called at any point.
type SampleStream interface {
	Next(ctx context.Context) (Sample, error)
	Close() error
}

// Info is what a dataset says about itself.
type Info struct {
	// Name is used in error messages and statistics ("mnist", "cifar10", a folder path).
	Name string
	// NumClasses bounds labels to [0, NumClasses); 0 means unknown and labels are only checked
	// to be non-negative.
	NumClasses int
	// Shape is the shape every sample has before transformation, or the zero Shape when samples
	// differ (image folders, shards).
	Shape transforms.Shape
	// Mean and Std are the dataset's usual per-channel normalization on the [0, 1] scale, or nil
	// when it has none (the ImageNet values are then the Loader's default).
	Mean, Std []float32
	// Classes names the classes in label order when the dataset names them (an image folder's
	// class folders, Fashion-MNIST's), or is nil (MNIST, whose label is its digit). Subsets and
	// WithClasses keep it; the slice is shared: do not modify.
	Classes []string
}

// Describer is implemented by datasets that know their Info. Datasets that do not are described by
// Describe with defaults.
type Describer interface {
	Info() Info
}

// Describe returns ds's Info if it implements Describer; otherwise a name derived from its type and
// NumClasses 0 (unknown).
func Describe(ds Dataset) Info {
	if d, ok := ds.(Describer); ok {
		return d.Info()
	}
	return Info{Name: fmt.Sprintf("%T", ds)}
}

// SampleError is the error about one sample: it names the dataset, the sample's index and key, and
// wraps the cause. The datasets of package datasets return it, and the Loader wraps the errors of other
// datasets and of transforms in it, so a caller finds the bad sample with errors.As.
type SampleError struct {
	Dataset string
	Index   int
	Key     string // empty when the sample has no name (index out of range)
	Err     error
}

func (e *SampleError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("loaders: %s sample %d: %v", e.Dataset, e.Index, e.Err)
	}
	return fmt.Sprintf("loaders: %s sample %d (%s): %v", e.Dataset, e.Index, e.Key, e.Err)
}

func (e *SampleError) Unwrap() error { return e.Err }

// Is makes a sample whose image does not decode (transforms.ErrCorrupt) match ErrCorrupt too:
// one sentinel for corrupt data, whichever layer found it.
func (e *SampleError) Is(target error) bool {
	return target == ErrCorrupt && errors.Is(e.Err, transforms.ErrCorrupt)
}

// CheckLabel returns the error about sample i of dataset (named key, "" if it has no name) when
// label is outside [0, classes): a *SampleError wrapping ErrLabel; classes <= 0 only rejects
// negative labels. It returns nil for a label in range. Datasets (this module's and yours) use it
// to keep the Dataset contract.
func CheckLabel(dataset string, i int, key string, label, classes int) error {
	if label < 0 || (classes > 0 && label >= classes) {
		return &SampleError{dataset, i, key, fmt.Errorf("label %d not in [0, %d): %w", label, classes, ErrLabel)}
	}
	return nil
}

// CheckIndex returns the error about index i of dataset when i is outside [0, n): a *SampleError
// wrapping ErrIndex, as the Dataset contract asks; nil otherwise.
func CheckIndex(dataset string, i, n int) error {
	if i < 0 || i >= n {
		return &SampleError{dataset, i, "", fmt.Errorf("%w (len %d)", ErrIndex, n)}
	}
	return nil
}

// Memory is a dataset held in memory, for tests and small data.
type Memory struct {
	info    Info
	samples []Sample
}

var (
	_ Dataset   = (*Memory)(nil)
	_ Describer = (*Memory)(nil)
)

// NewMemory returns a dataset over samples, which it keeps (not copies): the caller must not modify
// them afterwards. Labels are checked against
// info.NumClasses when a sample is read, so an out-of-range label is reported like any bad sample.
func NewMemory(info Info, samples []Sample) *Memory {
	if info.Name == "" {
		info.Name = "memory"
	}
	return &Memory{info: info, samples: samples}
}

// Len returns the number of samples.
func (m *Memory) Len() int { return len(m.samples) }

// Info returns what NewMemory was given.
func (m *Memory) Info() Info { return m.info }

// Sample returns sample i.
func (m *Memory) Sample(_ context.Context, i int) (Sample, error) {
	if err := CheckIndex(m.info.Name, i, len(m.samples)); err != nil {
		return Sample{}, err
	}
	s := m.samples[i]
	if err := CheckLabel(m.info.Name, i, s.Key, s.Label, m.info.NumClasses); err != nil {
		return Sample{}, err
	}
	return s, nil
}
