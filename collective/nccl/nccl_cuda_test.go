//go:build cuda

package nccl

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
)

// The stand-in driver's device (scripts/cuda-sim.sh): one device that every rank's process may
// open, which NCCL on a GPU does not allow (one rank per GPU).
const standIn = "Stoke CUDA stand-in (CPU)"

// openCUDA opens cuda:index or skips: these tests run against the stand-in (scripts/cuda-sim.sh)
// or on a GPU host, and skip where there is no CUDA device.
func openCUDA(t testing.TB, index int) gpu.Device {
	t.Helper()
	d, err := gpu.Open(fmt.Sprintf("cuda:%d", index))
	if err != nil {
		t.Skipf("no CUDA device %d: %v", index, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
	})
	return d
}

// fileBootstrap broadcasts through a file of a directory that every rank (process) sees: the
// root writes it whole (rename), the others poll for it.
type fileBootstrap struct {
	rank, size int
	dir        string
}

var _ bootstrap = fileBootstrap{}

func (b fileBootstrap) Rank() int { return b.rank }
func (b fileBootstrap) Size() int { return b.size }

func (b fileBootstrap) Broadcast(ctx context.Context, buf []byte, root int) error {
	path := filepath.Join(b.dir, fmt.Sprintf("broadcast-from-%d", root))
	if b.rank == root {
		if err := os.WriteFile(path+".tmp", buf, 0o600); err != nil {
			return err
		}
		return os.Rename(path+".tmp", path)
	}
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			if len(data) != len(buf) {
				return fmt.Errorf("broadcast of %d bytes, got %d", len(buf), len(data))
			}
			copy(buf, data)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// streamAndBuffer makes a stream and an n-byte buffer on dev, closed and freed at the end of the
// test (before the device: cleanups run last first).
func streamAndBuffer(t *testing.T, dev gpu.Device, n int) (gpu.Stream, gpu.Buffer) {
	t.Helper()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := buf.Free(); err != nil {
			t.Errorf("Free() = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("stream Close() = %v", err)
		}
	})
	return s, buf
}

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

type reduceCase struct {
	dtype DType
	op    collective.Op
	count int
}

func (c reduceCase) String() string {
	return fmt.Sprintf("%v/%s/%d", c.dtype, map[collective.Op]string{collective.Sum: "sum", collective.Avg: "avg"}[c.op], c.count)
}

func reduceCases() []reduceCase {
	var cs []reduceCase
	for _, dt := range []DType{Float32, BFloat16, Float16} {
		for _, op := range []collective.Op{collective.Sum, collective.Avg} {
			for _, n := range []int{0, 1, 1001, 1<<20 + 3} {
				cs = append(cs, reduceCase{dt, op, n})
			}
		}
	}
	return cs
}

// input is rank r's element i. Elements 0 and 1 of every 16 are nonzero on ranks 0 and 1 only and
// their sum is a tie of the type (float32: 2^24 + 1 and 2^24 + 3; bfloat16: 257 and 259; float16:
// 2049 and 2051), so that round-to-nearest-even gives 2^24, 2^24 + 4 (256, 260; 2048, 2052),
// whatever order NCCL adds in; the others are integers in [-16, 16], whose sums and means over 4
// ranks are exact.
func input(dt DType, r, i int) float64 {
	big, step := 256.0, 2.0
	switch dt {
	case Float32:
		big = 1 << 24
	case Float16:
		big = 2048
	}
	switch i % 16 {
	case 0, 1:
		switch r {
		case 0:
			return big + float64(i%16)*step
		case 1:
			return 1
		}
		return 0
	}
	return float64((i*7+r*13)%33 - 16)
}

// want is the exactly rounded result of case c over size ranks at element i.
func want(c reduceCase, size, i int) float64 {
	var s float64
	for r := range size {
		s += input(c.dtype, r, i)
	}
	if c.op == collective.Avg {
		s /= float64(size)
	}
	return round(c.dtype, s)
}

func round(dt DType, v float64) float64 {
	f := float32(v) // exact, or round to nearest even
	switch dt {
	case BFloat16:
		return float64(collective.BF16ToF32(collective.F32ToBF16(f)))
	case Float16:
		return float64(collective.FP16ToF32(collective.F32ToFP16(f)))
	}
	return float64(f)
}

func encode(dt DType, vals []float64) []byte {
	b := make([]byte, len(vals)*dt.size())
	for i, v := range vals {
		switch dt {
		case BFloat16:
			binary.LittleEndian.PutUint16(b[2*i:], collective.F32ToBF16(float32(v)))
		case Float16:
			binary.LittleEndian.PutUint16(b[2*i:], collective.F32ToFP16(float32(v)))
		default:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		}
	}
	return b
}

func decode(dt DType, b []byte, i int) float64 {
	switch dt {
	case BFloat16:
		return float64(collective.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case Float16:
		return float64(collective.FP16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
}

// runCases all-reduces every case on c, each in a buffer with one guard element either side,
// checks the result against want and the guards, and returns one line per case: the case and
// the SHA-256 of its result bytes.
func runCases(t *testing.T, c *Comm, dev gpu.Device, rank, size int) []string {
	t.Helper()
	ctx := context.Background()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var lines []string
	for _, rc := range reduceCases() {
		es := rc.dtype.size()
		vals := make([]float64, rc.count)
		for i := range vals {
			vals[i] = input(rc.dtype, rank, i)
		}
		guard := []byte{0x5a, 0xa5, 0x5a, 0xa5}[:es]
		host := append(append(append([]byte{}, guard...), encode(rc.dtype, vals)...), guard...)
		buf, err := dev.Alloc(len(host))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, len(host))
		if err := s.CopyH2D(buf, 0, host); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(s, buf, es, rc.count, rc.dtype, rc.op); err != nil {
			t.Fatalf("%v: AllReduce = %v", rc, err)
		}
		if err := s.CopyD2H(out, buf, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.Synchronize(ctx, s); err != nil {
			t.Fatalf("%v: Synchronize = %v", rc, err)
		}
		if err := buf.Free(); err != nil {
			t.Fatal(err)
		}
		if string(out[:es]) != string(guard) || string(out[len(out)-es:]) != string(guard) {
			t.Errorf("%v: the elements before and after the range = % x, % x; want % x untouched", rc, out[:es], out[len(out)-es:], guard)
		}
		res := out[es : len(out)-es]
		bad := 0
		for i := range rc.count {
			if got, w := decode(rc.dtype, res, i), want(rc, size, i); got != w {
				if bad++; bad <= 3 {
					t.Errorf("%v: rank %d of %d: element %d = %v; want %v", rc, rank, size, i, got, w)
				}
			}
		}
		lines = append(lines, fmt.Sprintf("%v %x", rc, sha256.Sum256(res)))
	}
	return lines
}

// TestNCCLOneRank is the 1-rank communicator (what scripts/gpu-check.sh runs on a GPU): NCCL's
// all-reduce of one rank is its input, rounded like the others, through the whole API.
func TestNCCLOneRank(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the device's Close (cleanups run last first)
	dev := openCUDA(t, 0)
	c, err := New(context.Background(), fileBootstrap{0, 1, t.TempDir()}, dev)
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, c, dev, 0, 1)
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v; want nil", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}

// TestNCCLArgs checks the arguments AllReduce refuses before NCCL sees them.
func TestNCCLArgs(t *testing.T) {
	dev := openCUDA(t, 0)
	c, err := New(context.Background(), fileBootstrap{0, 1, t.TempDir()}, dev)
	if err != nil {
		t.Fatal(err)
	}
	s, buf := streamAndBuffer(t, dev, 64)
	cpu, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	cpuBuf, _ := cpu.Alloc(64)
	cpuStream, _ := cpu.NewStream()
	defer cpuStream.Close()
	for _, tc := range []struct {
		name        string
		s           gpu.Stream
		b           gpu.Buffer
		off, n      int
		dt          DType
		op          collective.Op
		is, contain string
	}{
		{"past the end", s, buf, 0, 17, Float32, collective.Sum, "", "out of range"},
		{"offset past the end", s, buf, 68, 0, Float32, collective.Sum, "", "out of range"},
		{"negative count", s, buf, 0, -1, Float32, collective.Sum, "", "out of range"},
		{"misaligned", s, buf, 2, 1, Float32, collective.Sum, "", "misaligned"},
		{"bf16 past the end", s, buf, 2, 32, BFloat16, collective.Avg, "", "out of range"},
		{"unknown type", s, buf, 0, 1, DType(9), collective.Sum, "", "unknown type"},
		{"unknown op", s, buf, 0, 1, Float32, collective.Op(7), "", "unknown operation"},
		{"cpu buffer", s, cpuBuf, 0, 1, Float32, collective.Sum, "foreign", ""},
		{"cpu stream", cpuStream, buf, 0, 1, Float32, collective.Sum, "foreign", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.AllReduce(tc.s, tc.b, tc.off, tc.n, tc.dt, tc.op)
			if err == nil || (tc.is == "foreign" && !errors.Is(err, gpu.ErrForeign)) || !strings.Contains(err.Error(), tc.contain) {
				t.Errorf("AllReduce(off %d, count %d, %v, %d) = %v; want an error (%s%s)", tc.off, tc.n, tc.dt, tc.op, err, tc.is, tc.contain)
			}
		})
	}
	if err := c.AllReduce(s, buf, 64, 0, Float32, collective.Sum); err != nil {
		t.Errorf("AllReduce(count 0 at the end) = %v; want nil", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(s, buf, 0, 1, Float32, collective.Sum); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("AllReduce after Close = %v; want gpu.ErrClosed", err)
	}
	if _, err := New(context.Background(), fileBootstrap{2, 2, t.TempDir()}, dev); err == nil {
		t.Errorf("New(rank 2 of 2) = nil error; want one")
	}
	if _, err := New(context.Background(), fileBootstrap{0, 1, t.TempDir()}, cpu); !errors.Is(err, gpu.ErrForeign) {
		t.Errorf("New(cpu device) = %v; want gpu.ErrForeign", err)
	}
}

// The helper process: the parent test starts one per rank with this variable set to
// "mode rank size dir", and TestNCCLRank does that rank's part.
const helperVar = "STOKE_NCCL_HELPER"

// TestNCCLRank is one rank of a multi-process test; it skips unless started by runRanks.
func TestNCCLRank(t *testing.T) {
	spec := os.Getenv(helperVar)
	if spec == "" {
		t.Skip("one rank of TestNCCLRanks and TestNCCLFailures, started by them")
	}
	f := strings.Fields(spec)
	mode, dir := f[0], f[3]
	rank, _ := strconv.Atoi(f[1])
	size, _ := strconv.Atoi(f[2])
	index := rank
	if os.Getenv("STOKE_NCCL_SHARED_DEVICE") == "1" {
		index = 0
	}
	dev := openCUDA(t, index)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The all-reduces bootstrap through the real process group (the id through its TCPStore);
	// the failures through a file, which also orders their ranks.
	var b bootstrap = fileBootstrap{rank, size, dir}
	if mode == "reduce" {
		port, _ := strconv.Atoi(os.Getenv("STOKE_NCCL_PORT"))
		g, err := collective.Init(ctx, collective.Config{Rank: rank, WorldSize: size, Port: port, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := g.Close(); err != nil {
				t.Errorf("group Close() = %v; want nil", err)
			}
		}()
		b = g
	}
	c, err := New(ctx, b, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
	}()
	switch mode {
	case "reduce":
		lines := runCases(t, c, dev, rank, size)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("result-%d", rank)), []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	case "mismatch", "late", "deadline":
		failures(t, ctx, mode, c, dev, rank, dir)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// failures is one rank's part of a collective that cannot complete:
//   - mismatch: rank r all-reduces 5+r elements: every rank gets NCCL's invalid usage;
//   - late: rank 1 joins only after rank 0 has failed, which the stand-in reports after
//     NCCLSIM_TIMEOUT (1 s) instead of hanging as NCCL does, as a remote error;
//   - deadline: the same, but rank 0's Synchronize gives up first, at its context's deadline, and
//     aborts the communicator.
//
// In every mode each rank's Synchronize returns an error, the communicator is aborted (later
// AllReduce calls give gpu.ErrClosed) and Close returns nil.
func failures(t *testing.T, ctx context.Context, mode string, c *Comm, dev gpu.Device, rank int, dir string) {
	s, buf := streamAndBuffer(t, dev, 64)
	count, wait := 4, ctx
	if mode == "mismatch" {
		count += rank
	}
	failed := filepath.Join(dir, "rank0-failed")
	if mode != "mismatch" && rank == 1 {
		if err := waitFile(ctx, failed); err != nil {
			t.Fatal(err)
		}
	}
	if mode == "deadline" && rank == 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
	}
	if err := c.AllReduce(s, buf, 0, count, Float32, collective.Sum); err != nil {
		t.Fatalf("AllReduce = %v; want nil (the failure comes later)", err)
	}
	err := c.Synchronize(wait, s)
	if rank == 0 {
		if werr := os.WriteFile(failed, nil, 0o600); werr != nil {
			t.Fatal(werr)
		}
	}
	switch {
	case err == nil:
		t.Fatalf("%s: rank %d: Synchronize = nil; want an error", mode, rank)
	case mode == "mismatch" && !strings.Contains(err.Error(), "invalid usage"):
		t.Errorf("mismatch: rank %d: Synchronize = %v; want NCCL's invalid usage", rank, err)
	case mode == "deadline" && rank == 0 && !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("deadline: Synchronize = %v; want context.DeadlineExceeded", err)
	case (mode == "late" || rank == 1) && mode != "mismatch" && !strings.Contains(err.Error(), "remote process exited"):
		t.Errorf("%s: rank %d: Synchronize = %v; want NCCL's remote error", mode, rank, err)
	}
	t.Logf("%s: rank %d: %v", mode, rank, err)
	if err := c.AllReduce(s, buf, 0, count, Float32, collective.Sum); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("%s: rank %d: AllReduce after the failure = %v; want gpu.ErrClosed (aborted)", mode, rank, err)
	}
}

// runRanks runs size processes of this test binary, one per rank, in mode, with env added, and
// returns their shared directory; it fails the test with a rank's output when one fails.
func runRanks(t *testing.T, mode string, size int, env ...string) string {
	t.Helper()
	dev := openCUDA(t, 0)
	shared := dev.Info().Name == standIn
	if !shared {
		last, err := gpu.Open(fmt.Sprintf("cuda:%d", size-1))
		if err != nil {
			t.Skipf("%d ranks need %d GPUs (NCCL: one rank per GPU): %v", size, size, err)
		}
		if err := last.Close(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the group's store
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, size)
	outs := make([]*strings.Builder, size)
	for r := range size {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNCCLRank$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %s", helperVar, mode, r, size, dir), fmt.Sprintf("STOKE_NCCL_PORT=%d", port))
		if shared {
			cmd.Env = append(cmd.Env, "STOKE_NCCL_SHARED_DEVICE=1")
		}
		cmd.Env = append(cmd.Env, env...)
		outs[r] = new(strings.Builder)
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		err := cmd.Wait()
		if err != nil || !strings.Contains(outs[r].String(), "--- PASS: TestNCCLRank") {
			t.Errorf("%s: rank %d of %d: %v\n%s", mode, r, size, err, outs[r])
		} else if testing.Verbose() {
			for _, l := range strings.Split(outs[r].String(), "\n") {
				if strings.Contains(l, "nccl_cuda_test.go") || strings.HasPrefix(l, "ncclsim:") {
					t.Logf("rank %d: %s", r, strings.TrimSpace(l))
				}
			}
		}
	}
	return dir
}

// TestNCCLRanks all-reduces every case (float32 and bfloat16, sum and mean, 0, 1, 1001 and 2^20+3
// elements, in the middle of a buffer) among 2 and 4 ranks, each a process, the unique id passed
// through a collective.Group's store: every rank's result equals the exactly rounded reference
// (runCases) and all ranks' result bytes are identical.
func TestNCCLRanks(t *testing.T) {
	for _, size := range []int{2, 4} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := runRanks(t, "reduce", size)
			if t.Failed() {
				return
			}
			first, err := os.ReadFile(filepath.Join(dir, "result-0"))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(first), "\n") + 1; n != len(reduceCases()) {
				t.Fatalf("rank 0 reported %d cases; want %d", n, len(reduceCases()))
			}
			for r := 1; r < size; r++ {
				got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("result-%d", r)))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(first) {
					t.Errorf("rank %d's results differ from rank 0's:\n%s\nrank 0:\n%s", r, got, first)
				}
			}
		})
	}
}

// TestNCCLFailures: collectives that cannot complete end in an error on every rank instead of a
// hang, and leave the communicators abortable (see failures).
func TestNCCLFailures(t *testing.T) {
	for _, tc := range []struct {
		mode string
		env  []string
	}{
		{"mismatch", nil},
		{"late", []string{"NCCLSIM_TIMEOUT=1"}},
		{"deadline", nil},
	} {
		t.Run(tc.mode, func(t *testing.T) { runRanks(t, tc.mode, 2, tc.env...) })
	}
}
