// Package remote reads files from object storage and HTTP servers for the shard datasets of
// package loaders: s3://BUCKET/KEY through the AWS SDK (credentials, region and endpoint from the
// standard AWS environment variables and files), and http:// or https:// URLs with range requests.
//
// Every read goes through one retry loop: connection resets and refusals (before or during a
// response), a stall (Client.Timeout without a byte, however long the whole transfer takes), HTTP
// 5xx and 429, and S3's SlowDown are retried with exponential backoff and full jitter, and a body
// that breaks is resumed from the byte where it broke. The reads of one File stick to one version of
// the object: the ETag a listing gave, or else the ETag and Last-Modified of its first response;
// every later request asks for it (If-Match) and every response is checked against it, so that an
// object replaced meanwhile fails with ErrChanged instead of being spliced, even by a server that
// ignores If-Match. Anything else is permanent: its error (a *StatusError for an HTTP status) names
// the URL and the status. IsStorage tells these failures of the store from bad bytes.
//
// Bytes are read as stored: a gzip-encoded response is not decoded on the way.
//
// A Cache keeps whole remote files on local disk under a size limit, least recently used first out,
// shared safely by several processes (files are written to a temporary name and renamed).
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// IsURL reports whether s names a remote file (s3://, http:// or https://) rather than a local path.
func IsURL(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	return ok && (scheme == "s3" || scheme == "http" || scheme == "https")
}

// Object is a remote file as a listing or a HEAD request describes it.
type Object struct {
	URL  string
	Size int64
	// ETag identifies the object's version ("" when the server gives none, or when an index
	// described the object); resumed reads ask for the same one.
	ETag string
	// Modified is the object's Last-Modified date as a HEAD gave it ("" when unknown): the
	// version, for a server that gives no ETag.
	Modified string
}

// ErrTooLarge marks an object larger than a Get allows.
var ErrTooLarge = errors.New("object too large")

// ErrChanged marks a read that met two versions of an object: it was replaced while it was read,
// or since a listing or an index described it.
var ErrChanged = errors.New("object changed")

// storageError marks an error of the store (a refused request, retries run out, an object that
// changed), as opposed to bad bytes: see IsStorage. Its message is the wrapped one.
type storageError struct{ err error }

func (e *storageError) Error() string { return e.err.Error() }
func (e *storageError) Unwrap() error { return e.err }

func storage(err error) error {
	if err == nil || IsStorage(err) {
		return err
	}
	return &storageError{err}
}

// IsStorage reports whether err is the store's failure to deliver an object (an HTTP status
// refused or still failing after the retries, a network failure that outlasted them, an object
// that changed while it was read) rather than a fault of the object's bytes: skipping the sample
// would hide an outage.
func IsStorage(err error) bool {
	if _, ok := errors.AsType[*storageError](err); ok {
		return true
	}
	_, ok := errors.AsType[*StatusError](err)
	return ok
}

// NotFound reports whether err is a request for an object that does not exist (HTTP 404).
func NotFound(err error) bool {
	se, ok := errors.AsType[*StatusError](err)
	return ok && se.Status == http.StatusNotFound
}

// StatusError is a request the server refused with a status that is not retried (or that was still
// failing when the retries ran out).
type StatusError struct {
	URL    string
	Status int
	// Code is S3's error code ("NoSuchKey", "SlowDown", ...), "" for plain HTTP.
	Code string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// Defaults of Client.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultAttempts = 10
	defaultBackoff  = 200 * time.Millisecond
	maxBackoff      = 10 * time.Second
)

// Client reads remote objects. The zero value is ready to use with the defaults; a Client is safe
// for concurrent use.
type Client struct {
	// Timeout is how long a request may go without receiving a byte (headers or body) before it is
	// abandoned and retried (default DefaultTimeout).
	Timeout time.Duration
	// Attempts is how many times one read is tried before its last error is returned (default
	// DefaultAttempts).
	Attempts int
	// Backoff is the base of the exponential backoff between attempts (default 200ms); the wait
	// before attempt k is uniform in [0, Backoff*2^k), capped at 10s.
	Backoff time.Duration
	// HTTP is the client for http(s) URLs (default: a clone of http.DefaultTransport with more
	// idle connections per host); S3 requests use the SDK's client.
	HTTP *http.Client

	once sync.Once
	s3   *s3Backend
	web  *httpBackend
}

// backend is one protocol: stat and one ranged GET attempt, without retries.
type backend interface {
	stat(ctx context.Context, u *url.URL) (Object, error)
	// get returns the bytes [off, end) of obj (end < 0: to the end), as stored (no transparent
	// decoding), and the response's validators. The body's errors are classified by retryable.
	get(ctx context.Context, obj Object, u *url.URL, off, end int64) (io.ReadCloser, validator, error)
	list(ctx context.Context, u *url.URL, prefix string) ([]Object, error)
}

func (c *Client) init() {
	c.once.Do(func() {
		if c.HTTP == nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.MaxIdleConnsPerHost = 64
			t.DisableCompression = true // the bytes as stored: a .tar.gz sent gzip-encoded stays gzip
			c.HTTP = &http.Client{Transport: t}
		}
		c.web = &httpBackend{client: c.HTTP}
		c.s3 = &s3Backend{}
	})
}

func (c *Client) backend(raw string) (backend, *url.URL, error) {
	c.init()
	if rest, ok := strings.CutPrefix(raw, "s3://"); ok {
		// An S3 key is taken as it is written: "#", "?" and "%20" are characters of the key, not
		// a fragment, a query and an escape.
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, nil, fmt.Errorf("%s: no bucket", raw)
		}
		return c.s3, &url.URL{Scheme: "s3", Host: bucket, Path: "/" + key}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	switch u.Scheme {
	case "s3":
		if u.Host == "" {
			return nil, nil, fmt.Errorf("%s: no bucket", raw)
		}
		return c.s3, u, nil
	case "http", "https":
		return c.web, u, nil
	}
	return nil, nil, fmt.Errorf("%s: scheme %q, want s3, http or https", raw, u.Scheme)
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Stat returns the object at url with its size and ETag.
func (c *Client) Stat(ctx context.Context, url string) (Object, error) {
	b, u, err := c.backend(url)
	if err != nil {
		return Object{}, err
	}
	var obj Object
	err = c.retry(ctx, url, func(ctx context.Context) error {
		var err error
		obj, err = b.stat(ctx, u)
		return err
	})
	return obj, err
}

// Get returns the whole object at url, read by one GET (retried as a whole), or an error when it
// holds more than limit bytes. A missing object is a *StatusError with Status 404.
func (c *Client) Get(ctx context.Context, url string, limit int64) ([]byte, error) {
	b, u, err := c.backend(url)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = c.retryStall(ctx, url, func(ctx context.Context, progress func()) error {
		body, _, err := b.get(ctx, Object{URL: url, Size: -1}, u, 0, -1)
		if err != nil {
			return err
		}
		defer body.Close()
		progress()
		out, err = io.ReadAll(io.LimitReader(progressReader{body, progress}, limit+1))
		return err
	})
	if ctx.Err() != nil {
		// A body cut by the caller's cancellation can read as a short, successful one.
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes: %w", url, limit, ErrTooLarge)
	}
	return out, nil
}

// List returns the objects whose URL matches pattern, sorted by URL: pattern is an s3:// URL whose
// key may hold path.Match wildcards (the listing covers the prefix before the first one; * does
// not cross a slash). http(s) servers cannot be listed: a pattern without wildcards is returned as
// the one object it names.
func (c *Client) List(ctx context.Context, pattern string) ([]Object, error) {
	b, u, err := c.backend(pattern)
	if err != nil {
		return nil, err
	}
	key := strings.TrimPrefix(u.Path, "/")
	meta := strings.IndexAny(key, `*?[\`)
	if meta < 0 {
		obj, err := c.Stat(ctx, pattern)
		if err != nil {
			return nil, err
		}
		return []Object{obj}, nil
	}
	if u.Scheme != "s3" {
		return nil, fmt.Errorf("%s: wildcards need a listing, which %s servers do not give "+
			"(name the files with {000..009} braces or an index.json)", pattern, u.Scheme)
	}
	if _, err := path.Match(key, ""); err != nil {
		return nil, fmt.Errorf("%s: %w", pattern, err)
	}
	var all []Object
	err = c.retry(ctx, pattern, func(ctx context.Context) error {
		var err error
		all, err = b.list(ctx, u, key[:meta])
		return err
	})
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, o := range all {
		if ok, _ := path.Match(key, strings.TrimPrefix(o.URL, "s3://"+u.Host+"/")); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// retry runs attempt until it succeeds, fails permanently, or runs out of attempts; each attempt
// gets a context that is cancelled when it exceeds the timeout.
func (c *Client) retry(ctx context.Context, url string, attempt func(context.Context) error) error {
	return c.retryStall(ctx, url, func(ctx context.Context, _ func()) error { return attempt(ctx) })
}

// retryStall is retry for attempts that receive a body: each attempt's context is cancelled when
// it goes Timeout without calling progress (a stall), not when it takes longer than Timeout.
func (c *Client) retryStall(ctx context.Context, url string, attempt func(ctx context.Context, progress func()) error) error {
	var err error
	for k := range c.attempts() {
		if k > 0 {
			if werr := c.wait(ctx, k); werr != nil {
				return fmt.Errorf("%s: %w (after %v)", url, werr, err)
			}
		}
		actx, cancel := context.WithCancelCause(ctx)
		stall := fmt.Errorf("%s: no byte for %v: %w", url, c.timeout(), context.DeadlineExceeded)
		t := time.AfterFunc(c.timeout(), func() { cancel(stall) })
		err = attempt(actx, func() { t.Reset(c.timeout()) })
		t.Stop()
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%v)", context.Cause(actx), err)
		}
		cancel(nil)
		if err == nil {
			return nil
		}
		if !retryable(ctx, err) {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", url, ctx.Err())
			}
			return storage(err)
		}
	}
	return storage(fmt.Errorf("%s: gave up after %d attempts: %w", url, c.attempts(), err))
}

// progressReader calls progress after every read that returned bytes.
type progressReader struct {
	r        io.Reader
	progress func()
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.progress()
	}
	return n, err
}

func (c *Client) attempts() int {
	if c.Attempts > 0 {
		return c.Attempts
	}
	return DefaultAttempts
}

// wait sleeps before attempt k (k >= 1): full jitter over an exponential window.
func (c *Client) wait(ctx context.Context, k int) error {
	base := c.Backoff
	if base <= 0 {
		base = defaultBackoff
	}
	window := min(base<<min(k-1, 20), maxBackoff)
	t := time.NewTimer(rand.N(window) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable tells transient failures from permanent ones. The caller's own cancellation is never
// retried; an attempt's timeout is.
func retryable(parent context.Context, err error) bool {
	if parent.Err() != nil {
		return false
	}
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.Status >= 500 || se.Status == http.StatusTooManyRequests || se.Status == http.StatusRequestTimeout ||
			se.Code == "SlowDown" || se.Code == "RequestTimeout" || se.Code == "InternalError"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	// Errors the HTTP stack reports without a typed cause (a server closing a kept-alive
	// connection, a reset HTTP/2 stream).
	msg := err.Error()
	return strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "server closed idle connection") || strings.Contains(msg, "stream error") ||
		strings.Contains(msg, "use of closed network connection")
}

// checkBody checks that a response holds the bytes [off, end) of obj: a ranged one by its
// Content-Range ("bytes OFF-LAST/SIZE"), a whole one by its length (-1: not given; any with end
// < 0, a Get of an object not described). A server that
// sends other bytes, or those of an object of another size (replaced since a listing or an index
// described it), would splice them into the reads: that is a permanent error.
func checkBody(obj Object, off, end int64, ranged bool, contentRange string, length int64) error {
	if length >= 0 && end >= 0 && length != end-off {
		return fmt.Errorf("%s: asked for bytes %d-%d of an object of %d, the server sent %d bytes (Content-Range %q): "+
			"the object changed since it was described, or the server mishandles ranges",
			obj.URL, off, end-1, obj.Size, length, contentRange)
	}
	if !ranged {
		return nil
	}
	first, last, size, ok := parseContentRange(contentRange)
	if !ok || first != off || last != end-1 || (size >= 0 && size != obj.Size) {
		return fmt.Errorf("%s: asked for bytes %d-%d of an object of %d, the server sent Content-Range %q: "+
			"the object changed since it was described, or the server mishandles ranges",
			obj.URL, off, end-1, obj.Size, contentRange)
	}
	return nil
}

// parseContentRange parses "bytes FIRST-LAST/SIZE", SIZE -1 for "*".
func parseContentRange(s string) (first, last, size int64, ok bool) {
	s, ok = strings.CutPrefix(s, "bytes ")
	r, total, ok2 := strings.Cut(s, "/")
	a, b, ok3 := strings.Cut(r, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(b, 10, 64)
	size = -1
	if total != "*" {
		size, err3 = strconv.ParseInt(total, 10, 64)
	}
	return first, last, size, err1 == nil && err2 == nil && err3 == nil && first >= 0 && last >= first
}
