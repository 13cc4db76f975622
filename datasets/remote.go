package datasets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/stoke-ml/stoke/internal/remote"
	"github.com/stoke-ml/stoke/loaders"
)

// Opener opens datasets like Open, with settings for shards named by URL (s3://BUCKET/KEY,
// https://HOST/PATH, http://...). The zero Opener is what Open uses.
//
// Shards listed in the index that stoke pack writes (named by an index.json, or found beside the
// shards of a glob or brace list: one GET of FOLDER/index.json, where a 404 means none) are opened
// without a request: the index gives each sample's place in its shard. Without a CacheDir each
// sample is then one ranged GET (of its frames, for a compressed shard); with one, a shard is
// downloaded whole, decompressed, into the cache on its first read (and meanwhile the next four
// that a Loader reads, in its epoch's order for its rank, or in file order without a Loader), kept
// there for later runs and other processes, and read from there like a local plain tar. Shards
// without such an index are read once when opened to find their samples: in place for a plain .tar
// (then one ranged GET per sample), streamed into an unnamed temporary file and decompressed for a
// compressed one, or downloaded into the cache.
//
// S3 credentials, region and endpoint come from the standard AWS environment variables and files
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL for an S3-compatible store, which is then addressed by path). Transient failures
// (connection resets and refusals, stalls, HTTP 5xx and 429, S3's SlowDown) are retried with
// backoff and jitter, and a broken body resumes at the byte where it broke, asking for the version
// that the first response gave (its ETag), so that an object replaced meanwhile fails instead of
// being spliced; other failures name the URL and status, and a sample that the store fails to
// deliver wraps ErrStorage (which the Skip policy does not skip). A cached copy of a shard that
// the index describes without an ETag is revalidated by one HEAD per process; every copy's size
// and checksum are checked when it is opened, and a damaged one is fetched again.
type Opener struct {
	// CacheDir is the folder of local copies of remote shards ("" for none). Several processes
	// may share it.
	CacheDir string
	// CacheSize bounds the copies in CacheDir, in bytes: past it, the least recently used go
	// (0: no bound). A shard being read is never removed by this process.
	CacheSize int64
}

// OpenShards opens the shards at paths (local paths or URLs), in that order; see the package
// function OpenShards.
func (o Opener) OpenShards(name string, paths []string) (*Shards, error) {
	return o.OpenShardsContext(context.Background(), name, paths)
}

// OpenShardsContext is OpenShards with ctx bounding the requests that opening makes (each remote
// shard's size and version, its index); the dataset's reads take the ctx of each Sample.
func (o Opener) OpenShardsContext(ctx context.Context, name string, paths []string) (*Shards, error) {
	var src shardList
	for _, p := range paths {
		src.add(p, remote.Object{}, nil)
	}
	return o.openShards(ctx, name, src, "")
}

// shardList lists the shards of a dataset: local paths, or remote objects (already described by
// a listing or an index, or with Size -1 to be asked for), with the entry of the index that lists
// each (nil without one).
type shardList struct {
	paths   []string
	objs    []remote.Object // objs[i].URL == "" for a local path
	entries []*shardEntry
}

func (s *shardList) add(p string, obj remote.Object, e *shardEntry) {
	if remote.IsURL(p) && obj.URL == "" {
		obj = remote.Object{URL: p, Size: -1}
	}
	s.paths = append(s.paths, p)
	s.objs = append(s.objs, obj)
	s.entries = append(s.entries, e)
}

// lens returns the sample counts of the shards when an index gave them all, else nil.
func (s *shardList) lens() []int {
	lens := make([]int, len(s.entries))
	for i, e := range s.entries {
		if e == nil {
			return nil
		}
		lens[i] = e.NSamples
	}
	return lens
}

// listShardSpec lists the shards that the argument of a shards: spec names: a shard index (a
// pattern ending in index.json) or a pattern (see ShardPaths).
func listShardSpec(ctx context.Context, pattern string) (shardList, error) {
	if strings.HasSuffix(pattern, "/index.json") || pattern == "index.json" {
		return listIndexShards(ctx, pattern)
	}
	return listShards(ctx, pattern)
}

// client is shared by every remote read of the process: one pool of connections, one S3
// configuration.
var client = &remote.Client{}

// ShardPaths expands a pattern into shard paths or URLs, sorted within each brace alternative:
// WebDataset's brace notation first ("shard-{000000..000099}.tar", "{train,val}-*.tar"), then
// filepath.Match wildcards for local paths and s3:// URLs (listing the bucket; * does not cross a
// slash). http(s) servers cannot be listed: name their shards with braces or an index.json. No
// match is an error wrapping ErrEmpty. ShardPaths reads no index.
func ShardPaths(pattern string) ([]string, error) {
	return ShardPathsContext(context.Background(), pattern)
}

// ShardPathsContext is ShardPaths with ctx bounding the listing of an s3:// pattern.
func ShardPathsContext(ctx context.Context, pattern string) ([]string, error) {
	src, err := listShards(ctx, pattern)
	return src.paths, err
}

func listShards(ctx context.Context, pattern string) (shardList, error) {
	var src shardList
	alts, err := expandBraces(pattern)
	if err != nil {
		return src, fmt.Errorf("datasets: shards %q: %w: %w", pattern, ErrSpec, err)
	}
	for _, p := range alts {
		if remote.IsURL(p) {
			if strings.ContainsAny(p, `*?[\`) || strings.HasPrefix(p, "s3://") {
				objs, err := client.List(ctx, p)
				if err != nil {
					return src, fmt.Errorf("datasets: shards %q: %w", pattern, err)
				}
				for _, obj := range objs {
					src.add(obj.URL, obj, nil)
				}
			} else {
				src.add(p, remote.Object{}, nil) // described when opened
			}
			continue
		}
		paths, err := filepath.Glob(p)
		if err != nil {
			return src, fmt.Errorf("datasets: shards %q: %w: %w", pattern, ErrSpec, err)
		}
		slices.Sort(paths)
		for _, q := range paths {
			src.add(q, remote.Object{}, nil)
		}
	}
	if len(src.paths) == 0 {
		return src, fmt.Errorf("datasets: shards %q: no file matches: %w", pattern, loaders.ErrEmpty)
	}
	return src, nil
}

// maxBraceExpansion bounds what one pattern may expand to.
const maxBraceExpansion = 1 << 20

// expandBraces expands WebDataset's brace notation: {A..B} is the integers from A to B (padded to
// A's width when A has leading zeros), {x,y,z} each alternative; several braces combine.
func expandBraces(s string) ([]string, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		if strings.ContainsRune(s, '}') {
			return nil, errors.New("unmatched }")
		}
		return []string{s}, nil
	}
	closing := strings.IndexByte(s[open:], '}')
	if closing < 0 {
		return nil, errors.New("unmatched {")
	}
	closing += open
	inner := s[open+1 : closing]
	var alts []string
	if lo, hi, ok := strings.Cut(inner, ".."); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("brace range {%s}: want {A..B} with 0 <= A <= B", inner)
		}
		if b-a >= maxBraceExpansion {
			return nil, fmt.Errorf("brace range {%s}: more than %d names", inner, maxBraceExpansion)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for i := a; i <= b; i++ {
			alts = append(alts, fmt.Sprintf("%0*d", width, i))
		}
	} else {
		alts = strings.Split(inner, ",")
	}
	rest, err := expandBraces(s[closing+1:])
	if err != nil {
		return nil, err
	}
	if len(alts)*len(rest) > maxBraceExpansion {
		return nil, fmt.Errorf("braces expand to more than %d names", maxBraceExpansion)
	}
	out := make([]string, 0, len(alts)*len(rest))
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, s[:open]+a+r)
		}
	}
	return out, nil
}

// listIndexShards reads a shard index (WebDataset's wids format, as ShardWriter writes it; shard
// URLs relative to it), local or remote. The index describes remote shards (sizes), so that opening
// asks the store nothing more about them, and gives every shard's sample count, which opening
// checks.
func listIndexShards(ctx context.Context, loc string) (shardList, error) {
	var src shardList
	ix, err := readIndex(ctx, loc)
	if err != nil {
		return src, fmt.Errorf("datasets: shards %s: %w", loc, err)
	}
	for i := range ix.ShardList {
		e := &ix.ShardList[i]
		if !remote.IsURL(loc) {
			src.add(filepath.Join(filepath.Dir(loc), filepath.FromSlash(e.URL)), remote.Object{}, e)
			continue
		}
		base, err := url.Parse(loc)
		if err != nil {
			return src, fmt.Errorf("datasets: shards %s: %w", loc, err)
		}
		ju := base.JoinPath("..", e.URL)
		if !inFolder(base, ju) {
			return src, fmt.Errorf("datasets: shards %s: shard url %q names %s, outside the index's folder: %w", loc, e.URL, ju.Redacted(), loaders.ErrCorrupt)
		}
		u := ju.String()
		src.add(u, remote.Object{URL: u, Size: e.FileSize}, e)
	}
	if len(src.paths) == 0 {
		return src, fmt.Errorf("datasets: shards %s: the index lists no shards: %w", loc, loaders.ErrEmpty)
	}
	return src, nil
}

// inFolder reports whether u, a shard's URL resolved against its index's URL base, lies in the
// index's folder on the same server, once its escapes are decoded ("%2e%2e" is ".." to a server).
func inFolder(base, u *url.URL) bool {
	dir := path.Dir(base.Path) + "/"
	return u.Scheme == base.Scheme && u.Host == base.Host && u.User == nil && u.RawQuery == base.RawQuery &&
		strings.HasPrefix(u.Path, strings.TrimSuffix(dir, "//")) &&
		!slices.ContainsFunc(strings.Split(u.Path, "/"), func(s string) bool { return s == "." || s == ".." })
}

// readIndex reads and checks a local or remote shard index; a remote one is one GET.
func readIndex(ctx context.Context, loc string) (*shardIndex, error) {
	if !remote.IsURL(loc) {
		return readShardIndex(loc)
	}
	b, err := client.Get(ctx, loc, maxIndexBytes)
	if errors.Is(err, remote.ErrTooLarge) {
		err = fmt.Errorf("%w: %w", loaders.ErrCorrupt, err)
	}
	if err != nil {
		return nil, err
	}
	return parseShardIndex(loc, b)
}

// shardFolder returns the folder of a shard (a path or a URL), its name in it, and the place of
// the folder's index. A URL's query and fragment belong to the shard, not to its folder: the
// folder ends at the path's last slash.
func shardFolder(p string) (dir, base, index string) {
	if !remote.IsURL(p) {
		dir = filepath.Dir(p)
		return dir, filepath.Base(p), filepath.Join(dir, IndexName)
	}
	if q := strings.IndexAny(p, "?#"); q >= 0 && !strings.HasPrefix(p, "s3://") { // an S3 key has neither
		p = p[:q]
	}
	dir, base = p[:strings.LastIndexByte(p, '/')], p[strings.LastIndexByte(p, '/')+1:]
	return dir, base, dir + "/" + IndexName
}

// findEntries gives each shard not listed through an index the entry of the index.json in its
// folder (see localEntry), so that a glob or a brace list of shards that stoke pack wrote, local
// or remote, is read through their index like the index itself: a remote folder's index costs one
// GET. A remote shard not yet described takes its size from its entry (no request); one that a
// listing described must have the entry's size.
func (s *shardList) findEntries(ctx context.Context) error {
	idx := map[string]*shardIndex{} // by folder; nil when it has none
	for i, p := range s.paths {
		e, err := localEntry(ctx, p, s.entries[i], idx)
		if err != nil {
			return fmt.Errorf("shard %s: %w", p, err)
		}
		s.entries[i] = e
		if obj := &s.objs[i]; e != nil && obj.URL != "" {
			if obj.Size < 0 {
				obj.Size = e.FileSize
			} else if obj.Size != e.FileSize {
				_, _, index := shardFolder(p)
				return fmt.Errorf("shard %s: %d bytes, %s says %d: %w", p, obj.Size, index, e.FileSize, loaders.ErrCorrupt)
			}
		}
	}
	return nil
}

// shardFile is one shard opened for reading: a local file, a local copy of a remote one, or a
// remote one read by ranges.
type shardFile interface {
	io.ReadSeekCloser
	io.ReaderAt
	Size() int64
}

type localShard struct {
	*os.File
	size int64
}

func (l localShard) Size() int64 { return l.size }

func openLocalShard(path string) (shardFile, error) {
	fh, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	return localShard{fh, st.Size()}, nil
}

// withSize returns an opened file with its size.
func withSize(fh *os.File, err error) (shardFile, error) {
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	return localShard{fh, st.Size()}, nil
}

// openShardPath opens a local shard, or a remote one for reading in order (one streaming GET).
func openShardPath(ctx context.Context, path string) (shardFile, error) {
	if remote.IsURL(path) {
		return client.Open(ctx, path)
	}
	return openLocalShard(path)
}

// remoteShards opens the remote shards of one dataset, through the cache when there is one.
type remoteShards struct {
	cache *remote.Cache
	objs  []remote.Object
	// after[k] is the shard that this process reads after shard k in the epoch under way (-1: none),
	// as the Loader planned it (Shards.PlanReads); nil: the order of the files.
	after atomic.Pointer[[]int]
}

// newRemoteShards describes the remote shards not yet described (their size and ETag).
func (o Opener) newRemoteShards(ctx context.Context, src shardList) (*remoteShards, error) {
	rs := &remoteShards{objs: slices.Clone(src.objs)}
	for i, obj := range rs.objs {
		if obj.URL != "" && obj.Size < 0 {
			var err error
			if rs.objs[i], err = client.Stat(ctx, obj.URL); err != nil {
				return nil, err
			}
		}
	}
	if o.CacheDir != "" && slices.ContainsFunc(src.objs, func(obj remote.Object) bool { return obj.URL != "" }) {
		c, err := remote.NewCache(client, o.CacheDir, o.CacheSize)
		if err != nil {
			return nil, err
		}
		rs.cache = c
	}
	return rs, nil
}

// cacheVariant names what the cache keeps of a shard: its tar, decompressed.
const cacheVariant = "tar"

// decodeShard decompresses a shard into the cache, with the bound of a local one (expansionLimit).
func decodeShard(size int64) remote.Decoder {
	return func(r io.Reader) (io.Reader, func(), error) {
		d, done, err := decompress(r)
		if err != nil {
			return nil, nil, err
		}
		limit := expansionLimit(size)
		return corruptReader{&boundedReader{r: d, left: limit, limit: limit}}, done, nil
	}
}

// open opens remote shard i: its decompressed copy in the cache, while the shards read after it
// start downloading into the cache, or without a cache the object itself (no request).
func (rs *remoteShards) open(ctx context.Context, i int) (shardFile, error) {
	obj := rs.objs[i]
	if rs.cache == nil {
		return client.OpenObject(obj)
	}
	rs.prefetch(rs.following(i))
	return rs.openCached(ctx, i)
}

// following returns the shards read after shard i (at most remote.DefaultPrefetch): in the
// planned order, or else in file order.
func (rs *remoteShards) following(i int) []int {
	after := rs.after.Load()
	next := make([]int, 0, remote.DefaultPrefetch)
	for k := i; len(next) < remote.DefaultPrefetch; {
		if after != nil {
			k = (*after)[k]
		} else if k++; k >= len(rs.objs) {
			k = -1
		}
		if k < 0 {
			break
		}
		next = append(next, k)
	}
	return next
}

// PlanReads is told by the Loader, when an epoch starts, the indices that it will read, in order
// (this rank's part, in this epoch's order), so that the shards downloaded ahead into the cache
// are the ones this process reads next, in the order it reaches them: never another rank's.
func (s *Shards) PlanReads(indices []int) {
	if s.remote == nil || s.remote.cache == nil {
		return
	}
	after := make([]int, len(s.shards))
	for k := range after {
		after[k] = -1
	}
	seen := make([]bool, len(s.shards))
	prev, k := -1, -1
	for _, i := range indices {
		if k >= 0 && i >= s.starts[k] && i < s.starts[k+1] {
			continue // the shard of the previous index
		}
		if i < 0 || i >= s.Len() {
			continue
		}
		if k = sort.SearchInts(s.starts, i+1) - 1; seen[k] {
			continue
		}
		seen[k] = true
		if prev >= 0 {
			after[prev] = k
		}
		prev = k
	}
	s.remote.after.Store(&after)
}

// openCached opens the decompressed copy of remote shard i in the cache, downloading it first
// (or waiting for its prefetch) when the cache has none.
func (rs *remoteShards) openCached(ctx context.Context, i int) (shardFile, error) {
	obj := rs.objs[i]
	return withSize(rs.cache.Open(ctx, obj, cacheVariant, decodeShard(obj.Size)))
}

// cached reports whether remote shard i is read through the cache.
func (rs *remoteShards) cached(i int) bool { return rs.cache != nil && rs.objs[i].URL != "" }

// prefetch starts downloading the remote shards among the first remote.DefaultPrefetch of parts
// into the cache (with none, it does nothing): the Cache is the one owner of downloads ahead of use.
func (rs *remoteShards) prefetch(parts []int) {
	for _, k := range parts[:min(len(parts), remote.DefaultPrefetch)] {
		if o := rs.objs[k]; rs.cached(k) {
			rs.cache.Prefetch(o, cacheVariant, decodeShard(o.Size))
		}
	}
}

func (rs *remoteShards) Close() error {
	if rs.cache != nil {
		return rs.cache.Close()
	}
	return nil
}
