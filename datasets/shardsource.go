package datasets

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/loaders"
)

var (
	_ loaders.PartPrefetcher = (*shardSource)(nil)
	_ loaders.ReadPlanner    = (*Shards)(nil)
	_ loaders.Sharded        = (*Shards)(nil)
)

// NewShardSource returns the StreamSource over WebDataset tar shard files (plain, gzip or zstd),
// one part per file, each read front to back by a ShardStream: compressed shards are never held
// whole in memory. name is used in errors and Info. lens, if not nil, are the shards' sample
// counts (the "nsamples" of stoke pack's index), which make it a SizedSource.
func NewShardSource(name string, paths []string, lens []int) loaders.SizedSource {
	return &shardSource{name: name, paths: paths, lens: lens}
}

type shardSource struct {
	name   string
	paths  []string
	lens   []int
	remote *remoteShards // nil: remote shards streamed by one GET each, opened when reached
}

func (s *shardSource) Parts() int { return len(s.paths) }

func (s *shardSource) PartLens() []int { return s.lens }

func (s *shardSource) Open(_ context.Context, part int) (loaders.SampleStream, error) {
	st := NewShardStream(s.paths[part : part+1])
	if s.remote != nil && s.remote.cached(part) {
		st.openFile = func(ctx context.Context, _ string) (shardFile, error) { return s.remote.openCached(ctx, part) }
	}
	return st, nil
}

// PrefetchParts downloads the next remote parts into the cache while this one is read.
func (s *shardSource) PrefetchParts(next []int) {
	if s.remote != nil {
		s.remote.prefetch(next)
	}
}

// Close stops the downloads ahead; a source opened with a cache holds them.
func (s *shardSource) Close() error {
	if s.remote != nil {
		return s.remote.Close()
	}
	return nil
}

func (s *shardSource) Info() loaders.Info { return loaders.Info{Name: s.name} }

// OpenStream opens split of the dataset named by spec for streaming, as the zero Opener does.
func OpenStream(spec, split string) (loaders.StreamSource, error) {
	return Opener{}.OpenStream(spec, split)
}

// OpenStream opens split of the dataset named by spec for streaming; "shards:PATTERN" is the one
// kind that can be streamed (each shard read front to back; local, s3:// or http(s):// as Open
// names them, the split chosen as Open chooses it: "" is train). Shards listed in an index.json
// (named, or beside the shards) make a SizedSource. Open reads the same shards by random access,
// the default because it shuffles the whole dataset, knows the epoch's length up front and splits
// shards across ranks with exact padding; stream shards that are too large to hold decompressed
// or that are best read sequentially.
//
// With o.CacheDir, remote shards are read from their decompressed copies in the cache, and while
// one is read the next ones (in the epoch's order) download into it; without, each is streamed by
// one GET when it is reached. The source is then an io.Closer: close it when done, to stop the
// downloads ahead.
func (o Opener) OpenStream(spec, split string) (loaders.StreamSource, error) {
	return o.OpenStreamContext(context.Background(), spec, split)
}

// OpenStreamContext is OpenStream with ctx bounding what opening reads: the listing of the
// shards and their index. The parts' reads take the ctx the Loader gives each.
func (o Opener) OpenStreamContext(ctx context.Context, spec, split string) (loaders.StreamSource, error) {
	kind, arg, err := parseSpec(spec)
	if err == nil && kind != "shards" {
		err = fmt.Errorf("datasets: open stream %q: only shards:GLOB can be streamed: %w", spec, ErrSpec)
	}
	if err != nil {
		return nil, err
	}
	if split, err = splitName(split); err != nil {
		return nil, fmt.Errorf("datasets: open stream %q: %w", spec, err)
	}
	name, src, err := listShardArg(ctx, arg)
	if err != nil {
		return nil, err
	}
	// Shards in a folder that stoke pack wrote: their entries in its index.
	if err := src.findEntries(ctx); err != nil {
		return nil, fmt.Errorf("datasets: open stream %q: %w", spec, err)
	}
	if src, err = src.only(name, split); err != nil {
		return nil, err
	}
	rs, err := o.newRemoteShards(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("datasets: open stream %q: %w", spec, err)
	}
	return &shardSource{name: name, paths: src.paths, lens: src.lens(), remote: rs}, nil
}

// ShardStarts returns the index of the first sample of each shard that holds any, in the order of
// the paths.
func (s *Shards) ShardStarts() []int {
	starts := make([]int, 0, len(s.shards))
	for k, sh := range s.shards {
		if sh.len() > 0 {
			starts = append(starts, s.starts[k])
		}
	}
	return starts
}
