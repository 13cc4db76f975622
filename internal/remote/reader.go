package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"
)

// reader reads the bytes [off, end) of an object in order, over as many ranged GETs as it takes:
// a body that fails transiently is closed and the rest is asked for from the first byte not yet
// returned. It gives up after Client.Attempts consecutive attempts that returned no byte.
type reader struct {
	c      *Client
	b      backend
	u      *url.URL
	obj    Object
	ctx    context.Context
	off    int64 // next byte to return
	end    int64
	body   io.ReadCloser
	cancel context.CancelFunc
	timer  *time.Timer
	fails  int   // consecutive attempts that returned no byte
	err    error // the last transient failure
}

func (c *Client) newReader(ctx context.Context, b backend, u *url.URL, obj Object, off, end int64) *reader {
	return &reader{c: c, b: b, u: u, obj: obj, ctx: ctx, off: off, end: end}
}

func (r *reader) Read(p []byte) (int, error) {
	for {
		if r.off >= r.end {
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		if r.body == nil {
			if err := r.open(); err != nil {
				return 0, err
			}
			if r.body == nil {
				continue // a transient failure: try again
			}
		}
		// A stall (no byte for Timeout) cancels the attempt; a consumer that reads slowly is not
		// a stall, so the clock runs during Read only.
		r.timer.Reset(r.c.timeout())
		n, err := r.body.Read(p[:min(int64(len(p)), r.end-r.off)])
		r.timer.Stop()
		r.off += int64(n)
		if n > 0 {
			r.fails = 0
		}
		if err == io.EOF && r.off < r.end {
			err = fmt.Errorf("body ended at byte %d of %d: %w", r.off, r.end, io.ErrUnexpectedEOF)
		}
		if err != nil && err != io.EOF {
			r.drop()
			if !retryable(r.ctx, err) {
				return n, fmt.Errorf("%s: %w", r.obj.URL, err)
			}
			r.err = err
			r.fails++
		}
		if n > 0 || r.off >= r.end {
			return n, nil
		}
	}
}

// open starts a GET of the remaining bytes, after a backoff when earlier attempts failed. A
// transient failure leaves r.body nil and no error; a permanent one, or running out of attempts,
// is returned.
func (r *reader) open() error {
	if r.fails >= r.c.attempts() {
		return fmt.Errorf("%s: bytes %d-%d: gave up after %d attempts: %w", r.obj.URL, r.off, r.end-1, r.fails, r.err)
	}
	if r.fails > 0 {
		if err := r.c.wait(r.ctx, r.fails); err != nil {
			return fmt.Errorf("%s: %w (after %v)", r.obj.URL, err, r.err)
		}
	}
	actx, cancel := context.WithCancel(r.ctx)
	r.timer = time.AfterFunc(r.c.timeout(), cancel)
	body, err := r.b.get(actx, r.obj, r.u, r.off, r.end)
	r.timer.Stop()
	if err != nil {
		cancel()
		if !retryable(r.ctx, err) {
			if _, ok := errors.AsType[*StatusError](err); ok {
				return err
			}
			return fmt.Errorf("%s: %w", r.obj.URL, err)
		}
		r.err = err
		r.fails++
		return nil
	}
	r.body, r.cancel = body, cancel
	return nil
}

func (r *reader) drop() {
	if r.body != nil {
		r.body.Close()
		r.cancel()
		r.body = nil
	}
}

func (r *reader) Close() error {
	r.drop()
	r.off = r.end
	return nil
}

// File is a remote object opened for reading: io.ReaderAt (one ranged GET per call, retried and
// resumed), and io.ReadSeeker over one streaming GET that a forward Seek of up to 1 MiB skips by
// reading (archive/tar skips member data that way) and a longer or backward one restarts at the
// new offset. ReadAt is safe for concurrent use; Read and Seek are for one goroutine at a time.
type File struct {
	c      *Client
	b      backend
	u      *url.URL
	obj    Object
	ctx    context.Context
	cancel context.CancelFunc

	mu  sync.Mutex // guards pos and seq
	pos int64
	seq *reader
}

// Open stats url and returns it opened.
func (c *Client) Open(ctx context.Context, url string) (*File, error) {
	obj, err := c.Stat(ctx, url)
	if err != nil {
		return nil, err
	}
	return c.OpenObject(obj)
}

// OpenObject opens an object already described (by List or an index), without a request.
func (c *Client) OpenObject(obj Object) (*File, error) {
	b, u, err := c.backend(obj.URL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &File{c: c, b: b, u: u, obj: obj, ctx: ctx, cancel: cancel}, nil
}

// Size returns the object's size in bytes.
func (f *File) Size() int64 { return f.obj.Size }

// Object returns what the file was opened from.
func (f *File) Object() Object { return f.obj }

// NewReader returns a sequential reader of the bytes from off to the end.
func (f *File) NewReader(off int64) io.ReadCloser {
	return f.c.newReader(f.ctx, f.b, f.u, f.obj, off, f.obj.Size)
}

// ReadAt reads len(p) bytes at off; fewer only at the end of the object, with io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", f.obj.URL, off)
	}
	end := min(off+int64(len(p)), f.obj.Size)
	if off >= end {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	r := f.c.newReader(f.ctx, f.b, f.u, f.obj, off, end)
	defer r.Close()
	n, err := io.ReadFull(r, p[:end-off])
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// maxSkip is how far a forward Seek is served by reading on rather than by a new request.
const maxSkip = 1 << 20

func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seq != nil && f.seq.off != f.pos {
		if d := f.pos - f.seq.off; d > 0 && d <= maxSkip {
			if _, err := io.CopyN(io.Discard, f.seq, d); err != nil {
				return 0, err
			}
		} else {
			f.seq.Close()
			f.seq = nil
		}
	}
	if f.seq == nil {
		if f.pos >= f.obj.Size {
			return 0, io.EOF
		}
		f.seq = f.c.newReader(f.ctx, f.b, f.u, f.obj, f.pos, f.obj.Size)
	}
	n, err := f.seq.Read(p)
	f.pos += int64(n)
	return n, err
}

func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.obj.Size
	default:
		return 0, fmt.Errorf("%s: seek whence %d", f.obj.URL, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("%s: seek to negative offset %d", f.obj.URL, offset)
	}
	f.pos = offset
	return offset, nil
}

// Close ends the file's requests; reads after it fail.
func (f *File) Close() error {
	f.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seq != nil {
		f.seq.Close()
		f.seq = nil
	}
	return nil
}
