package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// s3Backend reads s3://BUCKET/KEY through the AWS SDK, configured the standard way: credentials
// from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws/{config,credentials} (or an
// instance role), the region from AWS_REGION (us-east-1 when none is set), and an S3-compatible
// store's endpoint from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (or endpoint_url in the profile).
// With a custom endpoint, buckets are addressed by path (http://host:port/BUCKET/KEY), which
// S3-compatible servers on a local address need. The SDK's own retries are off: the Client's retry
// loop covers S3 and HTTP alike and resumes broken bodies.
type s3Backend struct {
	once   sync.Once
	client *s3.Client
	err    error
}

func (b *s3Backend) s3(ctx context.Context) (*s3.Client, error) {
	b.once.Do(func() {
		// The SDK's own HTTP client, so that AWS_CA_BUNDLE applies; more idle connections per host
		// for the workers' concurrent range reads.
		hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.MaxIdleConnsPerHost = 64 })
		cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(hc))
		if err != nil {
			b.err = fmt.Errorf("s3: AWS configuration: %w", err)
			return
		}
		if cfg.Region == "" {
			cfg.Region = "us-east-1"
		}
		b.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.UsePathStyle = o.BaseEndpoint != nil
			o.Retryer = aws.NopRetryer{}
			// Range reads cannot be checked against a whole-object checksum, and S3-compatible
			// stores differ in which checksums they know.
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		})
	})
	return b.client, b.err
}

func (b *s3Backend) stat(ctx context.Context, u *url.URL) (Object, error) {
	c, err := b.s3(ctx)
	if err != nil {
		return Object{}, err
	}
	out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(u.Host), Key: aws.String(s3Key(u))})
	if err != nil {
		return Object{}, s3Error(u.String(), err)
	}
	return Object{URL: u.String(), Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}, nil
}

func (b *s3Backend) get(ctx context.Context, obj Object, u *url.URL, off, end int64) (io.ReadCloser, error) {
	c, err := b.s3(ctx)
	if err != nil {
		return nil, err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(u.Host), Key: aws.String(s3Key(u))}
	ranged := off > 0 || end < obj.Size
	if ranged {
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end-1, 10))
	}
	if obj.ETag != "" {
		in.IfMatch = aws.String(obj.ETag)
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		return nil, s3Error(obj.URL, err)
	}
	length := int64(-1)
	if out.ContentLength != nil {
		length = *out.ContentLength
	}
	if err := checkBody(obj, off, end, ranged, aws.ToString(out.ContentRange), length); err != nil {
		out.Body.Close()
		return nil, err
	}
	return out.Body, nil
}

func (b *s3Backend) list(ctx context.Context, u *url.URL, prefix string) ([]Object, error) {
	c, err := b.s3(ctx)
	if err != nil {
		return nil, err
	}
	var out []Object
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(u.Host), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s3Error("s3://"+u.Host+"/"+prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, Object{URL: "s3://" + u.Host + "/" + aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)})
		}
	}
	return out, nil
}

func s3Key(u *url.URL) string { return strings.TrimPrefix(u.Path, "/") }

// s3Error turns the SDK's error for a refused request into a *StatusError with S3's code; transport
// errors are returned as they are, for retryable to classify.
func s3Error(url string, err error) error {
	re, ok := errors.AsType[*smithyhttp.ResponseError](err)
	if !ok {
		return err
	}
	se := &StatusError{URL: url, Status: re.HTTPStatusCode()}
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		se.Code = ae.ErrorCode()
	}
	return se
}
