package remote

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// httpBackend reads http:// and https:// URLs with HEAD and ranged GET requests.
type httpBackend struct{ client *http.Client }

func (h *httpBackend) stat(ctx context.Context, u *url.URL) (Object, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return Object{}, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return Object{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Object{}, &StatusError{URL: u.String(), Status: resp.StatusCode}
	}
	if resp.ContentLength < 0 {
		return Object{}, fmt.Errorf("%s: the server gives no Content-Length", u)
	}
	return Object{URL: u.String(), Size: resp.ContentLength, ETag: resp.Header.Get("ETag")}, nil
}

func (h *httpBackend) get(ctx context.Context, obj Object, u *url.URL, off, end int64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	ranged := off > 0 || end < obj.Size
	if ranged {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(end-1, 10))
	}
	// A strong ETag pins the version; a weak one cannot (If-Match compares strongly).
	if obj.ETag != "" && !strings.HasPrefix(obj.ETag, "W/") {
		req.Header.Set("If-Match", obj.ETag)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	want := http.StatusOK
	if ranged {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		resp.Body.Close()
		if ranged && resp.StatusCode == http.StatusOK {
			return nil, fmt.Errorf("%s: the server ignored a range request (HTTP 200 for bytes %d-%d)", u, off, end-1)
		}
		return nil, &StatusError{URL: u.String(), Status: resp.StatusCode}
	}
	if err := checkBody(obj, off, end, ranged, resp.Header.Get("Content-Range"), resp.ContentLength); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

func (h *httpBackend) list(_ context.Context, u *url.URL, _ string) ([]Object, error) {
	return nil, fmt.Errorf("%s: %s servers cannot be listed", u, u.Scheme)
}
