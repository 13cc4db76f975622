package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Cache keeps whole copies of remote objects in a local folder, under a size limit: when a new copy
// takes the folder past MaxBytes, the least recently used copies (by modification time, which every
// use renews) are removed until it fits again; the copy just made is kept even if it alone is
// larger. Several processes may share a folder: a copy is written under a temporary name and renamed
// into place once complete, so that nobody sees a torn file; one process downloads a given copy
// while the others wait for it (a lock file per copy, flock'd, so that a killed downloader releases
// it); and a copy removed while another process reads it stays readable to that process until it
// closes it (POSIX semantics). Copies are named by URL, ETag, size and variant, so that a replaced
// object is fetched anew.
type Cache struct {
	dir    string
	max    int64
	client *Client

	ctx    context.Context // the downloads' context, cancelled by Close
	cancel context.CancelFunc
	group  singleflight.Group
	wg     sync.WaitGroup
	sem    chan struct{} // bounds the prefetches running at once
	mu     sync.Mutex    // serialises this process's evictions
}

// DefaultPrefetch is how many objects a Cache downloads ahead at once.
const DefaultPrefetch = 4

// tmpPrefix marks copies being written; stale ones (a crashed process's) are removed after
// staleTemp. lockPrefix marks the lock files of copies (empty; kept, since removing a lock file
// that another process waits on would let a third one lock a new file of the same name).
const (
	tmpPrefix  = ".tmp-"
	lockPrefix = ".lock-"
	staleTemp  = time.Hour
)

// NewCache returns a cache in dir (created if needed) of at most maxBytes (<= 0: no limit) that
// downloads with client.
func NewCache(client *Client, dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{dir: dir, max: maxBytes, client: client, ctx: ctx, cancel: cancel, sem: make(chan struct{}, DefaultPrefetch)}, nil
}

// Decoder turns an object's bytes into what the cache keeps (a decompressor); its close function
// runs when the copy is written.
type Decoder func(io.Reader) (r io.Reader, close func(), err error)

// Open returns the local copy of obj, decoded by decode when it is not nil (variant names the
// decoding, for the copy's name), downloading it first when the cache has none.
func (c *Cache) Open(ctx context.Context, obj Object, variant string, decode Decoder) (*os.File, error) {
	name := c.name(obj, variant)
	for range 3 {
		if fh, err := os.Open(name); err == nil {
			now := time.Now()
			os.Chtimes(name, now, now) // a use renews it; failing to is harmless
			return fh, nil
		}
		ch := c.group.DoChan(name, func() (any, error) { return nil, c.download(obj, name, decode) })
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case res := <-ch:
			if res.Err != nil {
				return nil, res.Err
			}
		}
		// Another process may have evicted the copy between its rename and this open: fetch again.
	}
	return nil, fmt.Errorf("cache: %s: the copy in %s kept disappearing (a cache size too small for the processes sharing it?)", obj.URL, c.dir)
}

// Prefetch starts downloading obj in the background unless the cache has it, with at most
// DefaultPrefetch downloads at once; an Open of it meanwhile waits for that download instead of
// starting another. A failure is left for Open to report.
func (c *Cache) Prefetch(obj Object, variant string, decode Decoder) {
	name := c.name(obj, variant)
	if _, err := os.Stat(name); err == nil {
		return
	}
	c.wg.Go(func() {
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		defer func() { <-c.sem }()
		if _, err := os.Stat(name); err == nil {
			return // fetched while this waited
		}
		<-c.group.DoChan(name, func() (any, error) { return nil, c.download(obj, name, decode) })
	})
}

// Close cancels the prefetches and waits for them; copies being written are removed.
func (c *Cache) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

func (c *Cache) name(obj Object, variant string) string {
	h := sha256.Sum256([]byte(obj.URL + "\x00" + obj.ETag + "\x00" + strconv.FormatInt(obj.Size, 10) + "\x00" + variant))
	base := path.Base(obj.URL)
	if len(base) > 80 {
		base = base[len(base)-80:]
	}
	return filepath.Join(c.dir, hex.EncodeToString(h[:12])+"-"+strings.TrimPrefix(base, "."))
}

func (c *Cache) download(obj Object, name string, decode Decoder) (err error) {
	unlock, err := lockFile(c.ctx, filepath.Join(c.dir, lockPrefix+filepath.Base(name)))
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(name); err == nil {
		return nil // another process made the copy while this one waited
	}
	f, err := c.client.OpenObject(obj)
	if err != nil {
		return err
	}
	defer f.Close()
	stop := context.AfterFunc(c.ctx, func() { f.Close() })
	defer stop()
	var r io.Reader = f.NewReader(0)
	if decode != nil {
		var done func()
		r, done, err = decode(r)
		if err != nil {
			return fmt.Errorf("%s: %w", obj.URL, err)
		}
		defer done()
	}
	tmp, err := os.CreateTemp(c.dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file private; copies are shared with the other processes of the cache.
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if _, err = io.Copy(tmp, r); err != nil {
		if c.ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", obj.URL, c.ctx.Err())
		}
		return err
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err = os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	c.evict(name)
	return nil
}

// evict removes the least recently used copies until the folder fits in the limit, keeping keep,
// and temporary files older than staleTemp.
func (c *Cache) evict(keep string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type copyInfo struct {
		name string
		size int64
		used time.Time
	}
	var copies []copyInfo
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		p := filepath.Join(c.dir, e.Name())
		if strings.HasPrefix(e.Name(), lockPrefix) {
			continue
		}
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if time.Since(info.ModTime()) > staleTemp {
				os.Remove(p)
			}
			continue
		}
		copies = append(copies, copyInfo{p, info.Size(), info.ModTime()})
		total += info.Size()
	}
	if c.max <= 0 || total <= c.max {
		return
	}
	slices.SortFunc(copies, func(a, b copyInfo) int { return a.used.Compare(b.used) })
	for _, ci := range copies {
		if total <= c.max {
			break
		}
		if ci.name == keep {
			continue
		}
		if err := os.Remove(ci.name); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= ci.size
		}
	}
}
