package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
)

// webdatasetPython returns a Python interpreter with the webdataset package, named by
// STOKE_WEBDATASET_PYTHON (for example a venv's bin/python), or skips the test.
func webdatasetPython(t *testing.T) string {
	py := os.Getenv("STOKE_WEBDATASET_PYTHON")
	if py == "" {
		t.Skip("STOKE_WEBDATASET_PYTHON not set (a python with `pip install webdataset`)")
	}
	if out, err := exec.Command(py, "-c", "import webdataset").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import webdataset: %v %s", py, err, out)
	}
	return py
}

// TestWebDatasetReadsStokeShards: Python's webdataset reads the shards ShardWriter writes.
func TestWebDatasetReadsStokeShards(t *testing.T) {
	py := webdatasetPython(t)
	dir := t.TempDir()
	samples := testSamples(t, 9)
	for _, suffix := range []string{".tar", ".tar.gz"} {
		w := writeShards(t, filepath.Join(dir, "s"+suffix[1:]+"-%03d"+suffix), 4, samples)
		script := `
import sys, json, hashlib, webdataset as wds
for s in wds.WebDataset(sys.argv[1:], shardshuffle=False):
    payload = s.get("png") or s.get("raw")
    print(json.dumps({"key": s["__key__"], "cls": int(s["cls"]), "sha": hashlib.sha256(payload).hexdigest(),
                      "json": json.loads(s["json"]) if "json" in s else None}))
`
		out, err := exec.Command(py, append([]string{"-c", script}, w.Shards()...)...).Output()
		if err != nil {
			t.Fatalf("%s: webdataset: %v", suffix, err)
		}
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		if len(lines) != len(samples) {
			t.Fatalf("%s: webdataset read %d samples; want %d:\n%s", suffix, len(lines), len(samples), out)
		}
		for i, line := range lines {
			var got struct {
				Key  string
				Cls  int
				Sha  string
				JSON *struct{ Shape []int }
			}
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatal(err)
			}
			payload := samples[i].Input.Encoded
			if payload == nil {
				payload = samples[i].Input.Pixels
			}
			sum := sha256.Sum256(payload)
			if got.Key != fmt.Sprintf("%09d", i) || got.Cls != samples[i].Label || got.Sha != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: webdataset sample %d = %s; want key %09d cls %d and the same payload", suffix, i, line, i, samples[i].Label)
			}
			if samples[i].Input.Pixels != nil && (got.JSON == nil || len(got.JSON.Shape) != 3 || got.JSON.Shape[0] != samples[i].Input.H) {
				t.Errorf("%s: webdataset sample %d json = %s; want its shape", suffix, i, line)
			}
		}
	}
}

// TestStokeReadsWebDatasetShards: the shards Python's webdataset.ShardWriter writes load in Stoke.
func TestStokeReadsWebDatasetShards(t *testing.T) {
	py := webdatasetPython(t)
	dir := t.TempDir()
	img := loadertest.PNG(t, 5, 4, 7)
	imgPath := filepath.Join(dir, "img.png")
	writeFile(t, imgPath, img)
	script := `
import sys, webdataset as wds
img = open(sys.argv[2], "rb").read()
with wds.ShardWriter(sys.argv[1], maxcount=3) as w:
    for i in range(7):
        s = {"__key__": "sample%04d" % i, "png": img, "cls": i % 4, "txt": "caption %d" % i}
        if i % 2:
            s["json"] = {"label": i % 4, "note": "x"}
            del s["cls"]
        w.write(s)
`
	for _, suffix := range []string{".tar", ".tar.gz"} {
		pattern := filepath.Join(dir, "py"+suffix[1:]+"-%06d"+suffix)
		if out, err := exec.Command(py, "-c", script, pattern, imgPath).CombinedOutput(); err != nil {
			t.Fatalf("%s: webdataset writer: %v\n%s", suffix, err, out)
		}
		paths, err := ShardPaths(filepath.Join(dir, "py"+suffix[1:]+"-*"+suffix))
		if err != nil {
			t.Fatal(err)
		}
		ds, err := OpenShards("py", paths)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != 3 || ds.Len() != 7 {
			t.Errorf("%s: %d shards, %d samples; want 3, 7", suffix, len(paths), ds.Len())
		}
		for i, s := range readAll(t, ds) {
			if s.Label != i%4 || !bytes.Equal(s.Input.Encoded, img) || filepath.Base(s.Key) == "" {
				t.Errorf("%s: sample %d = %s label %d; want label %d and the PNG", suffix, i, s.Key, s.Label, i%4)
			}
		}
		ds.Close()
	}
}
