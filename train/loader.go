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
// Batches a Skip policy left empty are released and passed over. The trainer's models take class
// ids: a loader with another Target fails the epoch. A stream loader's Steps is 0 (unknown).
func FromLoader(l *loaders.Loader) Data { return loaderData{l} }

type loaderData struct{ l *loaders.Loader }

func (d loaderData) Steps() int { return d.l.BatchesPerEpoch() }

func (d loaderData) split() (rank, world int) {
	s := d.l.State()
	return s.Rank, s.WorldSize
}

// identity is what the ranks of a data-parallel run must agree on about their data.
func (d loaderData) identity() string {
	s := d.l.State()
	return fmt.Sprintf("%s: %d samples, %v, batch %d, shuffle %v, drop last %v", d.l.Info().Name, s.Len, d.l.Shape(), s.BatchSize, s.Shuffle, s.DropLast)
}

func (d loaderData) Normalization() (mean, std []float32) { return d.l.Normalization() }

func (d loaderData) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		if d.l.Target() != loaders.Class(d.l.Info().NumClasses) {
			yield(Batch{}, fmt.Errorf("train: %w: the loader's batches carry %T targets; the models take class ids (loaders.Class)", ErrConfig, d.l.Target()))
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
				Labels:  kernels.I32{Buf: b.Labels, Len: b.N},
				N:       b.N,
				Shape:   s,
				Indices: b.Indices,
				Release: b.Release,
			}
			if !yield(tb, nil) {
				return
			}
		}
	}
}
