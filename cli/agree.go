package cli

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/loaders"
)

// rankLocalFlags are stoke train's flags each rank may set alone, and why. The ranks agree at
// start on the value of every other flag (agreeRun): a flag added to stoke train is agreed unless
// it is listed here.
var rankLocalFlags = map[string]string{
	"data":             "a path, which may differ between hosts: the samples' digest is agreed",
	"val-data":         "a path: the samples' digest is agreed",
	"test-data":        "a path: the samples' digest is agreed",
	"init":             "a path: train agrees on the file's SHA-256",
	"resume":           "a path: rank 0's state is broadcast, its epochs and steps agreed",
	"checkpoint":       "rank 0 writes it",
	"keep-best":        "rank 0 writes it",
	"checkpoint-every": "rank 0 writes the checkpoint",
	"log-dir":          "each rank's own log",
	"json":             "rank 0 reports",
	"q":                "rank 0 reports",
	"device":           "each rank its own device: the backend is agreed",
	"workers":          "speed only: a batch is a function of seed, epoch and index",
	"prefetch":         "speed only",
	"memory":           "speed only",
	"cache-dir":        "each host's cache",
	"cache-size":       "each host's cache",
	"master-addr":      "the rendezvous",
	"master-port":      "the rendezvous",
	"rank":             "the rendezvous",
	"world-size":       "the rendezvous checks it",
	"dist-timeout":     "each rank's patience",
}

// agreeRun checks, on a group of more than one rank, that every rank runs stoke train with the
// same values of the flags of fs that are not rank-local, on the same device backend and the
// same data: a digest of a sample of each data set's samples (keys' base names, labels, bytes).
// A mismatch fails on every rank, naming the flag or the data and both ranks' values.
func agreeRun(ctx context.Context, g *collective.Group, fs *flag.FlagSet, device string, sets map[string]loaders.Dataset) error {
	if g.Size() <= 1 {
		return nil
	}
	type check struct{ what, value string }
	var checks []check
	fs.VisitAll(func(f *flag.Flag) {
		if _, local := rankLocalFlags[f.Name]; !local {
			checks = append(checks, check{"--" + f.Name, f.Value.String()})
		}
	})
	backend, _, _ := strings.Cut(device, ":")
	checks = append(checks, check{"device backend", backend})
	for _, what := range []string{"training data", "evaluation data", "test data"} {
		if ds := sets[what]; ds != nil {
			d, err := dataDigest(ctx, ds)
			if err != nil {
				return err
			}
			checks = append(checks, check{what, d})
		}
	}
	for _, c := range checks {
		if len(c.what)+len(c.value) > collective.MaxAgree {
			sum := sha256.Sum256([]byte(c.value))
			c.value = fmt.Sprintf("%.200s... (%d bytes, sha256 %x)", c.value, len(c.value), sum[:12])
		}
		if err := g.Agree(ctx, c.what, c.value); err != nil {
			return fmt.Errorf("the ranks run different trainings: %w", err)
		}
	}
	return nil
}

// digestSamples is how many samples dataDigest reads.
const digestSamples = 64

// dataDigest describes ds by its length and a digest of digestSamples samples spread over it
// (over its first shard when it is sharded, so that one shard is read): their index, the base name
// of their key, their labels and targets, and their bytes. Two datasets of one size and shape, as
// MNIST and Fashion-MNIST, differ in it.
func dataDigest(ctx context.Context, ds loaders.Dataset) (string, error) {
	n := ds.Len()
	h := sha256.New()
	span := n
	if sh, ok := ds.(loaders.Sharded); ok {
		starts := sh.ShardStarts()
		fmt.Fprintf(h, "shards %v\n", starts)
		if len(starts) > 1 {
			span = starts[1]
		}
	}
	k := min(span, digestSamples)
	for j := range k {
		i := j * span / k
		s, err := ds.Sample(ctx, i)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			fmt.Fprintf(h, "%d: bad\n", i)
			continue
		}
		fmt.Fprintf(h, "%d %q %d %v %v %dx%dx%d\n", i, filepath.Base(s.Key), s.Label, s.Labels, s.Target, s.Input.C, s.Input.H, s.Input.W)
		h.Write(s.Input.Encoded)
		h.Write(s.Input.Pixels)
	}
	return fmt.Sprintf("%d samples, %d of them read: sha256 %x", n, k, h.Sum(nil)[:12]), nil
}
