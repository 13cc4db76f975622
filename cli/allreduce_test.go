package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/internal/pyoracle"
)

// TestAllreduceCommand runs stoke allreduce as two processes on 127.0.0.1 and
// reads both ranks' --json lines: every size is there, checked and correct.
func TestAllreduceCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command")
	}
	bin := buildStoke(t)
	for _, tc := range []struct{ dtype, op string }{{"float32", "sum"}, {"bf16", "avg"}, {"fp16", "sum"}} {
		t.Run(tc.dtype+"-"+tc.op, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			outs := make([]bytes.Buffer, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(bin, "allreduce", "--rank", fmt.Sprint(r), "--world-size", "2",
						"--master-addr", "127.0.0.1", "--master-port", fmt.Sprint(port), "--dist-timeout", "20s",
						"--min-bytes", "4K", "--max-bytes", "1M", "--step-factor", "4", "--iters", "2", "--warmup", "1",
						"--dtype", tc.dtype, "--op", tc.op, "--json")
					cmd.Stdout = &outs[r]
					cmd.Stderr = &outs[r]
					errs[r] = cmd.Run()
				}()
			}
			wg.Wait()
			for r := range 2 {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v\n%s", r, errs[r], outs[r].String())
				}
				lines := strings.Split(strings.TrimSpace(outs[r].String()), "\n")
				var res allreduceResult
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
					t.Fatalf("rank %d: last line %q: %v", r, lines[len(lines)-1], err)
				}
				if res.Rank != r || res.WorldSize != 2 || res.Errors != 0 || res.Dtype != tc.dtype || res.Op != tc.op {
					t.Errorf("rank %d: result %+v; want rank %d of 2, %s %s, no errors", r, res, r, tc.dtype, tc.op)
				}
				var sizes []int64
				for _, row := range res.Rows {
					sizes = append(sizes, row.Bytes)
					es := int64(4)
					if tc.dtype != "float32" {
						es = 2
					}
					if row.Count*es != row.Bytes || row.TimeUs <= 0 || row.BusBWGBps != row.AlgBWGBps || row.Errors != 0 {
						t.Errorf("rank %d: row %+v; want count*%d = bytes, a time, busbw = algbw for 2 ranks, no errors", r, row, es)
					}
				}
				if fmt.Sprint(sizes) != "[4096 16384 65536 262144 1048576]" {
					t.Errorf("rank %d: sizes %v; want 4K to 1M by 4", r, sizes)
				}
				if r == 0 && !strings.Contains(outs[r].String(), "#wrong") {
					t.Errorf("rank 0 printed no table:\n%s", outs[r].String())
				}
			}
		})
	}
}

// runAllreduceRanks runs stoke allreduce as two processes on 127.0.0.1, rank r with
// the common flags, then args[r], and env[r] added to its environment.
func runAllreduceRanks(t *testing.T, bin string, common []string, args, env [2][]string) ([2]string, [2]error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var outs [2]bytes.Buffer
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := append([]string{"allreduce", "--rank", fmt.Sprint(r), "--world-size", "2",
				"--master-addr", "127.0.0.1", "--master-port", fmt.Sprint(port), "--dist-timeout", "20s"}, common...)
			cmd := exec.Command(bin, append(a, args[r]...)...)
			cmd.Env = append(os.Environ(), env[r]...)
			cmd.Stdout = &outs[r]
			cmd.Stderr = &outs[r]
			errs[r] = cmd.Run()
		}()
	}
	wg.Wait()
	return [2]string{outs[0].String(), outs[1].String()}, errs
}

// TestAllreduceRanksAgree: ranks with different --max-bytes once both
// ran, one of them exiting 0 after fewer sizes; now every rank fails naming
// the flag and both values.
func TestAllreduceRanksAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command")
	}
	bin := buildStoke(t)
	common := []string{"--min-bytes", "4K", "--step-factor", "4", "--iters", "1", "--warmup", "0", "-q"}
	outs, errs := runAllreduceRanks(t, bin, common, [2][]string{{"--max-bytes", "1M"}, {"--max-bytes", "64K"}}, [2][]string{})
	for r := range 2 {
		if errs[r] == nil || !strings.Contains(outs[r], "ranks disagree on --max-bytes: rank 0 has 1048576, rank 1 has 65536") {
			t.Errorf("rank %d with another --max-bytes: %v\n%s\nwant it to fail naming both values", r, errs[r], outs[r])
		}
	}
}

// TestAllreduceSecret: with STOKE_SECRET on both ranks the command runs and
// does not warn; a rank with another secret is refused.
func TestAllreduceSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command")
	}
	bin := buildStoke(t)
	common := []string{"--min-bytes", "4K", "--max-bytes", "16K", "--iters", "1", "--warmup", "0", "-q"}
	outs, errs := runAllreduceRanks(t, bin, common, [2][]string{}, [2][]string{{"STOKE_SECRET=k1"}, {"STOKE_SECRET=k1"}})
	for r := range 2 {
		if errs[r] != nil || strings.Contains(outs[r], "unauthenticated") {
			t.Errorf("rank %d with the job's secret: %v\n%s", r, errs[r], outs[r])
		}
	}
	outs, errs = runAllreduceRanks(t, bin, append(common, "--dist-timeout", "3s"), [2][]string{}, [2][]string{{"STOKE_SECRET=k1"}, {"STOKE_SECRET=k2"}})
	if errs[1] == nil || !strings.Contains(outs[1], "STOKE_SECRET differs from rank 0's") {
		t.Errorf("rank 1 with another secret: %v\n%s\nwant it refused", errs[1], outs[1])
	}
	if errs[0] == nil {
		t.Errorf("rank 0 ran with a stranger as rank 1:\n%s", outs[0])
	}
	outs, errs = runAllreduceRanks(t, bin, common, [2][]string{}, [2][]string{})
	if errs[0] != nil || strings.Count(outs[0], "stoke allreduce: collective: warning: STOKE_SECRET is not set") != 1 {
		t.Errorf("rank 0 without a secret: %v\n%s\nwant one warning", errs[0], outs[0])
	}
}

func TestAllreduceUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--op", "max"},
		{"--dtype", "int8"},
		{"--min-bytes", "1M", "--max-bytes", "4K"},
		{"--min-bytes", "lots"},
		{"--step-factor", "1"},
		{"--max-bytes", "64T"}, // more than any machine here: refused, not allocated
	} {
		var out, errb bytes.Buffer
		code := Run(t.Context(), append([]string{"allreduce", "--rank", "0", "--world-size", "1", "--json"}, args...), &out, &errb)
		if code != 2 {
			t.Errorf("stoke allreduce %v: exit %d; want 2 (stderr %q)", args, code, errb.String())
		}
		if !strings.Contains(out.String(), `"code":2`) {
			t.Errorf("stoke allreduce %v: stdout %q; want the JSON error", args, out.String())
		}
	}
}

// TestAllreduceTorchrun launches two ranks with torch's own launcher: they read
// torchrun's environment and rendezvous through its agent's c10d TCPStore.
func TestAllreduceTorchrun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the command")
	}
	py := pyoracle.Python(t, "torch.distributed.run")
	bin := buildStoke(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// --redirects and --tee: torchrun on Python 3.11 fails at start without them.
	cmd := exec.Command(py, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1", "--nproc_per_node", "2",
		"--master_port", fmt.Sprint(port), "--no_python", bin, "allreduce", "-q", "--json",
		"--min-bytes", "4K", "--max-bytes", "64K", "--step-factor", "16", "--iters", "2", "--warmup", "0")
	// Every worker inherits the secret from torchrun's environment; the
	// agent's store is torch's, so the ring handshake checks it.
	cmd.Env = append(os.Environ(), "STOKE_SECRET=from-the-launcher")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torchrun: %v\n%s", err, out)
	}
	seen := 0
	for _, l := range strings.Split(string(out), "\n") {
		for r := range 2 {
			p := fmt.Sprintf("[default%d]:", r)
			if !strings.HasPrefix(l, p+"{") {
				continue
			}
			var res allreduceResult
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, p)), &res); err != nil {
				t.Fatalf("rank %d: %q: %v", r, l, err)
			}
			if res.Rank != r || res.WorldSize != 2 || len(res.Rows) != 2 || res.Errors != 0 {
				t.Errorf("rank %d under torchrun: %+v; want rank %d of 2, 2 rows, no errors", r, res, r)
			}
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("torchrun output has %d JSON results; want 2:\n%s", seen, out)
	}
	if strings.Contains(string(out), "unauthenticated") {
		t.Errorf("a job with STOKE_SECRET warned it is unauthenticated:\n%s", out)
	}
}
