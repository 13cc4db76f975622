package cli

import (
	"os"
	"os/exec"
	"testing"
)

func TestRankProcs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		cores int
		want  int
	}{
		{"one process", nil, 32, 0},
		{"torchrun, one rank", map[string]string{"LOCAL_WORLD_SIZE": "1", "OMP_NUM_THREADS": "1"}, 32, 0},
		{"torchrun's default OMP_NUM_THREADS", map[string]string{"LOCAL_WORLD_SIZE": "8", "OMP_NUM_THREADS": "1"}, 32, 1},
		{"OMP_NUM_THREADS chosen", map[string]string{"LOCAL_WORLD_SIZE": "8", "OMP_NUM_THREADS": "4"}, 32, 4},
		{"OMP_NUM_THREADS nested levels", map[string]string{"LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "6,2"}, 32, 6},
		{"OMP_NUM_THREADS over the cores", map[string]string{"LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "64"}, 16, 16},
		{"no OMP_NUM_THREADS: a share", map[string]string{"LOCAL_WORLD_SIZE": "8"}, 32, 4},
		{"a share rounds down", map[string]string{"LOCAL_WORLD_SIZE": "3"}, 16, 5},
		{"more ranks than cores", map[string]string{"LOCAL_WORLD_SIZE": "8"}, 4, 1},
		{"bad OMP_NUM_THREADS: a share", map[string]string{"LOCAL_WORLD_SIZE": "4", "OMP_NUM_THREADS": "auto"}, 16, 4},
		{"Slurm", map[string]string{"SLURM_NTASKS_PER_NODE": "4"}, 32, 8},
		{"Slurm with OMP_NUM_THREADS", map[string]string{"SLURM_NTASKS_PER_NODE": "4", "OMP_NUM_THREADS": "2"}, 32, 2},
		{"Slurm, one task per node", map[string]string{"SLURM_NTASKS_PER_NODE": "1"}, 32, 0},
		{"torchrun's count first", map[string]string{"LOCAL_WORLD_SIZE": "2", "SLURM_NTASKS_PER_NODE": "8"}, 32, 16},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "3", "LOCAL_WORLD_SIZE": "8", "OMP_NUM_THREADS": "1"}, 32, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rankProcs(func(k string) string { return tc.env[k] }, tc.cores); got != tc.want {
				t.Errorf("rankProcs(%v, %d cores) = %d, want %d", tc.env, tc.cores, got, tc.want)
			}
		})
	}
}

// TestRankProcsAtStartup runs the binary as one of two ranks a launcher started on this host:
// stoke profile reports the cores its runtime was given.
func TestRankProcsAtStartup(t *testing.T) {
	bin := stokeBin(t)
	root := photoFolder(t, 2, 4, nil)
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{[]string{"LOCAL_WORLD_SIZE=2", "OMP_NUM_THREADS=1"}, 1},
		{[]string{"LOCAL_WORLD_SIZE=2", "OMP_NUM_THREADS=1", "GOMAXPROCS=3"}, 3}, // set by hand: kept
		{[]string{"GOMAXPROCS=3"}, 3},
	} {
		cmd := exec.CommandContext(t.Context(), bin, "profile", "--data", root, "--size", "8", "--batch", "2", "--batches", "2", "--json", "-q")
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v: %s", tc.env, err, out)
		}
		var rep struct{ Cores int }
		lastJSON(t, string(out), &rep)
		if rep.Cores != tc.want {
			t.Errorf("%v: the runtime had %d cores, want %d", tc.env, rep.Cores, tc.want)
		}
	}
}
