package cli

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
)

type deviceJSON struct {
	Backend           string `json:"backend"`
	Index             int    `json:"index"`
	Name              string `json:"name"`
	Memory            int64  `json:"memory"`
	ComputeCapability string `json:"compute_capability,omitempty"`
}

type backendJSON struct {
	Name    string       `json:"name"`
	Devices []deviceJSON `json:"devices"`
	Error   string       `json:"error,omitempty"`
}

func runDevices(_ context.Context, e *env, args []string) error {
	fs := e.flags("[--json]", true)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	var out struct {
		Backends []backendJSON `json:"backends"`
	}
	for _, b := range gpu.Backends() {
		bj := backendJSON{Name: b.Name(), Devices: []deviceJSON{}}
		infos, err := b.Devices()
		if err != nil {
			bj.Error = err.Error()
		}
		e.printf("%s:\n", b.Name())
		for _, in := range infos {
			bj.Devices = append(bj.Devices, deviceJSON{in.Backend, in.Index, in.Name, in.Memory, in.ComputeCapability})
			e.printf("  %s:%d  %s\n", in.Backend, in.Index, describe(in))
		}
		if err != nil {
			e.printf("  (no devices: %v)\n", err)
		} else if len(infos) == 0 {
			e.printf("  (no devices)\n")
		}
		out.Backends = append(out.Backends, bj)
	}
	if !hasBackend("cuda") {
		e.printf("cuda: not built in (build with -tags cuda; see README \"Building with CUDA\")\n")
	}
	return e.emit(out)
}

func describe(in gpu.Info) string {
	s := in.Name
	if in.Memory > 0 {
		s += fmt.Sprintf(", %.1f GiB", float64(in.Memory)/(1<<30))
	}
	if in.ComputeCapability != "" {
		s += ", compute capability " + in.ComputeCapability
	}
	return s
}

func hasBackend(name string) bool {
	for _, b := range gpu.Backends() {
		if b.Name() == name {
			return true
		}
	}
	return false
}
