// Package hub finds weights files by the names PyTorch, torchvision, timm and Hugging Face users
// give them, downloading each once into a cache as torch.hub and huggingface_hub do:
//
//   - a path to a file: the file itself;
//   - an http:// or https:// URL;
//   - "hf-hub:ORG/NAME" or "hf-hub:ORG/NAME@REVISION" (timm's names for the Hugging Face hub,
//     "hf-hub:timm/convnext_atto.d2_in1k"): the repository's model.safetensors, or its
//     pytorch_model.bin where it has none, from $HF_ENDPOINT (https://huggingface.co by default);
//   - torchvision's weight names for the ResNet family, "resnet50.IMAGENET1K_V2" (the model, a
//     dot and the member of its Weights enum; DEFAULT is the newest).
//
// A file whose name ends as torchvision's do, NAME-HASH.pth, is checked against the HASH prefix of
// its SHA-256, as torch.hub's check_hash does. The cache is $STOKE_CACHE/weights, or the user's
// cache folder's stoke/weights ($XDG_CACHE_HOME, ~/.cache): a file there is used without asking
// the network again.
package hub

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/internal/atomicfile"
)

// ErrName: a name that is no file, URL, hf-hub: repository or torchvision weights name.
var ErrName = errors.New("no weights of that name")

// maxDownload bounds a download (vit_h_14's weights are 2.5 GB).
const maxDownload = 16 << 30

// torchvision are torchvision's weights of the ResNet family, by model and Weights member.
var torchvision = map[string]string{
	"resnet18.IMAGENET1K_V1":         "resnet18-f37072fd.pth",
	"resnet34.IMAGENET1K_V1":         "resnet34-b627a593.pth",
	"resnet50.IMAGENET1K_V1":         "resnet50-0676ba61.pth",
	"resnet50.IMAGENET1K_V2":         "resnet50-11ad3fa6.pth",
	"resnet101.IMAGENET1K_V1":        "resnet101-63fe2227.pth",
	"resnet101.IMAGENET1K_V2":        "resnet101-cd907fc2.pth",
	"resnet152.IMAGENET1K_V1":        "resnet152-394f9c45.pth",
	"resnet152.IMAGENET1K_V2":        "resnet152-f82ba261.pth",
	"resnext50_32x4d.IMAGENET1K_V1":  "resnext50_32x4d-7cdf4587.pth",
	"resnext50_32x4d.IMAGENET1K_V2":  "resnext50_32x4d-1a0047aa.pth",
	"resnext101_32x8d.IMAGENET1K_V1": "resnext101_32x8d-8ba56ff5.pth",
	"resnext101_32x8d.IMAGENET1K_V2": "resnext101_32x8d-110c445d.pth",
	"resnext101_64x4d.IMAGENET1K_V1": "resnext101_64x4d-173b62eb.pth",
	"wide_resnet50_2.IMAGENET1K_V1":  "wide_resnet50_2-95faca4d.pth",
	"wide_resnet50_2.IMAGENET1K_V2":  "wide_resnet50_2-9ba9bcbe.pth",
	"wide_resnet101_2.IMAGENET1K_V1": "wide_resnet101_2-32ee1156.pth",
	"wide_resnet101_2.IMAGENET1K_V2": "wide_resnet101_2-d733dc28.pth",
}

// client gives up on a server that does not answer: a dial, a TLS handshake or the response's
// header that takes over a minute. A body that stops is caught by idle in download.
var client = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	TLSHandshakeTimeout:   30 * time.Second,
	ResponseHeaderTimeout: time.Minute,
}}

// idle is how long a download may receive nothing before it is abandoned.
var idle = time.Minute

// hashName is torchvision's file name, NAME-HASH.pth, HASH a prefix of the file's SHA-256.
var hashName = regexp.MustCompile(`-([0-9a-f]{8,64})\.pth$`)

// URL is where name's weights are downloaded from, and false for a name that is a local file or
// none of the forms above.
func URL(name string) (string, bool) {
	switch {
	case strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://"):
		return name, true
	case strings.HasPrefix(name, "hf-hub:"):
		repo, rev, ok := strings.Cut(strings.TrimPrefix(name, "hf-hub:"), "@")
		if !ok {
			rev = "main"
		}
		endpoint := strings.TrimSuffix(os.Getenv("HF_ENDPOINT"), "/")
		if endpoint == "" {
			endpoint = "https://huggingface.co"
		}
		return fmt.Sprintf("%s/%s/resolve/%s/model.safetensors", endpoint, repo, rev), true
	}
	model, member, ok := strings.Cut(name, ".")
	if member == "DEFAULT" {
		member = "IMAGENET1K_V2"
		if _, v2 := torchvision[model+"."+member]; !v2 {
			member = "IMAGENET1K_V1"
		}
	}
	if file, known := torchvision[model+"."+member]; ok && known {
		return "https://download.pytorch.org/models/" + file, true
	}
	return "", false
}

// Fetch returns the path of the weights name gives: the file itself, or the cached download of
// the file it names, downloaded now if the cache does not hold it. An unknown name gives an error
// wrapping ErrName.
func Fetch(ctx context.Context, name string) (string, error) {
	if _, err := os.Stat(name); err == nil {
		return name, nil
	}
	url, ok := URL(name)
	if !ok {
		return "", fmt.Errorf("hub: %w %q: not a file, an http(s):// URL, hf-hub:ORG/NAME nor torchvision's MODEL.WEIGHTS "+
			"(the ResNet family's: resnet50.IMAGENET1K_V2, resnet18.DEFAULT)", ErrName, name)
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	urls := []string{url}
	if strings.HasPrefix(name, "hf-hub:") {
		// A repository of PyTorch weights alone has pytorch_model.bin, torch.save's archive.
		urls = append(urls, strings.TrimSuffix(url, "model.safetensors")+"pytorch_model.bin")
	}
	cached := func(u string) string {
		sum := sha256.Sum256([]byte(u))
		return filepath.Join(dir, hex.EncodeToString(sum[:6])+"-"+baseName(u))
	}
	for _, u := range urls {
		if _, err := os.Stat(cached(u)); err == nil {
			return cached(u), nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	for _, u := range urls {
		err = download(ctx, u, cached(u))
		if err == nil {
			return cached(u), nil
		}
		if !errors.Is(err, errNotFound) {
			break
		}
	}
	return "", fmt.Errorf("hub: %s: %w", name, err)
}

// Dir is the cache's folder: $STOKE_CACHE/weights, or the user's cache folder's stoke/weights.
func Dir() (string, error) {
	if d := os.Getenv("STOKE_CACHE"); d != "" {
		return filepath.Join(d, "weights"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("hub: no cache folder (set STOKE_CACHE): %w", err)
	}
	return filepath.Join(d, "stoke", "weights"), nil
}

var errNotFound = errors.New("not found (404)")

// baseName is the file name of u's path, without its query ("model.safetensors?download=true").
func baseName(u string) string {
	if p, err := url.Parse(u); err == nil && path.Base(p.Path) != "/" && path.Base(p.Path) != "." {
		return path.Base(p.Path)
	}
	return "weights"
}

// download writes url's body to local atomically, checking a torchvision name's hash and that
// the body is a weights file (a login or error page served with 200 is not cached).
func download(ctx context.Context, url, local string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	stalled := fmt.Errorf("%s: nothing received for %v", url, idle)
	watchdog := time.AfterFunc(idle, func() { cancel(stalled) })
	defer watchdog.Stop()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", url, errNotFound)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: %s", url, resp.Status)
	case resp.ContentLength > maxDownload:
		return fmt.Errorf("%s: %d bytes, over the %d a weights file may have", url, resp.ContentLength, int64(maxDownload))
	}
	want := ""
	if m := hashName.FindStringSubmatch(baseName(url)); m != nil {
		want = m[1]
	}
	return atomicfile.Write(local, 0o644, func(w io.Writer) error {
		body := bufio.NewReader(&progress{resp.Body, watchdog})
		if head, _ := body.Peek(9); !weightsFile(head) {
			if context.Cause(ctx) == stalled {
				return stalled
			}
			return fmt.Errorf("%s: not a weights file: neither safetensors nor PyTorch's (it begins %q)", url, head)
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(body, maxDownload+1))
		switch {
		case context.Cause(ctx) == stalled:
			return stalled
		case err != nil:
			return fmt.Errorf("%s: %w", url, err)
		case n > maxDownload:
			return fmt.Errorf("%s: over the %d bytes a weights file may have", url, int64(maxDownload))
		case want != "" && !strings.HasPrefix(hex.EncodeToString(h.Sum(nil)), want):
			return fmt.Errorf("%s: its SHA-256 %x does not start with its name's %s (a damaged download)", url, h.Sum(nil), want)
		}
		return nil
	})
}

// progress restarts the watchdog on every read that brings bytes.
type progress struct {
	r        io.Reader
	watchdog *time.Timer
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.watchdog.Reset(idle)
	}
	return n, err
}

// weightsFile: head begins safetensors (a little-endian header length, then '{'), a zip archive
// (torch.save's) or a pickle (torch.save's legacy format, which the loaders name).
func weightsFile(head []byte) bool {
	switch {
	case len(head) >= 9 && head[8] == '{':
		return true
	case len(head) >= 4 && string(head[:4]) == "PK\x03\x04":
		return true
	case len(head) >= 2 && head[0] == 0x80 && head[1] <= 5:
		return true
	}
	return false
}
