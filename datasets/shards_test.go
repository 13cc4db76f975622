package datasets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

func TestSplitMemberName(t *testing.T) {
	tests := []struct {
		name, key, ext string
		ok             bool
	}{
		{"000001.jpg", "000001", "jpg", true},
		{"dir/sub/a.b.SEG.png", "dir/sub/a", "b.seg.png", true},
		{"dir.x/a.cls", "dir.x/a", "cls", true},
		{"noext", "", "", false},
		{"dir/.hidden", "", "", false},
		{"__meta__", "", "", false},
		{"__key__.json", "__key__", "json", true},
	}
	for _, tc := range tests {
		key, ext, ok := splitMemberName(tc.name)
		if key != tc.key || ext != tc.ext || ok != tc.ok {
			t.Errorf("splitMemberName(%q) = %q, %q, %v; want %q, %q, %v", tc.name, key, ext, ok, tc.key, tc.ext, tc.ok)
		}
	}
}

// testSamples returns n samples alternating encoded PNG and raw pixels.
func testSamples(t testing.TB, n int) []loaders.Sample {
	out := make([]loaders.Sample, n)
	for i := range out {
		out[i].Label = i % 3
		if i%2 == 0 {
			out[i].Input.Encoded = loadertest.PNG(t, 3+i, 2, byte(i))
		} else {
			px := make([]byte, 2*3*3)
			for j := range px {
				px[j] = byte(i * j)
			}
			out[i].Input = transforms.Input{Pixels: px, H: 2, W: 3, C: 3}
		}
	}
	return out
}

func writeShards(t testing.TB, pattern string, maxSamples int, samples []loaders.Sample) *ShardWriter {
	w, err := NewShardWriter(ShardWriterConfig{Pattern: pattern, MaxSamples: maxSamples})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

func sameSample(a, b loaders.Sample) bool {
	return a.Label == b.Label && bytes.Equal(a.Input.Encoded, b.Input.Encoded) && bytes.Equal(a.Input.Pixels, b.Input.Pixels) &&
		a.Input.H == b.Input.H && a.Input.W == b.Input.W && a.Input.C == b.Input.C
}

func TestShardRoundTrip(t *testing.T) {
	samples := testSamples(t, 7)
	for _, suffix := range []string{".tar", ".tar.gz", ".tar.zst"} {
		t.Run(suffix, func(t *testing.T) {
			dir := t.TempDir()
			w := writeShards(t, filepath.Join(dir, "s-%04d"+suffix), 3, samples)
			paths := w.Shards()
			if len(paths) != 3 {
				t.Fatalf("shards written = %v; want 3", paths)
			}
			globbed, err := ShardPaths(filepath.Join(dir, "s-*"+suffix))
			if err != nil || !slices.Equal(globbed, paths) {
				t.Fatalf("ShardPaths = %v, %v; want %v", globbed, err, paths)
			}
			ds, err := OpenShards("test", paths)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if ds.Len() != len(samples) || ds.Info().NumClasses != 3 {
				t.Fatalf("OpenShards = %d samples, %d classes; want %d, 3", ds.Len(), ds.Info().NumClasses, len(samples))
			}
			for i, s := range readAll(t, ds) {
				if !sameSample(s, samples[i]) {
					t.Errorf("Sample(%d) = %+v; want %+v", i, s, samples[i])
				}
			}
			st := NewShardStream(paths)
			defer st.Close()
			for i := 0; ; i++ {
				s, err := st.Next(context.Background())
				if errors.Is(err, io.EOF) {
					if i != len(samples) {
						t.Errorf("stream ended after %d samples; want %d", i, len(samples))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if i >= len(samples) || !sameSample(s, samples[i]) {
					t.Fatalf("stream sample %d = %+v; want %+v", i, s, samples[min(i, len(samples)-1)])
				}
			}
			var idx struct {
				Kind      string `json:"__kind__"`
				ShardList []struct {
					URL      string
					NSamples int
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, "index.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &idx); err != nil {
				t.Fatal(err)
			}
			if idx.Kind != "wids-shard-index-v1" || len(idx.ShardList) != 3 || idx.ShardList[2].NSamples != 1 || idx.ShardList[0].URL != "s-0000"+suffix {
				t.Errorf("index = %s; want wids index of 3 shards of 3, 3, 1 samples", b)
			}
		})
	}
}

// TestShardsSampleMemory checks who owns a sample's payload: a new slice per call, for plain and
// compressed shards alike (a compressed shard is read from its decompressed temporary file).
func TestShardsSampleMemory(t *testing.T) {
	samples := testSamples(t, 4)
	for _, tc := range []struct {
		suffix string
		alias  bool
	}{{".tar", false}, {".tar.gz", false}, {".tar.zst", false}} {
		t.Run(tc.suffix, func(t *testing.T) {
			w := writeShards(t, filepath.Join(t.TempDir(), "s-%04d"+tc.suffix), 0, samples)
			ds, err := OpenShards("test", w.Shards())
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			for i := range samples {
				a, errA := ds.Sample(context.Background(), i)
				b, errB := ds.Sample(context.Background(), i)
				if err := errors.Join(errA, errB); err != nil {
					t.Fatal(err)
				}
				pa, pb := payload(a), payload(b)
				if alias := &pa[0] == &pb[0]; alias != tc.alias {
					t.Errorf("Sample(%d) twice shares memory = %v; want %v", i, alias, tc.alias)
				}
				if cap(pa) != len(pa) && tc.alias {
					t.Errorf("cap(Sample(%d) payload) = %d; want its length %d", i, cap(pa), len(pa))
				}
				if !sameSample(a, samples[i]) {
					t.Errorf("Sample(%d) = %+v; want %+v", i, a, samples[i])
				}
			}
		})
	}
}

func payload(s loaders.Sample) []byte {
	if s.Input.Pixels != nil {
		return s.Input.Pixels
	}
	return s.Input.Encoded
}

func TestShardsPythonLayout(t *testing.T) {
	// Members as Python writers lay them out: keys with folders, several members per key, extra
	// members Stoke ignores, labels in .cls or .json, and metadata members to skip.
	img := loadertest.PNG(t, 2, 2, 9)
	data := tarOf(t,
		member{"__meta__", []byte("x")},
		member{"train/n01/img_a.JPG", img},
		member{"train/n01/img_a.cls", []byte(" 4\n")},
		member{"train/n01/img_a.txt", []byte("caption")},
		member{"train/n01/img_b.json", []byte(`{"label": 2, "other": [1]}`)},
		member{"train/n01/img_b.webp", img},
		member{"train/n02/img_a.png", img},
		member{"train/n02/img_a.cls", []byte("0")},
	)
	path := filepath.Join(t.TempDir(), "py.tar")
	writeFile(t, path, data)
	ds, err := OpenShards("py", []string{path})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	want := []struct {
		key   string
		label int
	}{{"train/n01/img_a", 4}, {"train/n01/img_b", 2}, {"train/n02/img_a", 0}}
	if ds.Len() != len(want) {
		t.Fatalf("Len() = %d; want %d", ds.Len(), len(want))
	}
	for i, s := range readAll(t, ds) {
		if s.Key != path+":"+want[i].key || s.Label != want[i].label || !bytes.Equal(s.Input.Encoded, img) {
			t.Errorf("Sample(%d) = %s label %d; want %s label %d", i, s.Key, s.Label, want[i].key, want[i].label)
		}
	}
}

func TestShardsCorrupt(t *testing.T) {
	img := loadertest.PNG(t, 2, 2, 1)
	good := tarOf(t, member{"a.png", img}, member{"a.cls", []byte("1")})
	tests := []struct {
		name string
		data []byte
		// openErr: OpenShards fails; sampleErr: sample 0 fails (others load).
		openErr, sampleErr error
	}{
		{"truncated tar", good[:700], loaders.ErrCorrupt, nil},
		{"tar cut in a member", good[:530], loaders.ErrCorrupt, nil},
		{"tar cut at a member boundary", good[:2048], loaders.ErrCorrupt, nil},
		{"tar with half its end marker", good[:2048+512], loaders.ErrCorrupt, nil},
		{"garbage", bytes.Repeat([]byte("garbage!"), 100), loaders.ErrCorrupt, nil},
		{"empty tar", tarOf(t), loaders.ErrEmpty, nil},
		{"no image member", tarOf(t, member{"a.txt", []byte("x")}, member{"a.cls", []byte("1")}), loaders.ErrCorrupt, nil},
		{"duplicate member", tarOf(t, member{"a.png", img}, member{"a.png", img}), loaders.ErrCorrupt, nil},
		{"truncated gzip", gz(t, good)[:40], loaders.ErrCorrupt, nil},
		{"compression bomb", zst(t, tarOf(t, member{"a.png", make([]byte, 20<<20)})), loaders.ErrCorrupt, nil},
		{"label not a number", tarOf(t, member{"a.png", img}, member{"a.cls", []byte("cat")}), nil, loaders.ErrCorrupt},
		{"negative label", tarOf(t, member{"a.png", img}, member{"a.cls", []byte("-1")}), nil, loaders.ErrLabel},
		{"no label", tarOf(t, member{"a.png", img}), nil, loaders.ErrCorrupt},
		{"raw without shape", tarOf(t, member{"a.raw", []byte{1, 2}}, member{"a.cls", []byte("0")}), nil, loaders.ErrCorrupt},
		{"raw shape mismatch", tarOf(t, member{"a.raw", []byte{1, 2}}, member{"a.json", []byte(`{"shape":[2,2,1],"label":0}`)}), nil, loaders.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.tar")
			writeFile(t, path, tc.data)
			ds, err := OpenShards("bad", []string{path})
			if tc.openErr != nil {
				if !errors.Is(err, tc.openErr) || !strings.Contains(fmt.Sprint(err), path) {
					t.Fatalf("OpenShards error = %v; want %v naming %s", err, tc.openErr, path)
				}
				_, err := NewShardStream([]string{path}).Next(context.Background())
				if err == nil || errors.Is(err, io.EOF) && !errors.Is(tc.openErr, loaders.ErrEmpty) {
					t.Errorf("ShardStream.Next error = %v; want an error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			_, err = ds.Sample(context.Background(), 0)
			if !errors.Is(err, tc.sampleErr) || !strings.Contains(err.Error(), path+":a") {
				t.Errorf("Sample(0) error = %v; want %v naming %s:a", err, tc.sampleErr, path)
			}
			if _, err := NewShardStream([]string{path}).Next(context.Background()); !errors.Is(err, tc.sampleErr) {
				t.Errorf("ShardStream.Next error = %v; want %v", err, tc.sampleErr)
			}
		})
	}
}

func TestShardWriterRejects(t *testing.T) {
	for _, p := range []string{"", "x.tar", "x-%d-%d.tar", "x-%d.zip"} {
		if _, err := NewShardWriter(ShardWriterConfig{Pattern: p}); !errors.Is(err, loaders.ErrConfig) {
			t.Errorf("NewShardWriter(%q) error = %v; want ErrConfig", p, err)
		}
	}
	w, err := NewShardWriter(ShardWriterConfig{Pattern: filepath.Join(t.TempDir(), "s-%d.tar")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		s    loaders.Sample
		want error
	}{
		{"unknown format", loaders.Sample{Input: transforms.Input{Encoded: []byte("hello")}}, loaders.ErrCorrupt},
		{"pixels of wrong length", loaders.Sample{Input: transforms.Input{Pixels: []byte{1}, H: 2, W: 2, C: 1}}, loaders.ErrCorrupt},
		{"negative label", loaders.Sample{Input: transforms.Input{Encoded: loadertest.PNG(t, 1, 1, 0)}, Label: -2}, loaders.ErrLabel},
	}
	for _, tc := range tests {
		if err := w.Write(tc.s); !errors.Is(err, tc.want) {
			t.Errorf("Write(%s) error = %v; want %v", tc.name, err, tc.want)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func FuzzShards(f *testing.F) {
	img := loadertest.PNG(f, 2, 2, 1)
	good := tarOf(f, member{"a.png", img}, member{"a.cls", []byte("1")}, member{"b.raw", []byte{1, 2, 3, 4}}, member{"b.json",
		[]byte(`{"shape":[2,2],"label":3}`)})
	f.Add(good)
	f.Add(gz(f, good))
	f.Add(zst(f, good))
	f.Add(good[:600])
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return // large inputs only repeat members and slow the fuzzer down
		}
		path := filepath.Join(t.TempDir(), "f.tar")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := OpenShards("fuzz", []string{path})
		if err == nil {
			for i := range ds.Len() {
				s, err := ds.Sample(context.Background(), i)
				if err == nil && s.Input.Encoded == nil && len(s.Input.Pixels) != s.Input.H*s.Input.W*s.Input.C {
					t.Fatalf("Sample(%d): %d pixels for %dx%dx%d", i, len(s.Input.Pixels), s.Input.H, s.Input.W, s.Input.C)
				}
			}
			ds.Close()
		}
		st := NewShardStream([]string{path})
		defer st.Close()
		for range 100 {
			if _, err := st.Next(context.Background()); err != nil {
				break
			}
		}
	})
}

func TestShardStreamCancelAndClose(t *testing.T) {
	w := writeShards(t, filepath.Join(t.TempDir(), "s-%d.tar"), 2, testSamples(t, 4))
	st := NewShardStream(w.Shards())
	if _, err := st.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next(cancelled) error = %v; want context.Canceled", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after Close error = %v; want io.EOF", err)
	}
}

// TestShardLabelPastInt32: a label past the int32 class ids is a bad sample, named when read; it
// does not make the class count overflow (a .cls of math.MaxInt made NumClasses negative and the
// sample read fine).
func TestShardLabelPastInt32(t *testing.T) {
	dir := t.TempDir()
	png := loadertest.PNG(t, 4, 4, 1)
	writeFile(t, filepath.Join(dir, "x.tar"), tarOf(t,
		member{"a.png", png}, member{"a.cls", []byte("1")},
		member{"b.png", png}, member{"b.cls", []byte(strconv.Itoa(math.MaxInt))}))
	ds, err := Open("shards:"+filepath.Join(dir, "x.tar"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.(*Shards).Close()
	if n := ds.(*Shards).Info().NumClasses; n != 2 {
		t.Fatalf("NumClasses %d, want 2", n)
	}
	var se *loaders.SampleError
	if _, err := ds.Sample(context.Background(), 1); !errors.As(err, &se) || se.Index != 1 || !errors.Is(err, loaders.ErrLabel) {
		t.Fatalf("Sample(1) with label %d: %v; want a SampleError wrapping ErrLabel", math.MaxInt, err)
	}
	st := NewShardStream([]string{filepath.Join(dir, "x.tar")})
	defer st.Close()
	if _, err := st.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Next(context.Background()); !errors.Is(err, loaders.ErrLabel) {
		t.Fatalf("stream: %v; want ErrLabel", err)
	}
	w, err := NewShardWriter(ShardWriterConfig{Pattern: filepath.Join(t.TempDir(), "s-%06d.tar")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write(loaders.Sample{Input: transforms.Input{Encoded: png}, Label: math.MaxInt}); !errors.Is(err, loaders.ErrLabel) {
		t.Fatalf("writing label %d: %v; want ErrLabel", math.MaxInt, err)
	}
}

// TestShardWriterConfigValidatePure: Validate checks and changes nothing; WithDefaults fills the
// zero fields of a copy.
func TestShardWriterConfigValidatePure(t *testing.T) {
	c := ShardWriterConfig{Pattern: "/d/s-%04d.tar"}
	if err := c.Validate(); err != nil || c != (ShardWriterConfig{Pattern: "/d/s-%04d.tar"}) {
		t.Fatalf("Validate() = %v, config now %+v; want nil, unchanged", err, c)
	}
	d := c.WithDefaults()
	if d.MaxSamples != DefaultShardSamples || d.MaxBytes != DefaultShardBytes || d.Index != filepath.Join("/d", IndexName) || c.Index != "" {
		t.Errorf("WithDefaults() = %+v (receiver %+v); want the defaults and index beside the shards in a copy", d, c)
	}
	if err := (ShardWriterConfig{Pattern: "s.tar"}).Validate(); !errors.Is(err, loaders.ErrConfig) {
		t.Errorf("Validate(pattern without a verb) = %v; want ErrConfig", err)
	}
}
