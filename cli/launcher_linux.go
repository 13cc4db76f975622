//go:build linux

package cli

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// endWithLauncher makes a worker that torchrun started (TORCHELASTIC_RUN_ID or
// TORCHELASTIC_RESTART_COUNT set) end with torchrun's agent: the kernel sends it SIGTERM when the
// agent dies (Linux's parent-death signal), which stops the command cleanly as a first Ctrl-C does.
// Without it, workers orphaned by a kill -9 of the agent kept training and rewriting the
// checkpoint. An agent that has already died when the signal is set is an error.
//
// The setting belongs to the calling thread, and is lost if that thread ends: the calling
// goroutine is locked to its thread for good, so call it from main's goroutine, whose thread
// lives as long as the process.
func endWithLauncher() error {
	if os.Getenv("TORCHELASTIC_RUN_ID") == "" && os.Getenv("TORCHELASTIC_RESTART_COUNT") == "" {
		return nil
	}
	runtime.LockOSThread()
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("ending with torchrun's agent (process %d): prctl(PR_SET_PDEATHSIG): %w", parent, err)
	}
	if now := os.Getppid(); now != parent {
		return fmt.Errorf("torchrun's agent (process %d) ended as this worker started (the worker's parent is now process %d)", parent, now)
	}
	return nil
}
