package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
)

// benchResult is the --json line of stoke bench; the field names are a contract.
type benchResult struct {
	Data          string  `json:"data"`
	Device        string  `json:"device"`
	Workers       int     `json:"workers"`
	Batch         int     `json:"batch"`
	Epochs        int     `json:"epochs"`
	Images        int64   `json:"images"`
	Seconds       float64 `json:"seconds"`
	ImagesPerS    float64 `json:"images_per_s"`
	Skipped       int64   `json:"skipped"`
	H2DBytes      int64   `json:"h2d_bytes"`
	H2DSeconds    float64 `json:"h2d_seconds"`
	H2DGBps       float64 `json:"h2d_gbps"`
	StallFraction float64 `json:"stall_fraction"`
	Pinned        bool    `json:"pinned"`
	Rank          int     `json:"rank"`
	WorldSize     int     `json:"world_size"`
	Batches       int64   `json:"batches"` // timed batches yielded on this rank
	// CPUMsPerImage is the process's user+system CPU time over the timed epochs per image: every
	// thread's work (reading, decoding, augmenting, collating, copying, and on the cpu device
	// the normalization too).
	CPUMsPerImage float64 `json:"cpu_ms_per_image"`
	// HostCPUMsPerImage is the CPU time of the loader's host stages per image (loaders.Stats.HostCPU:
	// reading, decoding, augmenting, packing the copies), without the device's work, which
	// cpu_ms_per_image includes on the cpu device: the figure --decode device lowers.
	HostCPUMsPerImage float64 `json:"host_cpu_ms_per_image"`
	// With --decode device: the samples the device decoded, those that took the host path, and
	// the mean bytes over the bus of a device decoded sample's record (against the image's
	// channels*size*size bytes of pixels).
	DeviceDecoded       int64   `json:"device_decoded,omitempty"`
	HostPath            int64   `json:"host_path,omitempty"`
	RecordBytesPerImage float64 `json:"record_bytes_per_image,omitempty"`
}

func runBench(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("--data SPEC [--size S] [--batch B] [--workers W] [--epochs E] [--device D] [--on-error skip] [--json]", true)
	lf.register(fs, 64)
	lf.registerRanks(fs)
	lf.registerDecode(fs, "train")
	epochs := fs.Int("epochs", 1, "timed epochs")
	warmup := fs.Int("warmup", 0, "untimed epochs first (warms the page cache and the workers' scratch memory)")
	sampleLog := fs.String("sample-log", "",
		"write every sample this rank loaded to FILE, one line each: EPOCH BATCH INDEX (to check how ranks split the data)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	if *epochs < 1 || *warmup < 0 {
		return fmt.Errorf("%w: --epochs %d --warmup %d; want >= 1 and >= 0", errUsage, *epochs, *warmup)
	}
	dev, err := gpu.Open(lf.device)
	if err != nil {
		return err
	}
	defer dev.Close()
	stream, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer stream.Close()
	ops, err := kernels.For(dev)
	if err != nil {
		return err
	}
	ld, closer, err := lf.open(ctx, "train", true, dev, stream)
	if err != nil {
		return err
	}
	defer closer.Close()
	norm := &normalizer{dev: dev, ops: ops, stream: stream}
	defer norm.free()
	norm.mean, norm.std = ld.Normalization()

	var (
		start   time.Time
		cpu0    time.Duration
		before  loaders.Stats
		images  int64
		batches int64
		log     *bufio.Writer
	)
	if *sampleLog != "" {
		f, err := os.Create(*sampleLog)
		if err != nil {
			return err
		}
		defer f.Close()
		log = bufio.NewWriter(f)
	}
	for epoch := range *warmup + *epochs {
		if epoch == *warmup {
			if err := stream.Synchronize(ctx); err != nil {
				return err
			}
			start, cpu0, before = time.Now(), cpuNow(), ld.Stats()
		}
		desc := fmt.Sprintf("epoch %d/%d", epoch+1-*warmup, *epochs)
		if epoch < *warmup {
			desc = fmt.Sprintf("warm-up %d/%d", epoch+1, *warmup)
		}
		bar := progress.New(e.stderr, e.progressMode(), desc, "batch", int64(ld.BatchesPerEpoch()))
		for b, err := range ld.Epoch(ctx, epoch) {
			if err != nil {
				bar.Finish()
				return err
			}
			if err := norm.apply(b); err != nil {
				bar.Finish()
				return err
			}
			if epoch >= *warmup {
				images += int64(b.N)
				batches++
			}
			if log != nil {
				for _, i := range b.Indices {
					fmt.Fprintln(log, epoch, b.Seq, i)
				}
			}
			b.Release()
			bar.Add(1)
		}
		if err := stream.Synchronize(ctx); err != nil {
			bar.Finish()
			return err
		}
		bar.Finish()
	}
	if log != nil {
		if err := log.Flush(); err != nil {
			return fmt.Errorf("--sample-log: %w", err)
		}
	}
	secs := time.Since(start).Seconds()
	cpu := (cpuNow() - cpu0).Seconds()
	after := ld.Stats() // the epochs' iterators have returned: every copy is counted
	r := benchResult{
		Data: lf.data, Device: dev.Info().String(), Workers: lf.workers, Batch: lf.batch, Epochs: *epochs,
		Images: images, Seconds: secs, ImagesPerS: float64(images) / secs,
		Skipped:    after.Skipped - before.Skipped,
		H2DBytes:   after.CopyBytes - before.CopyBytes,
		H2DSeconds: (after.CopyTime - before.CopyTime).Seconds(),
		Pinned:     after.Pool.Pinned,
		Rank:       lf.rank, WorldSize: lf.worldSize, Batches: batches,
	}
	if images > 0 {
		r.CPUMsPerImage = cpu * 1e3 / float64(images)
		r.HostCPUMsPerImage = (after.HostCPU - before.HostCPU).Seconds() * 1e3 / float64(images)
	}
	r.DeviceDecoded, r.HostPath = after.DeviceDecoded-before.DeviceDecoded, after.HostPath-before.HostPath
	if r.DeviceDecoded > 0 {
		r.RecordBytesPerImage = float64(after.RecordBytes-before.RecordBytes) / float64(r.DeviceDecoded)
	}
	if r.H2DSeconds > 0 {
		r.H2DGBps = float64(r.H2DBytes) / r.H2DSeconds / 1e9
	}
	if el := after.Elapsed - before.Elapsed; el > 0 {
		r.StallFraction = float64(after.Wait-before.Wait) / float64(el)
	}
	e.printf("%d images in %.2f s: %.0f images/s, %.2f ms of CPU per image, %.2f of it the host's (%s, batch %d, workers %s)\n", r.Images, r.Seconds, r.ImagesPerS,
		r.CPUMsPerImage, r.HostCPUMsPerImage, r.Device, r.Batch, workersString(lf.workers))
	if r.DeviceDecoded+r.HostPath > 0 {
		e.printf("device decode: %d samples decoded on the device (records of %.1f KB on average), %d on the host\n",
			r.DeviceDecoded, r.RecordBytesPerImage/1e3, r.HostPath)
	}
	e.printf("host to device: %.1f MB in %.3f s of copy time (%.2f GB/s), consumer stalled %.1f%% of the time\n",
		float64(r.H2DBytes)/1e6, r.H2DSeconds, r.H2DGBps, 100*r.StallFraction)
	if !r.Pinned {
		e.printf("host slots are not pinned: %s\n", after.Pool.Reason)
	}
	lf.reportSkipped(e, r.Skipped, after.LastSkipped)
	return e.emit(r)
}

func workersString(n int) string {
	if n == 0 {
		return "one per core"
	}
	return fmt.Sprint(n)
}

// normalizer turns each uint8 batch into float32 on the device, the step every consumer runs first,
// so that the benchmark includes it.
type normalizer struct {
	dev       gpu.Device
	ops       kernels.Ops
	stream    gpu.Stream
	mean, std []float32
	out       gpu.Buffer
}

func (n *normalizer) apply(b *loaders.Batch) error {
	elems := b.N * b.Shape.C * b.Shape.H * b.Shape.W
	if n.out == nil || n.out.Len() < 4*elems {
		n.free()
		buf, err := n.dev.Alloc(4 * elems)
		if err != nil {
			return err
		}
		n.out = buf
	}
	dst := kernels.Float32s(n.out).Slice(0, elems)
	src := kernels.Bytes(b.Images).Slice(0, elems)
	return n.ops.NormalizeU8(n.stream, dst, src, b.Shape.C, b.Shape.H*b.Shape.W, n.mean, n.std)
}

// free releases the float buffer once the stream has finished with it.
func (n *normalizer) free() {
	if n.out != nil {
		_ = n.stream.Synchronize(context.Background())
		n.out.Free()
		n.out = nil
	}
}

// cpuNow is the process's user+system CPU time (all threads): on a shared machine, CPU time per
// image is a steadier figure than images/s. Where the system does not report it, it reads 0 and
// so does cpu_ms_per_image.
func cpuNow() time.Duration {
	d, _ := cputime.Process()
	return d
}
