package collective

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a rank (TestMain): "allreduce" reduces the
// sizes in STOKE_DIST_SIZES and prints each result's hash; "loop" reduces
// until an error, which it prints as "ERR: ...".
const childEnv = "STOKE_DIST_CHILD"

func child() int {
	cfg, err := FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ERR:", err)
		return 2
	}
	cfg.Timeout, _ = time.ParseDuration(os.Getenv("STOKE_DIST_TIMEOUT"))
	ctx := context.Background()
	g, err := Init(ctx, cfg)
	if err != nil {
		fmt.Println("ERR:", err)
		return 3
	}
	defer g.Close()
	switch os.Getenv(childEnv) {
	case "allreduce":
		for _, s := range strings.Split(os.Getenv("STOKE_DIST_SIZES"), ",") {
			n, _ := strconv.Atoi(s)
			b := make([]float32, n)
			for i := range b {
				b[i] = pattern(g.Rank(), i)
			}
			if err := g.AllReduce(ctx, b, Sum); err != nil {
				fmt.Println("ERR:", err)
				return 3
			}
			if err := checkSum(g.Size(), b, Sum); err != nil {
				fmt.Println("ERR:", err)
				return 4
			}
			fmt.Printf("ok %d %x\n", n, sha256.Sum256(f32Bytes(b)))
		}
	case "loop":
		b := make([]float32, 1<<16)
		for i := 0; ; i++ {
			if err := g.AllReduce(ctx, b, Sum); err != nil {
				fmt.Println("ERR:", err)
				return 3
			}
			if i == 0 {
				fmt.Println("ready")
			}
		}
	}
	return 0
}

type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

// spawn starts w ranks as processes of this test binary.
func spawn(t *testing.T, w int, mode string, timeout time.Duration, extra ...string) []*proc {
	t.Helper()
	port := freePort(t)
	ps := make([]*proc, w)
	for r := range w {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode, "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(w),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "STOKE_DIST_TIMEOUT="+timeout.String())
		cmd.Env = append(cmd.Env, extra...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, lines: make(chan string, 100)}
		go func() { // ends when the process's stdout closes; joined by wait
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
			close(p.lines)
		}()
		ps[r] = p
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.cmd.Process.Kill()
			p.wait()
		}
	})
	return ps
}

// wait returns the process's output and exit error.
func (p *proc) wait() ([]string, error) {
	var out []string
	for l := range p.lines {
		out = append(out, l)
	}
	return out, p.cmd.Wait()
}

func TestAllReduceProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	sizes := "0,1,3,1000,262147"
	for _, w := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			ps := spawn(t, w, "allreduce", 20*time.Second, "STOKE_DIST_SIZES="+sizes)
			var first []string
			for r, p := range ps {
				out, err := p.wait()
				if err != nil {
					t.Fatalf("rank %d: %v; output %q", r, err, out)
				}
				if len(out) != 5 {
					t.Fatalf("rank %d printed %q; want 5 results", r, out)
				}
				if r == 0 {
					first = out
				} else if strings.Join(out, "\n") != strings.Join(first, "\n") {
					t.Fatalf("rank %d results %q; rank 0 has %q (not the same bits)", r, out, first)
				}
			}
		})
	}
}

// spawnLooping starts w ranks that all-reduce until an error and waits until
// each has done one.
func spawnLooping(t *testing.T, w int, timeout time.Duration) []*proc {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ps := spawn(t, w, "loop", timeout)
	for r, p := range ps {
		if l := <-p.lines; l != "ready" {
			t.Fatalf("rank %d: %q; want ready", r, l)
		}
	}
	return ps
}

// TestKilledRank kills one of three ranks in the middle of a stream of
// all-reduces: the others fail with ErrPeer naming it, well within the timeout.
func TestKilledRank(t *testing.T) {
	ps := spawnLooping(t, 3, 30*time.Second)
	start := time.Now()
	ps[2].cmd.Process.Kill()
	named := false
	for r, p := range ps[:2] {
		out, err := p.wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("rank %d: exit %v; want status 3 (output %q)", r, err, out)
		}
		msg := out[len(out)-1]
		if !strings.HasPrefix(msg, "ERR: collective: all-reduce: rank ") {
			t.Errorf("rank %d: %q; want an all-reduce error naming a rank", r, msg)
		}
		if strings.Contains(msg, "timed out") {
			t.Errorf("rank %d: %q; want the dead peer seen, not a timeout", r, msg)
		}
		named = named || strings.Contains(msg, "rank 2:")
	}
	if !named {
		t.Errorf("no survivor named rank 2")
	}
	if d := time.Since(start); d >= 30*time.Second {
		t.Errorf("survivors took %v to fail; want less than the 30s timeout", d)
	}
}

// TestStoppedRank freezes one of two ranks (SIGSTOP): its socket stays open,
// so the other must give up by the timeout, naming it.
func TestStoppedRank(t *testing.T) {
	ps := spawnLooping(t, 2, 2*time.Second)
	if err := ps[1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer ps[1].cmd.Process.Signal(syscall.SIGCONT)
	out, err := ps[0].wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("rank 0: exit %v; want status 3 (output %q)", err, out)
	}
	msg := out[len(out)-1]
	if !strings.Contains(msg, "collective: all-reduce: timed out after 2s waiting for rank 1") || !strings.Contains(msg, "rank 1") {
		t.Errorf("rank 0: %q; want an all-reduce timeout naming rank 1", msg)
	}
}
