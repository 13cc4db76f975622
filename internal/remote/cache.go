package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
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

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/internal/filelock"
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
// object is fetched anew; an object described without an ETag (by an index) is asked for its ETag
// (a HEAD) before its copy is looked up, so that a replacement of the same size is not served from a
// stale copy. Each copy has a record of its size and checksum (CRC-32C), written with it and checked
// when it is opened: a damaged copy (truncated, flipped bytes) is removed and fetched again. A copy
// that this process is opening is never evicted by it, however small MaxBytes is.
type Cache struct {
	dir    string
	max    int64
	client *Client

	ctx    context.Context // the downloads' context, cancelled by Close
	cancel context.CancelFunc
	group  singleflight.Group
	wg     sync.WaitGroup
	sem    chan struct{} // bounds the prefetches running at once
	mu     sync.Mutex    // serialises this process's evictions; guards inUse
	// inUse counts, by copy, the opens and downloads under way in this process: evict keeps them.
	inUse map[string]int
	// described holds what HEADs told of the objects described without an ETag, by URL: one HEAD
	// an object for the cache's life.
	described map[string]Object
	// afterDownload, when set (by tests), runs between a download and the open of its copy.
	afterDownload func(name string)
}

// DefaultPrefetch is how many objects a Cache downloads ahead at once.
const DefaultPrefetch = 4

// tmpPrefix marks copies being written; stale ones (a crashed process's) are removed after
// staleTemp. lockPrefix marks the lock files of copies (empty; kept, since removing a lock file
// that another process waits on would let a third one lock a new file of the same name).
// sumPrefix marks the record of a copy's size and checksum.
const (
	tmpPrefix  = ".tmp-"
	lockPrefix = ".lock-"
	sumPrefix  = ".sum-"
	staleTemp  = time.Hour
)

// openTries bounds how often Open fetches a copy that other processes keep evicting.
const openTries = 10

// NewCache returns a cache in dir (created if needed) of at most maxBytes (<= 0: no limit) that
// downloads with client.
func NewCache(client *Client, dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{
		dir:       dir,
		max:       maxBytes,
		client:    client,
		ctx:       ctx,
		cancel:    cancel,
		sem:       make(chan struct{}, DefaultPrefetch),
		inUse:     map[string]int{},
		described: map[string]Object{},
	}, nil
}

// Decoder turns an object's bytes into what the cache keeps (a decompressor); its close function
// runs when the copy is written.
type Decoder func(io.Reader) (r io.Reader, close func(), err error)

// Open returns the local copy of obj, decoded by decode when it is not nil (variant names the
// decoding, for the copy's name), downloading it first when the cache has none, or when the copy
// it has is damaged. An obj without an ETag is asked for one first (a HEAD), and must still have
// its size. Errors name the object, and the local copy when it is the copy that failed.
func (c *Cache) Open(ctx context.Context, obj Object, variant string, decode Decoder) (*os.File, error) {
	obj, err := c.describe(ctx, obj)
	if err != nil {
		return nil, err
	}
	name := c.name(obj, variant)
	c.hold(name)
	defer c.release(name)
	var damaged error // why the copy found was removed
	for range openTries {
		fh, err := os.Open(name)
		if err == nil {
			if err := verify(fh, name); err != nil {
				fh.Close()
				damaged = err
				c.remove(name)
			} else {
				now := time.Now()
				os.Chtimes(name, now, now) // a use renews it; failing to is harmless
				return fh, nil
			}
		}
		ch := c.group.DoChan(name, func() (any, error) { return nil, c.download(obj, name, decode) })
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case res := <-ch:
			if res.Err != nil {
				c.mu.Lock()
				delete(c.described, obj.URL) // a replaced object: the next Open asks again
				c.mu.Unlock()
				if damaged != nil {
					return nil, fmt.Errorf("cache: %s: fetching %s again: %w", damaged, obj.URL, res.Err)
				}
				return nil, res.Err
			}
		}
		if c.afterDownload != nil {
			c.afterDownload(name)
		}
		if damaged != nil {
			// Fetched again: a copy that is damaged now is damaged as it is written.
			fh, err := os.Open(name)
			if err == nil {
				if err = verify(fh, name); err == nil {
					return fh, nil
				}
				fh.Close()
				return nil, fmt.Errorf("cache: %s fetched again from %s: %w", name, obj.URL, err)
			}
		}
		// Another process may have evicted the copy between its rename and this open: fetch again.
	}
	return nil, fmt.Errorf("cache: %s: the copy in %s kept disappearing (a cache size too small for the processes sharing it?)", obj.URL, c.dir)
}

// describe returns obj with its ETag, asked for by a HEAD when obj has none (an index described
// it): the copy's name holds the ETag, so that a replaced object is fetched again. A size that
// differs from the description's is ErrChanged.
func (c *Cache) describe(ctx context.Context, obj Object) (Object, error) {
	if obj.ETag != "" {
		return obj, nil
	}
	c.mu.Lock()
	got, ok := c.described[obj.URL]
	c.mu.Unlock()
	if !ok {
		var err error
		if got, err = c.client.Stat(ctx, obj.URL); err != nil {
			return obj, err
		}
		c.mu.Lock()
		c.described[obj.URL] = got
		c.mu.Unlock()
	}
	if obj.Size >= 0 && got.Size != obj.Size {
		return obj, storage(fmt.Errorf("%s: %d bytes, described as %d: %w", obj.URL, got.Size, obj.Size, ErrChanged))
	}
	return got, nil
}

func (c *Cache) hold(name string) {
	c.mu.Lock()
	c.inUse[name]++
	c.mu.Unlock()
}

func (c *Cache) release(name string) {
	c.mu.Lock()
	if c.inUse[name]--; c.inUse[name] <= 0 {
		delete(c.inUse, name)
	}
	c.mu.Unlock()
}

// remove removes a copy and its record.
func (c *Cache) remove(name string) {
	os.Remove(name)
	os.Remove(sumName(name))
}

// sumName is the name of the record of copy name's size and checksum.
func sumName(name string) string {
	return filepath.Join(filepath.Dir(name), sumPrefix+filepath.Base(name))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verify checks the copy fh (named name) against its record: its size and CRC-32C. fh is left at
// its start.
func verify(fh *os.File, name string) error {
	rec, err := os.ReadFile(sumName(name))
	if err != nil {
		return fmt.Errorf("copy %s: no record of its checksum: %w", name, err)
	}
	var size int64
	var sum uint32
	if _, err := fmt.Sscanf(string(rec), "%d %08x", &size, &sum); err != nil {
		return fmt.Errorf("copy %s: its record %q: %w", name, rec, err)
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, fh)
	if err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("copy %s is damaged: %d bytes, written with %d", name, n, size)
	}
	if h.Sum32() != sum {
		return fmt.Errorf("copy %s is damaged: checksum %08x, written with %08x", name, h.Sum32(), sum)
	}
	return nil
}

// Prefetch starts downloading obj in the background unless the cache has it, with at most
// DefaultPrefetch downloads at once; an Open of it meanwhile waits for that download instead of
// starting another. A failure is left for Open to report.
func (c *Cache) Prefetch(obj Object, variant string, decode Decoder) {
	if obj.ETag != "" {
		if _, err := os.Stat(c.name(obj, variant)); err == nil {
			return
		}
	}
	c.wg.Go(func() {
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		defer func() { <-c.sem }()
		obj, err := c.describe(c.ctx, obj)
		if err != nil {
			return
		}
		name := c.name(obj, variant)
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
	version := obj.ETag
	if version == "" {
		version = "\x01" + obj.Modified
	}
	h := sha256.Sum256([]byte(obj.URL + "\x00" + version + "\x00" + strconv.FormatInt(obj.Size, 10) + "\x00" + variant))
	base := path.Base(obj.URL)
	if len(base) > 80 {
		base = base[len(base)-80:]
	}
	return filepath.Join(c.dir, hex.EncodeToString(h[:12])+"-"+strings.TrimPrefix(base, "."))
}

func (c *Cache) download(obj Object, name string, decode Decoder) (err error) {
	unlock, err := filelock.Lock(c.ctx, filepath.Join(c.dir, lockPrefix+filepath.Base(name)))
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer unlock()
	if fh, err := os.Open(name); err == nil {
		err = verify(fh, name)
		fh.Close()
		if err == nil {
			return nil // another process made the copy while this one waited
		}
		c.remove(name)
	}
	c.hold(name)
	defer c.release(name)
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
	h := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err != nil {
		if c.ctx.Err() != nil {
			err = fmt.Errorf("%s: %w", obj.URL, c.ctx.Err())
		}
		return err
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	// The record first: a copy without one is taken for damaged and fetched again.
	if err = atomicfile.WriteFile(sumName(name), fmt.Appendf(nil, "%d %08x\n", n, h.Sum32()), 0o644); err != nil {
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
		if strings.HasPrefix(e.Name(), tmpPrefix) || strings.HasPrefix(e.Name(), "."+sumPrefix) {
			if time.Since(info.ModTime()) > staleTemp {
				os.Remove(p) // a crashed process's temporary file
			}
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			continue // lock files and records; copies' names start with their hash
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
		if ci.name == keep || c.inUse[ci.name] > 0 {
			continue
		}
		if err := os.Remove(ci.name); err == nil || errors.Is(err, fs.ErrNotExist) {
			os.Remove(sumName(ci.name))
			total -= ci.size
		}
	}
}
