package loaders

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/transforms"
)

// Target turns a sample's label into the bytes a batch carries for it: Batch.Labels holds N
// targets of Size bytes each, in the batch's order. The Loader calls Put from its workers, each
// sample into its own place in the pinned host slot, so there is no separate collate pass.
//
// Class (int32 class ids, the default), Vector (float32 regression targets) and MultiHot (float32
// multi-label targets) cover the usual cases; implement Target for any other fixed-size encoding.
type Target interface {
	// Size is the number of bytes of one sample's target (at least 1).
	Size() int
	// Put writes s's target into dst, which has Size bytes. An error makes s a bad sample,
	// reported (or skipped under the Skip policy) with its index and key. Put is called
	// concurrently and must not keep dst.
	Put(dst []byte, s Sample) error
}

// Class returns the default Target: Sample.Label as a little-endian int32, checked to lie in
// [0, classes) (only to be non-negative when classes is 0).
func Class(classes int) Target { return class(classes) }

type class int

func (c class) Size() int { return 4 }

func (c class) Put(dst []byte, s Sample) error {
	if s.Label < 0 || (c > 0 && s.Label >= int(c)) || s.Label > math.MaxInt32 {
		return fmt.Errorf("label %d not in [0, %d): %w", s.Label, int(c), ErrLabel)
	}
	binary.LittleEndian.PutUint32(dst, uint32(s.Label))
	return nil
}

// Vector returns a Target of dim float32 values taken from Sample.Target (regression targets,
// soft labels, boxes), little-endian. A sample whose Target has another length, or a value that is
// NaN or infinite, is a bad sample.
func Vector(dim int) Target { return vector(dim) }

type vector int

func (v vector) Size() int { return 4 * int(v) }

func (v vector) Put(dst []byte, s Sample) error {
	if len(s.Target) != int(v) {
		return fmt.Errorf("target of %d values, want %d: %w", len(s.Target), int(v), ErrLabel)
	}
	for k, x := range s.Target {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("target value %d is %v: %w", k, x, ErrLabel)
		}
		binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(x))
	}
	return nil
}

// MultiHot returns a multi-label Target: classes float32 values, 1 for each class in
// Sample.Labels and 0 for the others (what a sigmoid cross-entropy loss takes). A label outside
// [0, classes) is a bad sample; repeated labels count once.
func MultiHot(classes int) Target { return multiHot(classes) }

type multiHot int

func (m multiHot) Size() int { return 4 * int(m) }

func (m multiHot) Put(dst []byte, s Sample) error {
	clear(dst)
	for _, c := range s.Labels {
		if c < 0 || c >= int(m) {
			return fmt.Errorf("label %d not in [0, %d): %w", c, int(m), ErrLabel)
		}
		binary.LittleEndian.PutUint32(dst[4*c:], math.Float32bits(1))
	}
	return nil
}

// HostBatch is a batch in its pinned host slot, complete and not yet copied to the device: what
// Config.Collate receives. Images and Targets are the slot's memory, valid during the call only.
type HostBatch struct {
	// Images holds N uint8 images of Shape, CHW, one after the other.
	Images []byte
	// Targets holds N targets of Target.Size() bytes each.
	Targets []byte
	N       int
	Shape   transforms.Shape
	// Indices are the samples' dataset indices (stream positions for a stream loader).
	Indices []int
	// Epoch and Seq place the batch, as in Batch.
	Epoch, Seq int
}
