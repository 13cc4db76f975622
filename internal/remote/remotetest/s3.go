package remotetest

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3EndpointEnv names the variable that points the tests at an S3-compatible server (CI starts one
// on 127.0.0.1); tests that need it skip when it is unset. Its credentials are AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY.
const S3EndpointEnv = "STOKE_TEST_S3_ENDPOINT"

var buckets atomic.Int64

// S3 skips t unless S3EndpointEnv is set; otherwise it points the AWS configuration of this process
// at that server (AWS_ENDPOINT_URL_S3, for t's duration), creates a new bucket, uploads files into
// it (key -> content), and returns the bucket's name.
func S3(t testing.TB, files map[string][]byte) string {
	t.Helper()
	endpoint := os.Getenv(S3EndpointEnv)
	if endpoint == "" {
		t.Skipf("no S3-compatible server: set %s (and AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), as .ci/run does", S3EndpointEnv)
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	bucket := fmt.Sprintf("stoke-test-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6, buckets.Add(1))
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s at %s: %v", bucket, endpoint, err)
	}
	for key, b := range files {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
			t.Fatalf("upload s3://%s/%s: %v", bucket, key, err)
		}
	}
	t.Cleanup(func() {
		for key := range files {
			c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		}
		c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	return bucket
}

// S3Proxy starts a proxy to the S3 server (S3 must have run first) that meets its GETs with faults,
// and points AWS_ENDPOINT_URL_S3 at it. The proxy keeps the Host header, so signatures still hold.
func S3Proxy(t testing.TB, faults []Fault) *Handler {
	t.Helper()
	target, err := url.Parse(strings.TrimSpace(os.Getenv("AWS_ENDPOINT_URL_S3")))
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Next: httputil.NewSingleHostReverseProxy(target), Faults: faults}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	return h
}
