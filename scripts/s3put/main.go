// Command s3put uploads the files of a folder to an S3-compatible store, for CI and benchmarks:
//
//	go run ./scripts/s3put DIR s3://BUCKET/PREFIX
//
// creates BUCKET if needed and puts every file under DIR at PREFIX/PATH. It is configured like
// Stoke's reads (the standard AWS variables and files; AWS_ENDPOINT_URL_S3 for a local store,
// addressed by path).
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "s3put:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: s3put DIR s3://BUCKET/PREFIX")
	}
	dir := args[0]
	u, err := url.Parse(args[1])
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return fmt.Errorf("%q: want s3://BUCKET/PREFIX", args[1])
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = o.BaseEndpoint != nil
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(u.Host)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", u.Host, err)
	}
	n := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		key := path.Join(strings.TrimPrefix(u.Path, "/"), filepath.ToSlash(rel))
		fh, err := os.Open(p)
		if err != nil {
			return err
		}
		defer fh.Close()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(u.Host), Key: aws.String(key), Body: fh}); err != nil {
			return fmt.Errorf("put s3://%s/%s: %w", u.Host, key, err)
		}
		n++
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("s3put: %d files from %s to %s\n", n, dir, args[1])
	return nil
}
