package train

import (
	"context"
	"fmt"
	"iter"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
)

// FromLoader adapts a loader to the Data the trainer reads. Build the loader with the trainer's
// device and its Stream (loaders.Config{Device: dev, Stream: t.Stream()}), so that each batch's
// copy runs on the loader's copy stream and the trainer's kernels wait for it on the device,
// not on the host. (A loader without a Stream yields each batch once its copy has completed.)
// Either way the loader has ordered the copy before the step: nothing here waits for it again.
//
// Batches a Skip policy left empty are released and passed over. A loader's targets are class ids
// (loaders.Class), multi-hot (loaders.MultiHot) or vectors (loaders.Vector), which the Data
// reports (Targeted) and the trainer fits its loss to; another Target fails the epoch. A stream
// loader's Steps is 0 (unknown).
func FromLoader(l *loaders.Loader) Data { return loaderData{l} }

type loaderData struct{ l *loaders.Loader }

var (
	_ Targeted = loaderData{}
	_ Seeker   = loaderData{}
)

// TargetKind is the kind of the loader's Target; dim its values per sample (0 for class ids, -1
// for a Target the trainer does not take).
func (d loaderData) kind() (TargetKind, int) {
	tg := d.l.Target()
	dim := tg.Size() / 4
	switch tg {
	case loaders.Class(d.l.Info().NumClasses):
		return ClassIDs, 0
	case loaders.MultiHot(dim):
		return MultiHot, dim
	case loaders.Vector(dim):
		return Vector, dim
	}
	return ClassIDs, -1
}

func (d loaderData) TargetKind() TargetKind { k, _ := d.kind(); return k }

func (d loaderData) Steps() int { return d.l.BatchesPerEpoch() }

func (d loaderData) split() (rank, world int) {
	s := d.l.State()
	return s.Rank, s.WorldSize
}

// identity is what the ranks of a data-parallel run must agree on about their data, as far as the
// loader knows it (the samples' contents are the caller's to compare: stoke train digests them).
func (d loaderData) identity() string {
	s, info := d.l.State(), d.l.Info()
	mean, std := d.l.Normalization()
	return fmt.Sprintf("%s: %d samples, %d classes, %v, normalized by %v %v, batch %d, shuffle %v, drop last %v, seed %d",
		info.Name, s.Len, info.NumClasses, d.l.Shape(), mean, std, s.BatchSize, s.Shuffle, s.DropLast, s.Seed)
}

func (d loaderData) Normalization() (mean, std []float32) { return d.l.Normalization() }

// BatchesFrom starts the epoch at batch from (loaders.Loader.Restore): the order, the samples'
// augmentations and the batches are those of the whole epoch's from on, and the samples before are
// not read. A stream loader cannot be placed by a batch count (only by its own State, which says
// how far its stream was read): it fails the epoch with loaders.ErrStateMismatch.
func (d loaderData) BatchesFrom(ctx context.Context, epoch, from int) iter.Seq2[Batch, error] {
	s := d.l.State()
	s.Epoch, s.Batch = epoch, from
	if err := d.l.Restore(s); err != nil {
		return func(yield func(Batch, error) bool) {
			yield(Batch{}, fmt.Errorf("train: epoch %d from batch %d: %w", epoch+1, from+1, err))
		}
	}
	return d.Batches(ctx, epoch)
}

func (d loaderData) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		kind, dim := d.kind()
		if dim < 0 {
			yield(Batch{}, fmt.Errorf("train: %w: the loader's batches carry %T targets; the trainer takes class ids (loaders.Class), "+
				"multi-hot (loaders.MultiHot) or vectors (loaders.Vector)", ErrConfig, d.l.Target()))
			return
		}
		for b, err := range d.l.Epoch(ctx, epoch) {
			if err != nil {
				yield(Batch{}, err)
				return
			}
			if b.N == 0 {
				b.Release()
				continue
			}
			s := b.Shape
			tb := Batch{
				Images:  kernels.U8{Buf: b.Images, Len: b.N * s.Len()},
				N:       b.N,
				Shape:   s,
				Indices: b.Indices,
				Mix:     b.Mix,
				Release: b.Release,
			}
			if kind == ClassIDs {
				tb.Labels = kernels.I32{Buf: b.Labels, Len: b.N}
			} else {
				tb.Targets = kernels.F32{Buf: b.Labels, Len: b.N * dim}
			}
			if !yield(tb, nil) {
				return
			}
		}
	}
}
