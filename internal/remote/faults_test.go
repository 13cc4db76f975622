package remote

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/remote/remotetest"
)

// TestReplacedMidDownloadIsNotSpliced: an object replaced (same size) while a download of it is
// under way, and the download resumed after a cut, is never delivered as half of each version:
// whether the ETag was known before the first request (a listing) or not (an index), whether the
// server honours If-Match or ignores it, and with Last-Modified the only validator.
func TestReplacedMidDownloadIsNotSpliced(t *testing.T) {
	v1, v2 := blob(200_000, 50), blob(200_000, 51)
	for _, tc := range []struct {
		name          string
		knownETag     bool
		ignoreIfMatch bool
		noETag        bool
	}{
		{"index (no ETag known)", false, false, false},
		{"index, server ignores If-Match", false, true, false},
		{"listing, server ignores If-Match", true, true, false},
		{"index, Last-Modified only", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &remotetest.Store{IgnoreIfMatch: tc.ignoreIfMatch, NoETag: tc.noETag}
			st.Put("a.tar", v1)
			srv, c := serve(t, st)
			obj := Object{URL: srv.URL + "/a.tar", Size: int64(len(v1))}
			if tc.knownETag {
				var err error
				if obj, err = c.Stat(context.Background(), obj.URL); err != nil {
					t.Fatal(err)
				}
			}
			st.CutThenPut("a.tar", 70_000, v2)
			f, err := c.OpenObject(obj)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := io.ReadAll(f.NewReader(0))
			if err == nil {
				t.Fatalf("read of an object replaced mid-download: %d bytes (v1: %v, v2: %v), no error; want ErrChanged or HTTP 412",
					len(got), bytes.Equal(got, v1), bytes.Equal(got, v2))
			}
			if !errors.Is(err, ErrChanged) && !strings.Contains(err.Error(), "412") {
				t.Fatalf("error %v; want ErrChanged or HTTP 412", err)
			}
			if !IsStorage(err) || !strings.Contains(err.Error(), obj.URL) {
				t.Fatalf("error %v: want a storage error naming %s", err, obj.URL)
			}
		})
	}
}

// TestS3FaultsBeforeResponse: over s3://, a refused connection and a connection reset before any
// byte are retried like over http://, and the error names the cause, never "HTTP 0".
func TestS3FaultsBeforeResponse(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+addr)
		c := &Client{Attempts: 3, Backoff: time.Millisecond, Timeout: time.Second}
		_, err = c.Stat(context.Background(), "s3://bucket/a.tar")
		if err == nil || strings.Contains(err.Error(), "HTTP 0") || !strings.Contains(err.Error(), "connection refused") ||
			!strings.Contains(err.Error(), "gave up after 3 attempts") || !IsStorage(err) {
			t.Fatalf("Stat of a refused endpoint: %v; want the cause (connection refused) after 3 attempts", err)
		}
	})
	t.Run("reset before any byte", func(t *testing.T) {
		data := blob(5000, 52)
		var n int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n++
			if n <= 2 {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
				conn.Close()
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Header().Set("ETag", `"e"`)
			w.Write(data)
		}))
		t.Cleanup(srv.Close)
		t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
		c := &Client{Backoff: time.Millisecond, Timeout: time.Second}
		f, _ := c.OpenObject(Object{URL: "s3://bucket/a.tar", Size: int64(len(data))})
		got, err := io.ReadAll(f.NewReader(0))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read through two resets: %d bytes, %v; want the object", len(got), err)
		}
	})
}

// TestSlowTransferIsNotAStall: a body that arrives steadily but takes longer than Timeout in all
// is not abandoned: the limit is on the time without a byte.
func TestSlowTransferIsNotAStall(t *testing.T) {
	data := blob(2000, 53)
	var gets int
	srv, c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets++
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		for i := 0; i < len(data); i += 100 {
			w.Write(data[i : i+100])
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond) // 400 ms in all; Timeout is 150 ms
		}
	}))
	got, err := c.Get(context.Background(), srv.URL+"/index.json", 1<<20)
	if err != nil || !bytes.Equal(got, data) || gets != 1 {
		t.Fatalf("Get of a slow, steady body: %d bytes, %v, %d GETs; want it whole in one GET", len(got), err, gets)
	}
}

// TestGzipEncodedObjectReadAsStored: a .tar.gz served with Content-Encoding: gzip is read as the
// stored bytes, by Get, by a whole-object read and by ranges.
func TestGzipEncodedObjectReadAsStored(t *testing.T) {
	var buf bytes.Buffer
	zw := newGzip(&buf)
	zw.Write(blob(50_000, 54))
	zw.Close()
	stored := buf.Bytes()
	st := &remotetest.Store{ContentEncoding: "gzip"}
	st.Put("a.tar.gz", stored)
	srv, c := serve(t, st)
	url := srv.URL + "/a.tar.gz"
	got, err := c.Get(context.Background(), url, 1<<20)
	if err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("Get: %d bytes (stored %d), %v; want the stored bytes", len(got), len(stored), err)
	}
	f, err := c.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err = io.ReadAll(f.NewReader(0))
	if err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("whole read: %d bytes (stored %d), %v; want the stored bytes", len(got), len(stored), err)
	}
}

// TestReadAtContextEndsOnCancel: a read of a stalled server ends with the caller's context, well
// before the stall limit.
func TestReadAtContextEndsOnCancel(t *testing.T) {
	srv, c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // headers never come
	}))
	c.Timeout = time.Minute
	f, _ := c.OpenObject(Object{URL: srv.URL + "/a.tar", Size: 1000, ETag: `"e"`})
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.ReadAtContext(ctx, make([]byte, 100), 0)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("ReadAtContext on a stalled server: %v after %v; want the context's error within a second", err, time.Since(start))
	}
}

func newGzip(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }
