package cli

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// buildStoke builds the command into a temporary folder, as a launcher would find it.
func buildStoke(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stoke")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/stoke").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// rawShards writes shards of perShard raw 4x4 gray samples each and returns their glob.
func rawShards(t *testing.T, shards, perShard int) string {
	t.Helper()
	dir := t.TempDir()
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(dir, "part-%04d.tar"), MaxSamples: perShard})
	if err != nil {
		t.Fatal(err)
	}
	for i := range shards * perShard {
		px := make([]byte, 16)
		px[0] = byte(i)
		if err := w.Write(loaders.Sample{Input: transforms.Input{Pixels: px, H: 4, W: 4, C: 1}, Label: i % 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "part-*.tar")
}

// rankRun is what one rank's process reported.
type rankRun struct {
	batches int64
	samples map[int][]int // epoch -> dataset indices, in the order loaded
}

// runRanks starts world processes of bin at once, rank r with the arguments and environment
// that args(r) and env(r) give, and collects their JSON and sample logs.
func runRanks(t *testing.T, bin string, world int, args func(r int) []string, env func(r int) []string) []rankRun {
	t.Helper()
	runs := make([]rankRun, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() {
			log := filepath.Join(t.TempDir(), fmt.Sprint("rank", r, ".log"))
			cmd := exec.CommandContext(t.Context(), bin, append(args(r), "--sample-log", log, "--json", "-q")...)
			cmd.Env = append(withoutRankEnv(), env(r)...)
			out, err := cmd.Output()
			if err != nil {
				errs[r] = fmt.Errorf("rank %d: %v: %s", r, err, errText(err))
				return
			}
			var res benchResult
			lastJSON(t, string(out), &res)
			if res.Rank != r || res.WorldSize != world {
				errs[r] = fmt.Errorf("rank %d: JSON says rank %d of %d", r, res.Rank, res.WorldSize)
				return
			}
			runs[r] = rankRun{batches: res.Batches, samples: readSampleLog(t, log)}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return runs
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// withoutRankEnv is the test's environment less any launcher variables it may run under.
func withoutRankEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, k := range []string{"RANK=", "WORLD_SIZE=", "LOCAL_RANK="} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
}

func readSampleLog(t *testing.T, path string) map[int][]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int][]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var epoch, seq, index int
		if _, err := fmt.Sscan(sc.Text(), &epoch, &seq, &index); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		out[epoch] = append(out[epoch], index)
	}
	return out
}

// checkRanks checks that every rank took the same number of batches and, in every epoch, loaded
// perRank samples, and that the ranks' samples cover the n samples of the dataset with pad
// repeats in all; owner, if not nil, maps a sample to the unit (shard) that must stay on one rank.
func checkRanks(t *testing.T, runs []rankRun, epochs, n, perRank, pad int, owner func(int) int) {
	t.Helper()
	for r, run := range runs {
		if run.batches != runs[0].batches {
			t.Errorf("rank %d took %d batches, rank 0 %d; want equal steps", r, run.batches, runs[0].batches)
		}
	}
	for e := range epochs {
		seen := map[int]int{}
		unit := map[int]int{}
		for r, run := range runs {
			if len(run.samples[e]) != perRank {
				t.Errorf("epoch %d: rank %d loaded %d samples; want %d", e, r, len(run.samples[e]), perRank)
			}
			for _, i := range run.samples[e] {
				seen[i]++
				if owner == nil {
					continue
				}
				if o, ok := unit[owner(i)]; ok && o != r {
					t.Errorf("epoch %d: shard %d read by ranks %d and %d", e, owner(i), o, r)
				}
				unit[owner(i)] = r
			}
		}
		repeats := 0
		for i := range n {
			if seen[i] == 0 {
				t.Errorf("epoch %d: sample %d on no rank", e, i)
			}
			repeats += max(seen[i]-1, 0)
		}
		if len(seen) != n || repeats != pad {
			t.Errorf("epoch %d: %d distinct samples with %d repeats; want %d and %d (the padding)", e, len(seen), repeats, n, pad)
		}
	}
}

// TestRanksFromEnvironment runs 4 processes with RANK and WORLD_SIZE set, as torchrun does, over 8
// equal shards: the shards are split between the ranks (2 each, never shared), every rank takes the
// same number of steps, and together the ranks load every sample once per epoch.
func TestRanksFromEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs 4 processes")
	}
	bin := buildStoke(t)
	glob := rawShards(t, 8, 6)
	runs := runRanks(t, bin, 4,
		func(int) []string {
			return []string{"bench", "--data", "shards:" + glob, "--size", "4", "--batch", "5", "--workers", "1", "--epochs", "2"}
		},
		func(r int) []string {
			return []string{fmt.Sprint("RANK=", r), "WORLD_SIZE=4", fmt.Sprint("LOCAL_RANK=", r)}
		})
	checkRanks(t, runs, 2, 48, 12, 0, func(i int) int { return i / 6 })
	if runs[0].batches != 2*3 {
		t.Errorf("%d batches over 2 epochs; want 6 (12 samples per rank in batches of 5)", runs[0].batches)
	}
}

// TestRanksFromFlags runs 4 processes with --rank and --world-size over an image folder of 14
// samples: too few shards to split, so samples are split, padded to 16 (2 repeats) so that every
// rank loads 4.
func TestRanksFromFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs 4 processes")
	}
	bin := buildStoke(t)
	root := photoFolder(t, 2, 7, nil)
	runs := runRanks(t, bin, 4,
		func(r int) []string {
			return []string{"bench", "--data", root, "--size", "8", "--batch", "3", "--workers", "1", "--epochs", "2", "--rank", fmt.Sprint(r), "--world-size", "4"}
		},
		func(int) []string { return nil })
	checkRanks(t, runs, 2, 14, 4, 2, nil)
}

func TestRanksUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  [][2]string
		want string
	}{
		{[]string{"train", "--world-size", "2"}, nil, "--master-port"},
		{[]string{"train"}, [][2]string{{"RANK", "1"}, {"WORLD_SIZE", "2"}}, "--master-port"},
		{[]string{"train", "--world-size", "2", "--master-port", "1", "--dist-timeout", "0s"}, nil, "--dist-timeout"},
		{[]string{"bench", "--data", "mnist", "--rank", "4", "--world-size", "4"}, nil, "--rank 4 --world-size 4"},
		{[]string{"profile", "--data", "mnist", "--world-size", "0"}, nil, "--rank 0 --world-size 0"},
		{[]string{"bench", "--data", "mnist"}, [][2]string{{"WORLD_SIZE", "two"}}, "WORLD_SIZE"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for _, kv := range tc.env {
				t.Setenv(kv[0], kv[1])
			}
			_, errOut, code := stoke(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}
