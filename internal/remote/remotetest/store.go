package remotetest

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Store is an HTTP server's files whose versions change under the client: Put replaces a file (a
// new ETag and Last-Modified), and CutThenPut arranges that the next GET of a file is cut after some
// bytes, the file being replaced before the cut, as when an object is overwritten in the middle of a
// download. It answers HEAD and GET with ranges, If-Match, If-Range and If-None-Match (through
// http.ServeContent) unless told to ignore them.
type Store struct {
	// IgnoreIfMatch makes it serve whatever version it holds, whatever If-Match asks for (some
	// S3-compatible servers and CDNs do).
	IgnoreIfMatch bool
	// NoETag leaves ETags out: Last-Modified is the only validator.
	NoETag bool
	// ContentEncoding, when set, is sent as the Content-Encoding of every file (an object stored
	// with Content-Encoding: gzip metadata, served as stored).
	ContentEncoding string

	mu    sync.Mutex
	files map[string]*version
	cuts  map[string]cut
	gets  map[string]int
	heads map[string]int
	gen   int
}

type version struct {
	data []byte
	etag string
	mod  time.Time
}

type cut struct {
	after int
	then  []byte
}

// Put stores data as name's new version.
func (s *Store) Put(name string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(name, data)
}

func (s *Store) init() {
	if s.files == nil {
		s.files, s.cuts, s.gets, s.heads = map[string]*version{}, map[string]cut{}, map[string]int{}, map[string]int{}
	}
}

func (s *Store) put(name string, data []byte) {
	s.init()
	s.gen++
	// Dates a second apart, as Last-Modified has a resolution of a second.
	s.files[name] = &version{data: bytes.Clone(data), etag: fmt.Sprintf(`"v%d"`, s.gen), mod: time.Unix(1_700_000_000+int64(s.gen), 0)}
}

// CutThenPut makes the next GET of name send after bytes of its body, then store then as name's
// new version, then drop the connection.
func (s *Store) CutThenPut(name string, after int, then []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.cuts[name] = cut{after, bytes.Clone(then)}
}

// Requests returns how many requests of method (GET or HEAD) named name.
func (s *Store) Requests(method, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if method == http.MethodHead {
		return s.heads[name]
	}
	return s.gets[name]
}

func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	s.init()
	if r.Method == http.MethodHead {
		s.heads[name]++
	} else {
		s.gets[name]++
	}
	v, ok := s.files[name]
	c, cutting := s.cuts[name]
	if cutting && r.Method == http.MethodGet {
		delete(s.cuts, name)
	} else {
		cutting = false
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !s.NoETag {
		w.Header().Set("ETag", v.etag)
	}
	if s.ContentEncoding != "" {
		w.Header().Set("Content-Encoding", s.ContentEncoding)
		if r.Header.Get("Range") == "" {
			// ServeContent leaves the length out of an encoded response; S3 sends it.
			w.Header().Set("Content-Length", strconv.Itoa(len(v.data)))
		}
	}
	if s.IgnoreIfMatch {
		r.Header.Del("If-Match")
		r.Header.Del("If-Range")
		r.Header.Del("If-Unmodified-Since")
	}
	if cutting {
		w = CutAfter(w, c.after, func() { s.Put(name, c.then) })
	}
	http.ServeContent(w, r, name, v.mod, bytes.NewReader(v.data))
}

// CutAfter returns a writer that lets after bytes of the body through to w, then calls then (which
// may replace the object), then drops the connection.
func CutAfter(w http.ResponseWriter, after int, then func()) http.ResponseWriter {
	return &replacingWriter{ResponseWriter: w, left: after, replace: then}
}

// replacingWriter lets left bytes through, calls replace, then drops the connection.
type replacingWriter struct {
	http.ResponseWriter
	left    int
	replace func()
}

func (b *replacingWriter) Write(p []byte) (int, error) {
	if len(p) <= b.left {
		b.left -= len(p)
		return b.ResponseWriter.Write(p)
	}
	b.ResponseWriter.Write(p[:b.left])
	b.ResponseWriter.(http.Flusher).Flush()
	b.replace()
	panic(http.ErrAbortHandler)
}
