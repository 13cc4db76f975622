package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/remote/remotetest"
)

// TestS3 runs against the S3-compatible server of remotetest.S3EndpointEnv (skipped without one):
// listing with a wildcard, ranged reads, a permanent error with S3's code, and the same reads
// through a proxy that injects every fault.
func TestS3(t *testing.T) {
	files := map[string][]byte{
		"data/shard-000000.tar": blob(200_000, 30),
		"data/shard-000001.tar": blob(150_000, 31),
		"data/other.txt":        []byte("not a shard"),
	}
	bucket := remotetest.S3(t, files)
	ctx := context.Background()
	read := func(c *Client) {
		t.Helper()
		objs, err := c.List(ctx, "s3://"+bucket+"/data/shard-*.tar")
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 2 || objs[0].URL != "s3://"+bucket+"/data/shard-000000.tar" || objs[1].Size != 150_000 {
			t.Fatalf("listing %+v", objs)
		}
		for _, o := range objs {
			f, err := c.OpenObject(o)
			if err != nil {
				t.Fatal(err)
			}
			want := files[o.URL[len("s3://"+bucket+"/"):]]
			got, err := io.ReadAll(f.NewReader(0))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes, %v", o.URL, len(got), err)
			}
			p := make([]byte, 5000)
			if _, err := f.ReadAt(p, 12345); err != nil || !bytes.Equal(p, want[12345:17345]) {
				t.Fatalf("%s: ReadAt: %v", o.URL, err)
			}
			f.Close()
		}
	}
	read(&Client{})
	_, err := (&Client{}).Stat(ctx, "s3://"+bucket+"/data/missing.tar")
	if se, ok := errors.AsType[*StatusError](err); !ok || se.Status != 404 {
		t.Fatalf("missing object: %v, want a 404 StatusError", err)
	}
	h := remotetest.S3Proxy(t, remotetest.AllFaults)
	read(&Client{Timeout: 500 * time.Millisecond, Backoff: time.Millisecond})
	if n := h.Requests(bucket + "/data/shard-000000.tar"); n < 3 {
		t.Fatalf("%d GETs through the faulty proxy; the faults were not met", n)
	}
}

// TestS3OddKeys: keys with "#", "?", "%20" and spaces are read as they are written, by a listing,
// a HEAD and ranged reads, against the S3-compatible server (skipped without one).
func TestS3OddKeys(t *testing.T) {
	files := map[string][]byte{
		"odd/a#1.tar":   blob(3000, 70),
		"odd/b%201.tar": blob(3000, 71),
		"odd/c?x.tar":   blob(3000, 72),
		"odd/d e.tar":   blob(3000, 73),
	}
	bucket := remotetest.S3(t, files)
	ctx := context.Background()
	c := &Client{Backoff: time.Millisecond}
	objs, err := c.List(ctx, "s3://"+bucket+"/odd/*.tar")
	if err != nil || len(objs) != len(files) {
		t.Fatalf("listing: %+v, %v; want %d objects", objs, err, len(files))
	}
	for _, o := range objs {
		key := strings.TrimPrefix(o.URL, "s3://"+bucket+"/")
		want, ok := files[key]
		if !ok {
			t.Fatalf("listing names %s, not one of the keys", o.URL)
		}
		st, err := c.Stat(ctx, o.URL)
		if err != nil || st.URL != o.URL || st.Size != int64(len(want)) {
			t.Fatalf("Stat(%s) = %+v, %v", o.URL, st, err)
		}
		f, _ := c.OpenObject(o)
		p := make([]byte, 1000)
		if _, err := f.ReadAt(p, 1000); err != nil || !bytes.Equal(p, want[1000:2000]) {
			t.Fatalf("%s: ReadAt: %v (same bytes: %v)", o.URL, err, bytes.Equal(p, want[1000:2000]))
		}
		f.Close()
	}
}

// s3FaultProxy starts a proxy to the S3 server (remotetest.S3 must have run first) whose first GET
// meets fault (given the request and the proxy's handler) and whose others pass; it points
// AWS_ENDPOINT_URL_S3 at it. The proxy keeps the Host header, so signatures still hold.
func s3FaultProxy(t *testing.T, fault func(w http.ResponseWriter, r *http.Request, next http.Handler)) {
	t.Helper()
	target, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_S3"))
	if err != nil {
		t.Fatal(err)
	}
	next := httputil.NewSingleHostReverseProxy(target)
	var gets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") && gets.Add(1) == 1 {
			fault(w, r, next)
			return
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
}

// TestS3ReplacedMidDownload: against the S3-compatible server, an object that an index described
// (no ETag) replaced by another of the same size in the middle of a read is never spliced, whether
// the server honours If-Match or a proxy strips it; a stall before the headers is retried.
func TestS3ReplacedMidDownload(t *testing.T) {
	v1, v2 := blob(300_000, 80), blob(300_000, 81)
	t.Run("versitygw", func(t *testing.T) {
		bucket := remotetest.S3(t, map[string][]byte{"r/a.tar": v1})
		s3FaultProxy(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			next.ServeHTTP(remotetest.CutAfter(w, 100_000, func() { remotetest.S3Put(t, bucket, "r/a.tar", v2) }), r)
		})
		readReplaced(t, "s3://"+bucket+"/r/a.tar", v1, v2)
	})
	t.Run("a server that ignores If-Match", func(t *testing.T) {
		// An S3 endpoint (path-style: /BUCKET/KEY) of the same answers; If-Match, a signed
		// header, cannot be stripped by a proxy in front of versitygw.
		st := &remotetest.Store{IgnoreIfMatch: true}
		st.Put("bucket/r/a.tar", v1)
		st.CutThenPut("bucket/r/a.tar", 100_000, v2)
		fakeS3(t, st)
		readReplaced(t, "s3://bucket/r/a.tar", v1, v2)
	})
	t.Run("stall before the headers", func(t *testing.T) {
		bucket := remotetest.S3(t, map[string][]byte{"r/a.tar": v1})
		s3FaultProxy(t, func(w http.ResponseWriter, r *http.Request, _ http.Handler) { <-r.Context().Done() })
		c := &Client{Backoff: time.Millisecond, Timeout: 300 * time.Millisecond}
		f, _ := c.OpenObject(Object{URL: "s3://" + bucket + "/r/a.tar", Size: int64(len(v1))})
		defer f.Close()
		if got, err := io.ReadAll(f.NewReader(0)); err != nil || !bytes.Equal(got, v1) {
			t.Fatalf("read after a stall before the headers: %d bytes, %v; want the object", len(got), err)
		}
	})
}

// readReplaced reads url, an object of v1's size replaced by v2 in the middle of the read, and
// fails t unless the read fails with ErrChanged or HTTP 412.
func readReplaced(t *testing.T, url string, v1, v2 []byte) {
	t.Helper()
	c := &Client{Backoff: time.Millisecond, Timeout: 5 * time.Second}
	f, _ := c.OpenObject(Object{URL: url, Size: int64(len(v1))}) // as an index describes it: no ETag
	defer f.Close()
	got, err := io.ReadAll(f.NewReader(0))
	if err == nil {
		t.Fatalf("read of an object replaced mid-read: %d bytes (v1: %v, v2: %v), no error", len(got), bytes.Equal(got, v1), bytes.Equal(got, v2))
	}
	if !IsStorage(err) || !(errors.Is(err, ErrChanged) || strings.Contains(err.Error(), "412")) {
		t.Fatalf("error %v; want ErrChanged or HTTP 412", err)
	}
}

// fakeS3 serves h as the S3 endpoint (path-style: /BUCKET/KEY), with test credentials, for t's
// duration.
func fakeS3(t *testing.T, h http.Handler) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
}
