package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
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
