//go:build linux

package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWorkerEndsWithLauncher: a worker that torchrun started (TORCHELASTIC_RUN_ID set), waiting
// for its peers, stops cleanly when its launcher is killed with SIGKILL, instead of running on as
// an orphan.
func TestWorkerEndsWithLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the stoke binary")
	}
	bin := stokeBin(t)
	errFile := filepath.Join(t.TempDir(), "stderr")
	// The launcher: a shell that starts the worker, says its process id, and waits.
	launcher := exec.Command("sh", "-c", `"$0" train --data mnist --model mlp --rank 0 --world-size 2 --master-addr 127.0.0.1 `+
		`--master-port "$1" --dist-timeout 60s >/dev/null 2>"$2" & echo $!; read wait`, bin, freePort(t), errFile)
	launcher.Env = append(withoutRankEnv(), "TORCHELASTIC_RUN_ID=test")
	stdin, err := launcher.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := launcher.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("launcher said %q", line)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	time.Sleep(time.Second) // the worker starts and waits for rank 1
	if err := launcher.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	launcher.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(errFile)
		if strings.Contains(string(b), "stoke: terminated: stopping") && strings.Contains(string(b), "interrupted") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker runs on 20 s after its launcher was killed; its stderr: %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
