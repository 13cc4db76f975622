package loaders

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/stoke-ml/stoke/internal/rng"
)

// Sharded is implemented by datasets stored in shard files (datasets.Shards is): ShardStarts returns the
// index of each shard's first sample, increasing from 0; shard k holds the samples from starts[k]
// up to starts[k+1] (the last one up to Len()). The Loader splits such a dataset across ranks by
// whole shards when that is balanced, so that each rank reads only its own files. nil means the
// dataset is not in shards (a wrapper that passes ShardStarts on may return it).
type Sharded interface {
	ShardStarts() []int
}

// EnvRank reads this process's place among data-parallel processes from the environment that
// torchrun and similar launchers set: RANK, WORLD_SIZE and LOCAL_RANK (the process's rank on its
// host, which picks its GPU). Unset variables mean rank 0 of a world of 1 and local rank 0.
// Stoke launches no process itself: run one process per rank under the launcher you use.
func EnvRank() (rank, worldSize, localRank int, err error) {
	get := func(name string, def int) (int, error) {
		s, ok := os.LookupEnv(name)
		if !ok || s == "" {
			return def, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("loaders: environment %s=%q: want an integer >= 0: %w", name, s, ErrConfig)
		}
		return v, nil
	}
	if rank, err = get("RANK", 0); err != nil {
		return
	}
	if worldSize, err = get("WORLD_SIZE", 1); err != nil {
		return
	}
	if localRank, err = get("LOCAL_RANK", 0); err != nil {
		return
	}
	return rank, worldSize, localRank, checkRank(rank, worldSize)
}

// checkRank validates a rank and a world size (0 means 1).
func checkRank(rank, world int) error {
	if world < 0 || rank < 0 || rank >= max(world, 1) {
		return fmt.Errorf("loaders: rank %d of world size %d: want 0 <= rank < world size: %w", rank, world, ErrConfig)
	}
	return nil
}

// shardSplit assigns whole shards to ranks.
type shardSplit struct {
	starts []int   // first sample of each shard, and the dataset length last
	ranks  [][]int // the shards of each rank, in shard order
	per    int     // samples per rank per epoch, padding included
}

// splitShards assigns the shards of a dataset of n samples (starts as ShardStarts returns them) to
// world ranks, largest shard first to the rank with the fewest samples so far. Every rank is padded
// to the largest rank's count, so the split is used (ok) only when that padding stays within one
// average shard over all ranks; otherwise samples are split, which pads fewer than world.
func splitShards(starts []int, n, world int) (shardSplit, bool) {
	s := len(starts)
	if world <= 1 || s < world || n == 0 {
		return shardSplit{}, false
	}
	sp := shardSplit{starts: append(slices.Clone(starts), n), ranks: make([][]int, world)}
	size := func(k int) int { return sp.starts[k+1] - sp.starts[k] }
	order := make([]int, s)
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return size(b) - size(a) })
	count := make([]int, world)
	for _, k := range order {
		r := 0
		for q := range world {
			if count[q] < count[r] {
				r = q
			}
		}
		sp.ranks[r] = append(sp.ranks[r], k)
		count[r] += size(k)
	}
	for r := range sp.ranks {
		slices.Sort(sp.ranks[r])
	}
	sp.per = slices.Max(count)
	if slices.Min(count) == 0 || world*sp.per-n > (n+s-1)/s {
		return shardSplit{}, false
	}
	return sp, true
}

// indices returns rank's indices for epoch: the samples of its shards, in order or shuffled by
// (seed, epoch), padded to per by wrapping around.
func (sp shardSplit) indices(rank int, shuffle bool, seed uint64, epoch int) []int {
	var own []int
	for _, k := range sp.ranks[rank] {
		for i := sp.starts[k]; i < sp.starts[k+1]; i++ {
			own = append(own, i)
		}
	}
	if shuffle {
		r := rng.Epoch(seed, epoch)
		r.Shuffle(len(own), func(i, j int) { own[i], own[j] = own[j], own[i] })
	}
	for i := 0; len(own) < sp.per; i++ {
		own = append(own, own[i])
	}
	return own
}
