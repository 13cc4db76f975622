// Package remotetest serves files over HTTP(S) for tests of remote reading, with faults injected in
// a loop: a connection cut in the middle of a body, HTTP 503, S3's SlowDown, and a stall longer than
// the reader's timeout.
package remotetest

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what one request meets.
type Fault int

const (
	// None serves the request.
	None Fault = iota
	// Cut sends the headers and part of the body, then drops the connection.
	Cut
	// Unavailable answers 503 Service Unavailable.
	Unavailable
	// SlowDown answers 503 with S3's SlowDown error document.
	SlowDown
	// Stall sends part of the body, then nothing until the client gives up.
	Stall
)

// AllFaults is each fault once, followed by a healthy request.
var AllFaults = []Fault{Cut, Unavailable, SlowDown, Stall, None}

// Handler serves files (name without the leading slash -> content) with range requests and ETags,
// or passes the requests to Next when it is set (a proxy to a store), meeting the GET requests with
// faults[k % len(faults)] for the k-th GET (nil: no faults).
type Handler struct {
	Files  map[string][]byte
	Next   http.Handler
	Faults []Fault

	mu     sync.Mutex
	gets   atomic.Int64
	counts map[string]int
	bytes  map[string]int64
}

// Requests returns how many GET requests named file (those answered 404 included).
func (h *Handler) Requests(file string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[file]
}

// Bytes returns how many body bytes the GET requests of file were sent.
func (h *Handler) Bytes(file string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes[file]
}

// countingWriter adds the body bytes it writes to its file's count.
type countingWriter struct {
	http.ResponseWriter
	h    *Handler
	name string
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.h.mu.Lock()
	c.h.bytes[c.name] += int64(n)
	c.h.mu.Unlock()
	return n, err
}

// Flush lets a proxy flush.
func (c *countingWriter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	get := r.Method == http.MethodGet && !r.URL.Query().Has("list-type")
	if get {
		h.mu.Lock()
		if h.counts == nil {
			h.counts, h.bytes = map[string]int{}, map[string]int64{}
		}
		h.counts[name]++
		h.mu.Unlock()
	}
	serve := h.Next
	if serve == nil {
		b, ok := h.Files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1-`+name+`"`)
		serve = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
		})
	}
	if !get {
		serve.ServeHTTP(w, r) // HEAD, and S3's listings
		return
	}
	w = &countingWriter{ResponseWriter: w, h: h, name: name}
	fault := None
	if len(h.Faults) > 0 {
		fault = h.Faults[(h.gets.Add(1)-1)%int64(len(h.Faults))]
	}
	switch fault {
	case Unavailable:
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	case SlowDown:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
		return
	case Cut, Stall:
		w = &breakingWriter{ResponseWriter: w, left: 100, fault: fault, r: r}
	}
	serve.ServeHTTP(w, r)
}

// breakingWriter lets left bytes of the body through, then cuts the connection or stalls.
type breakingWriter struct {
	http.ResponseWriter
	left  int
	fault Fault
	r     *http.Request
}

// Flush lets a proxy flush without skipping the fault.
func (b *breakingWriter) Flush() { b.ResponseWriter.(http.Flusher).Flush() }

func (b *breakingWriter) Write(p []byte) (int, error) {
	if len(p) <= b.left {
		b.left -= len(p)
		return b.ResponseWriter.Write(p)
	}
	b.ResponseWriter.Write(p[:b.left])
	b.ResponseWriter.(http.Flusher).Flush()
	if b.fault == Stall {
		select {
		case <-b.r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
	panic(http.ErrAbortHandler) // drops the connection without a proper end of body
}
