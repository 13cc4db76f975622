package cli

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/pinned"
)

// allreduceRow is one size of stoke allreduce --json; the field names are a contract.
type allreduceRow struct {
	Bytes     int64   `json:"bytes"`
	Count     int64   `json:"count"`
	Dtype     string  `json:"dtype"`
	Op        string  `json:"op"`
	TimeUs    float64 `json:"time_us"`
	AlgBWGBps float64 `json:"algbw_gbps"`
	BusBWGBps float64 `json:"busbw_gbps"`
	Errors    int64   `json:"errors"`
}

// allreduceResult is the --json line of stoke allreduce.
type allreduceResult struct {
	Rank      int            `json:"rank"`
	WorldSize int            `json:"world_size"`
	Dtype     string         `json:"dtype"`
	Op        string         `json:"op"`
	Iters     int            `json:"iters"`
	Warmup    int            `json:"warmup"`
	Rows      []allreduceRow `json:"rows"`
	Errors    int64          `json:"errors"`
}

type bytesValue struct{ v *int64 }

func (b bytesValue) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b bytesValue) Set(s string) error {
	v, err := parseBytes(s)
	if err != nil {
		return fmt.Errorf("%q: want a size such as 4096, 4K, 256M or 1G", s)
	}
	*b.v = v
	return nil
}

func runAllreduce(ctx context.Context, e *env, args []string) error {
	fs := e.flags("--min-bytes 4K --max-bytes 256M [--step-factor 2] [--iters N] [--warmup N] [--op sum|avg] [--dtype float32|bf16|fp16] [--json]", true)
	cfg, envErr := collective.FromEnv()
	if envErr != nil {
		cfg = collective.Config{WorldSize: 1, Secret: os.Getenv(collective.SecretEnv)}
	}
	cfg.Log = log.New(e.stderr, "stoke allreduce: ", 0)
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 29500
	}
	minBytes, maxBytes := int64(4<<10), int64(256<<20)
	fs.Var(bytesValue{&minBytes}, "min-bytes", "smallest message, in bytes (suffixes K, M, G: binary)")
	fs.Var(bytesValue{&maxBytes}, "max-bytes", "largest message, in bytes")
	step := fs.Int("step-factor", 2, "multiply the size by this from one row to the next")
	iters := fs.Int("iters", 20, "timed all-reduces per size")
	warmup := fs.Int("warmup", 5, "untimed all-reduces per size before the timed ones")
	opName := fs.String("op", "sum", "reduction: sum or avg")
	dtype := fs.String("dtype", "float32", "element type: float32, bf16 or fp16")
	timeout := fs.Duration("dist-timeout", 5*time.Minute, "bound on the rendezvous and on each all-reduce (as stoke train's --dist-timeout)")
	fs.IntVar(&cfg.Rank, "rank", cfg.Rank, "this process's rank (default: $RANK or $SLURM_PROCID)")
	fs.IntVar(&cfg.WorldSize, "world-size", cfg.WorldSize, "number of processes (default: $WORLD_SIZE or $SLURM_NTASKS)")
	fs.StringVar(&cfg.Addr, "master-addr", cfg.Addr,
		"host of the store; rank 0's listens on this address only (default: $MASTER_ADDR). Set the same $STOKE_SECRET on every rank to authenticate the job")
	fs.IntVar(&cfg.Port, "master-port", cfg.Port, "port of the store (default: $MASTER_PORT)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if envErr != nil && !(set["rank"] && set["world-size"]) {
		return fmt.Errorf("%w: %v", errUsage, envErr)
	}
	var op collective.Op
	switch *opName {
	case "sum":
		op = collective.Sum
	case "avg":
		op = collective.Avg
	default:
		return fmt.Errorf("%w: --op %q: want sum or avg", errUsage, *opName)
	}
	es := int64(4)
	round, widen := collective.F32ToBF16, collective.BF16ToF32 // a 16-bit --dtype's conversions
	switch *dtype {
	case "float32":
	case "bf16":
		es = 2
	case "fp16":
		es, round, widen = 2, collective.F32ToFP16, collective.FP16ToF32
	default:
		return fmt.Errorf("%w: --dtype %q: want float32, bf16 or fp16", errUsage, *dtype)
	}
	switch {
	case minBytes < es || maxBytes < minBytes:
		return fmt.Errorf("%w: --min-bytes %d, --max-bytes %d: want %d <= min <= max", errUsage, minBytes, maxBytes, es)
	case *step < 2:
		return fmt.Errorf("%w: --step-factor %d: want at least 2", errUsage, *step)
	case *iters < 1 || *warmup < 0:
		return fmt.Errorf("%w: --iters %d, --warmup %d: want iters >= 1 and warmup >= 0", errUsage, *iters, *warmup)
	case *timeout <= 0:
		return fmt.Errorf("%w: --dist-timeout %v: want more than 0", errUsage, *timeout)
	}
	// The buffer is allocated whole up front: bound it as --memory bounds the loader, by a quarter
	// of the memory this process may use.
	if budget := pinned.SystemMemory() / 4; budget > 0 && maxBytes > budget {
		return fmt.Errorf("%w: --max-bytes %d: over a quarter of this machine's memory (%d bytes)", errUsage, maxBytes, budget)
	}
	cfg.Timeout = *timeout
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	g, err := collective.Init(ctx, cfg)
	if err != nil {
		return err
	}
	defer g.Close()

	// A rank with other flags would time or check other sizes, or exit 0
	// early: every rank fails, naming the flag and both values.
	for _, f := range []struct{ name, value string }{
		{"dtype", *dtype}, {"op", *opName}, {"min-bytes", strconv.FormatInt(minBytes, 10)},
		{"max-bytes", strconv.FormatInt(maxBytes, 10)}, {"step-factor", strconv.Itoa(*step)},
		{"iters", strconv.Itoa(*iters)}, {"warmup", strconv.Itoa(*warmup)},
	} {
		if err := g.Agree(ctx, "--"+f.name, f.value); err != nil {
			return err
		}
	}
	res := allreduceResult{Rank: g.Rank(), WorldSize: g.Size(), Dtype: *dtype, Op: *opName, Iters: *iters, Warmup: *warmup}
	if g.Rank() == 0 {
		e.printf("# stoke allreduce: %d ranks, %s, op %s, %d iters after %d warm-up\n", g.Size(), *dtype, *opName, *iters, *warmup)
		e.printf("%12s %12s %8s %6s %12s %10s %10s %7s\n", "bytes", "count", "dtype", "op", "time(us)", "algbw", "busbw", "#wrong")
	}
	n := g.Size()
	maxCount := maxBytes / es
	f32 := make([]float32, 0)
	b16 := make([]uint16, 0)
	if es == 4 {
		f32 = make([]float32, maxCount)
	} else {
		b16 = make([]uint16, maxCount)
	}
	reduce := func(count int64) error {
		switch *dtype {
		case "bf16":
			return g.AllReduceBF16(ctx, b16[:count], op)
		case "fp16":
			return g.AllReduceFP16(ctx, b16[:count], op)
		}
		return g.AllReduce(ctx, f32[:count], op)
	}
	for size := minBytes; size <= maxBytes; size *= int64(*step) {
		count := size / es
		// Check once: a known pattern, compared after the reduction.
		rowErrors, err := checkAllreduce(ctx, g, f32, b16, count, op, reduce, round, widen)
		if err != nil {
			return err
		}
		for range *warmup {
			if err := reduce(count); err != nil {
				return err
			}
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		start := time.Now()
		for range *iters {
			if err := reduce(count); err != nil {
				return err
			}
		}
		us := float64(time.Since(start).Nanoseconds()) / 1e3 / float64(*iters)
		algbw := float64(count*es) / (us * 1e3) // bytes per ns = GB/s
		row := allreduceRow{Bytes: count * es, Count: count, Dtype: *dtype, Op: *opName, TimeUs: us,
			AlgBWGBps: algbw, BusBWGBps: algbw * 2 * float64(n-1) / float64(n), Errors: rowErrors}
		res.Rows = append(res.Rows, row)
		res.Errors += rowErrors
		if g.Rank() == 0 {
			e.printf("%12d %12d %8s %6s %12.1f %10.3f %10.3f %7d\n", row.Bytes, row.Count, row.Dtype, row.Op, row.TimeUs, row.AlgBWGBps, row.BusBWGBps, row.Errors)
		}
		if size > maxBytes/int64(*step) {
			break
		}
	}
	if g.Rank() == 0 {
		e.printf("# errors: %d\n", res.Errors)
	}
	if err := g.Close(); err != nil {
		return err
	}
	if err := e.emit(res); err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d elements differ from the expected result", res.Errors)
	}
	return nil
}

// checkAllreduce fills the first count elements with rank r's pattern (r+1)*(i%3+1), reduces
// them and counts the elements that differ from the exact result (rounded by round and widened
// back by widen, for 16-bit elements).
func checkAllreduce(ctx context.Context, g *collective.Group, f32 []float32, b16 []uint16, count int64, op collective.Op, reduce func(int64) error,
	round func(float32) uint16, widen func(uint16) float32) (int64, error) {
	n := g.Size()
	v := func(i int64) float32 { return float32(i%3 + 1) }
	for i := range count {
		x := float32(g.Rank()+1) * v(i)
		if f32 != nil && len(f32) > 0 {
			f32[i] = x
		} else {
			b16[i] = round(x)
		}
	}
	if err := reduce(count); err != nil {
		return 0, err
	}
	scale := float32(n*(n+1)) / 2
	if op == collective.Avg {
		scale /= float32(n)
	}
	var wrong int64
	for i := range count {
		want := scale * v(i)
		var got float32
		if len(f32) > 0 {
			got = f32[i]
		} else {
			got, want = widen(b16[i]), widen(round(want))
		}
		if got != want {
			wrong++
		}
	}
	return wrong, nil
}
