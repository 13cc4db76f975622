package loaders

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/transforms"
)

// A Loader whose transform decodes with transforms.DeviceDecode splits each JPEG sample between
// the host and the device. A transform worker entropy-decodes it into a record
// (transforms.Worker.ApplyCoefficients) in the sample's place in the slot; a sample the device
// cannot take (transforms.ErrHostPath: another format, pixel steps, CMYK, a record longer than
// the pixels or needing more scratch than the device reserved for it) gets Apply's pixels there
// instead. The copy stage packs the places' bytes one after the other, so that only those cross
// the bus, with a table of each sample's offset and kind; on the device, the Loader's decode
// stream waits for the copy and runs kernels' RenderRecords, which renders the records and copies
// the pixels into the batch's images: Apply's pixels, byte for byte, whichever path a sample
// took. The consumer sees Batch.Images as with any Loader.
//
// The device memory is fixed when the Loader opens: per buffer set the batch's images besides
// the records, and one scratch for the decode stream of deviceScratch bytes a sample, counted in
// Config.MemoryBudget.

// Kinds of a sample in a device-decode batch (RenderRecords' offsets table).
const (
	kindPixels = 0
	kindRecord = 1
)

// deviceDecode is what a DeviceDecode Loader holds on the device besides the feeder.
type deviceDecode struct {
	ops kernels.Ops
	s   gpu.Stream // the decode stream: RenderRecords after each batch's copy
	ws  gpu.Buffer // RenderRecords' scratch, per bytes a sample
	per int
}

// deviceScratch is the device scratch a sample of shape s may use (transforms.Worker's
// RecordScratch): three planes and their horizontal passes for a decoded region of up to twice
// the output and 64 samples along each axis. The decode's scale keeps a crop's region under
// twice the output unless the crop is 16 times the output or more (a photo of 3,600 px or more
// cropped whole into 224 px), whose sample then takes the host path.
func deviceScratch(s transforms.Shape) int {
	h, w := 2*s.H+64, 2*s.W+64
	return 3*h*w + 3*h*s.W
}

// deviceDecodes reports whether cfg's transform leaves its JPEG samples' pixel work to the
// device.
func deviceDecodes(cfg Config) bool {
	return cfg.Transform.DecodeMode() == transforms.DeviceDecode
}

// checkDeviceDecode refuses what a device decode cannot do: host steps over the batch's pixels,
// which are made on the device.
func checkDeviceDecode(name string, cfg Config) error {
	if !deviceDecodes(cfg) {
		return nil
	}
	switch {
	case cfg.Mix.Enabled():
		return fmt.Errorf("loaders: %s: MixUp and CutMix mix the batch's pixels on the host; with transforms.DeviceDecode they are made on the device: %w", name, ErrConfig)
	case cfg.Collate != nil:
		return fmt.Errorf("loaders: %s: Collate reads the batch's pixels on the host; with transforms.DeviceDecode they are made on the device: %w", name, ErrConfig)
	}
	return nil
}

// openDeviceDecode prepares the decode stream, the op set and the scratch.
func (l *Loader) openDeviceDecode() error {
	ops, err := kernels.For(l.dev)
	if err != nil {
		return fmt.Errorf("loaders: %s: device decode: %w", l.info.Name, err)
	}
	d := &deviceDecode{ops: ops, per: deviceScratch(l.shape)}
	if d.s, err = l.dev.NewStream(); err != nil {
		return fmt.Errorf("loaders: %s: device decode: %w", l.info.Name, err)
	}
	l.dd = d // free closes what exists
	if d.ws, err = l.dev.Alloc(l.cfg.Batch * d.per); err != nil {
		return fmt.Errorf("loaders: %s: device decode scratch: %w", l.info.Name, err)
	}
	return nil
}

// close releases the decode stream and the scratch, after the work on them.
func (d *deviceDecode) close() error {
	var errs []error
	if d.s != nil {
		// The renders of batches the consumer has not waited for still read the scratch.
		errs = append(errs, d.s.Synchronize(context.Background()), d.s.Close())
	}
	if d.ws != nil {
		errs = append(errs, d.ws.Free())
	}
	return errors.Join(errs...)
}

// applyDevice writes sample in's record into dst (the sample's place), or Apply's pixels where
// the device cannot take it, and returns the kind and the bytes written. A record leaves the
// place's last 3 bytes free, so that aligning its start (packDevice) never moves a sample past
// its place. Before Apply it reseeds the generator of the sample (index i of epoch), which
// ApplyCoefficients may have drawn from before it found the host path.
func (l *Loader) applyDevice(ws *workerState, dst []byte, in transforms.Input, epoch, i int) (kind, n int, err error) {
	n, err = ws.w.ApplyCoefficients(dst[:max(len(dst)-3, 0)], l.shape, in, ws.r.Rand)
	if err == nil {
		var need int
		if need, err = ws.w.RecordScratch(dst[:n]); err == nil && need <= l.dd.per {
			return kindRecord, n, nil
		}
		if err != nil {
			return 0, 0, err
		}
	} else if !errors.Is(err, transforms.ErrHostPath) {
		return 0, 0, err
	}
	ws.r.Reset(l.cfg.Seed, epoch, i)
	return kindPixels, len(dst), ws.w.Apply(dst, in, ws.r.Rand)
}

// packDevice moves the kept samples' bytes (rs, in batch order; the sample of rs[k] lies in place
// rs[k].pos) one after the other from the slot's start, each record at a multiple of 4, writes
// each one's offset and kind into the slot's table, and returns the bytes to copy. The k-th sample
// ends within place k (a record is at most a place less 3 bytes, its alignment's most), so that
// no sample is overwritten before it moves.
func (l *Loader) packDevice(mem []byte, rs []result) int {
	used := 0
	for k, r := range rs {
		if r.kind == kindRecord {
			used = (used + 3) &^ 3
		}
		copy(mem[used:], mem[r.pos*l.sample:r.pos*l.sample+r.n])
		t := mem[l.offOff+8*k:]
		binary.LittleEndian.PutUint32(t, uint32(used))
		binary.LittleEndian.PutUint32(t[4:], uint32(r.kind))
		used += r.n
	}
	return used
}

// render enqueues the batch's RenderRecords on the decode stream after its copies, into its
// images (buffer 3 of db), and returns the event the consumer waits for.
func (l *Loader) render(db *gpu.DeviceBatch, n int) (gpu.Event, error) {
	d, s := l.dd, l.shape
	if err := d.s.Wait(db.Ready); err != nil {
		return nil, err
	}
	dst := kernels.Bytes(db.Buffers[3]).Slice(0, n*l.sample)
	offs := kernels.I32{Buf: db.Buffers[1], Len: 2 * n}
	ws := kernels.Bytes(d.ws).Slice(0, n*d.per)
	if err := d.ops.RenderRecords(d.s, dst, kernels.Bytes(db.Buffers[0]), offs, ws, n, s.C, s.H, s.W); err != nil {
		return nil, err
	}
	return d.s.Record()
}
