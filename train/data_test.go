package train

import (
	"context"
	"iter"
	"math/rand/v2"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
)

// memData is an in-memory Data source for tests: it gathers each epoch's batches in (seed, epoch)
// order, uploads them at the start of the epoch and yields views.
type memData struct {
	dev     gpu.Device
	s       gpu.Stream
	images  []uint8
	labels  []int32
	shape   Shape
	batch   int
	shuffle bool
	seed    uint64
	mean    []float32
	buf     gpu.Buffer
	release int // Release calls seen
}

// synthetic makes n samples of 10 classes of 1x8x8 images: class c lights a 2x2 square at a
// position of its own, over uniform noise, so a small model learns it in an epoch or two.
func synthetic(n int, seed uint64) ([]uint8, []int32) {
	r := rand.New(rand.NewPCG(seed, 99))
	imgs := make([]uint8, n*64)
	labels := make([]int32, n)
	for i := range n {
		c := r.IntN(10)
		labels[i] = int32(c)
		img := imgs[i*64 : (i+1)*64]
		for j := range img {
			img[j] = uint8(r.IntN(100))
		}
		y, x := (c/5)*4+1, (c%5)+1
		for dy := range 2 {
			for dx := range 2 {
				img[(y+dy)*8+x+dx] = 200 + uint8(r.IntN(56))
			}
		}
	}
	return imgs, labels
}

func newMemData(dev gpu.Device, images []uint8, labels []int32, shape Shape, batch int, shuffle bool, seed uint64) *memData {
	s, err := dev.NewStream()
	if err != nil {
		panic(err)
	}
	return &memData{dev: dev, s: s, images: images, labels: labels, shape: shape, batch: batch, shuffle: shuffle, seed: seed, mean: []float32{0.3}}
}

func (d *memData) Steps() int { return (len(d.labels) + d.batch - 1) / d.batch }

func (d *memData) Normalization() (mean, std []float32) { return d.mean, []float32{0.3} }

func (d *memData) close() {
	if d.buf != nil {
		d.buf.Free()
	}
	d.s.Close()
}

func (d *memData) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		n, per := len(d.labels), d.shape.Len()
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		if d.shuffle {
			r := rng.Epoch(d.seed, epoch)
			r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		host := make([]byte, n*per+4*n)
		for k, i := range order {
			copy(host[k*per:], d.images[i*per:(i+1)*per])
			*(*int32)(unsafe.Pointer(&host[n*per+4*k])) = d.labels[i]
		}
		// Every earlier batch's work has completed: the trainer synchronizes after each step and
		// each evaluation, so the old buffer can go.
		var err error
		if d.buf, err = uploadEpoch(ctx, d.dev, d.s, d.buf, host); err != nil {
			yield(Batch{}, err)
			return
		}
		for lo := 0; lo < n; lo += d.batch {
			hi := min(lo+d.batch, n)
			b := Batch{
				Images:  kernels.U8{Buf: d.buf, Off: lo * per, Len: (hi - lo) * per},
				Labels:  kernels.I32{Buf: d.buf, Off: n*per/4 + lo, Len: hi - lo},
				N:       hi - lo,
				Shape:   d.shape,
				Release: func() { d.release++ },
			}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// uploadEpoch frees old (nil for none) and returns a device buffer holding host, copied through s.
func uploadEpoch(ctx context.Context, dev gpu.Device, s gpu.Stream, old gpu.Buffer, host []byte) (gpu.Buffer, error) {
	if old != nil {
		old.Free()
	}
	buf, err := dev.Alloc(len(host))
	if err != nil {
		return nil, err
	}
	if err := s.CopyH2D(buf, 0, host); err != nil {
		return buf, err
	}
	return buf, s.Synchronize(ctx)
}
