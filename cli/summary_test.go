package cli

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/safetensors"
)

// TestSummary: stoke summary counts the parameters and mult-adds torchvision's model pages give
// for its weights (the "Params" and "GFLOPS" columns, at 224 px and 1000 classes, GFLOPS rounded
// to two places as torchvision does), prints a row per layer, sums a checkpoint's model, and
// refuses a command line that names no model.
func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		model  string
		params int64
		gflops string
	}{
		{"resnet18", 11689512, "1.81"},
		{"efficientnet_b0", 5288548, "0.39"},
		{"mobilenet_v3_large", 5483032, "0.22"},
		{"convnext_tiny", 28589128, "4.46"},
		{"vit_b_16", 86567656, "17.56"},
	} {
		out, errOut, code := stoke(t, "summary", "--model", tc.model, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.model, code, errOut)
		}
		var s summaryJSON
		lastJSON(t, out, &s)
		if got := fmt.Sprintf("%.2f", float64(s.MACs)/1e9); s.Trainable != tc.params || got != tc.gflops {
			t.Errorf("%s: %d parameters, %s GFLOPS; torchvision's %d and %s", tc.model, s.Trainable, got, tc.params, tc.gflops)
		}
		if len(s.Layers) < 10 || s.Layers[len(s.Layers)-1].Output[1] != 1000 || !strings.Contains(out, "Total params: ") {
			t.Errorf("%s: %d layers, the last %+v", tc.model, len(s.Layers), s.Layers[len(s.Layers)-1])
		}
	}
	_, ck := photoCheckpoint(t)
	out, errOut, code := stoke(t, "summary", "--checkpoint", ck, "--batch", "4", "--optimizer", "adamw", "--json", "-q")
	var s summaryJSON
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Model != "resnet8" || fmt.Sprint(s.Input) != "[4 3 8 8]" || s.Classes != 2 ||
		s.TrainMemoryBytes != 4*(4*s.Trainable+s.Buffers)+s.ActivationBytes {
		t.Errorf("summary of a checkpoint: exit %d, %+v, %s", code, s, errOut)
	}
	for _, args := range [][]string{{}, {"--model", "mlp", "--checkpoint", filepath.Join(t.TempDir(), "x")}, {"--model", "mlp", "--batch", "0"}} {
		if _, _, code := stoke(t, append([]string{"summary"}, args...)...); code != 2 {
			t.Errorf("summary %v: exit %d; want 2", args, code)
		}
	}
}

// TestLRFind: stoke train --lr-find runs the range test on the run's model and data, prints the
// curve and a suggestion within the range, writes no checkpoint and trains no epoch; --lr find
// runs it, then trains at its suggestion as --lr with that rate does, and a run it began, resumed,
// goes on at that rate.
func TestLRFind(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	ck := filepath.Join(t.TempDir(), "ck")
	out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--eval-on-train",
		"--checkpoint", ck, "--lr-find", "--json")
	if code != 0 {
		t.Fatalf("--lr-find: exit %d: %s", code, errOut)
	}
	var f lrFindJSON
	lastJSON(t, out, &f)
	if len(f.LRs) < 13 || len(f.LRs) != len(f.Losses) || f.LRs[0] != 1e-7 || !(f.SuggestedLR > 1e-7 && f.SuggestedLR < 10) {
		t.Errorf("range test %+v", f)
	}
	if !strings.Contains(out, "suggested lr: ") || strings.Contains(out, "epoch 1/") {
		t.Errorf("stdout %q; want the suggestion and no epoch", out)
	}
	if entries, err := os.ReadDir(filepath.Dir(ck)); err != nil || len(entries) != 0 {
		t.Errorf("--lr-find left %v in the checkpoint's folder (%v); want nothing", entries, err)
	}
	// --lr find: the same test, then the run at its suggestion, as --lr with it given.
	run := func(lr string, more ...string) (trainResult, string) {
		out, errOut, code := stoke(t, append([]string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--eval-on-train",
			"--lr", lr, "--json"}, more...)...)
		if code != 0 {
			t.Fatalf("--lr %s %v: exit %d: %s", lr, more, code, errOut)
		}
		var res trainResult
		lastJSON(t, out, &res)
		return res, out
	}
	found, _ := run("find")
	given, _ := run(strconv.FormatFloat(f.SuggestedLR, 'g', -1, 64))
	if found.LR != f.SuggestedLR || found.Epochs != given.Epochs || found.FinalLoss != given.FinalLoss || found.TestAcc != given.TestAcc {
		t.Errorf("--lr find trained at lr %v to loss %v, accuracy %v; --lr-find suggested %v, at which --lr gives loss %v, accuracy %v",
			found.LR, found.FinalLoss, found.TestAcc, f.SuggestedLR, given.FinalLoss, given.TestAcc)
	}
	// A run resumed (or restarted by torchrun) goes on at the rate its --lr find found.
	constant := []string{"--schedule", "constant", "--warmup-epochs", "0"}
	whole, _ := run("find", append([]string{"--epochs", "2"}, constant...)...)
	ck2 := filepath.Join(t.TempDir(), "ck")
	run("find", append([]string{"--epochs", "1", "--checkpoint", ck2}, constant...)...)
	resumed, out := run("find", append([]string{"--epochs", "2", "--checkpoint", ck2, "--resume", ck2}, constant...)...)
	if !strings.Contains(out, "resuming at lr") || resumed.LR != whole.LR || resumed.FinalLoss != whole.FinalLoss {
		t.Errorf("--lr find resumed: lr %v, final loss %v; in one run: lr %v, final loss %v\n%s", resumed.LR, resumed.FinalLoss, whole.LR, whole.FinalLoss, out)
	}
	if _, errOut, code := stoke(t, "train", "--data", root, "--lr", "find", "--rank", "0", "--world-size", "2"); code != 2 || !strings.Contains(errOut, "in one process") {
		t.Errorf("--lr find on 2 ranks: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "train", "--data", root, "--lr", "fast"); code != 2 || !strings.Contains(errOut, "want a rate or find") {
		t.Errorf("--lr fast: exit %d: %s", code, errOut)
	}
}

// hubCommit is the commit the tests' local hubs say their branches are at.
const hubCommit = "0123456789abcdef0123456789abcdef01234567"

// TestWeightsFromHub: --weights and --init take an hf-hub: name and a URL, downloaded once into
// the cache: predict gives the logits of the same weights read from the file, and a run starts
// from them.
func TestWeightsFromHub(t *testing.T) {
	root, ck := photoCheckpoint(t)
	w := filepath.Join(t.TempDir(), "w.safetensors")
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", w); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	body, err := os.ReadFile(w)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	// The repository with a config.json, as timm's have: the checkpoint's own pretrained_cfg (its
	// evaluation transform and class names), which predict then applies.
	ckBody, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := safetensors.NewFile(bytes.NewReader(ckBody), int64(len(ckBody)))
	if err != nil || sf.Metadata()["pretrained_cfg"] == "" {
		t.Fatalf("the checkpoint's pretrained_cfg: %v", err)
	}
	// Its class names in the other order: the folder's a and b are then the model's classes 1 and 0.
	var cfg map[string]any
	if err := json.Unmarshal([]byte(sf.Metadata()["pretrained_cfg"]), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["label_names"] = []string{"b", "a"}
	config, err := json.Marshal(map[string]any{"architecture": "resnet8", "pretrained_cfg": cfg})
	if err != nil {
		t.Fatal(err)
	}
	configBlob := sha1.New() // the hub's ETag of a small file: its git blob hash
	fmt.Fprintf(configBlob, "blob %d\x00%s", len(config), config)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		path := strings.Replace(r.URL.Path, "/resolve/"+hubCommit+"/", "/resolve/main/", 1) // the hub serves a commit as its branch
		if path == "/cfg/tiny/resolve/main/config.json" {
			rw.Header().Set("X-Repo-Commit", hubCommit)
			rw.Header().Set("ETag", `"`+hex.EncodeToString(configBlob.Sum(nil))+`"`)
			http.ServeContent(rw, r, "", time.Time{}, bytes.NewReader(config))
			return
		}
		if path != "/org/tiny/resolve/main/model.safetensors" && path != "/cfg/tiny/resolve/main/model.safetensors" &&
			path != "/timm/convnext_atto.tiny/resolve/main/model.safetensors" && path != "/w.safetensors" {
			http.NotFound(rw, r)
			return
		}
		// The hub's headers: the commit, and a large file's SHA-256 as its ETag.
		rw.Header().Set("X-Repo-Commit", hubCommit)
		rw.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		http.ServeFile(rw, r, w)
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("STOKE_CACHE", t.TempDir())
	predict := func(weights string) string { // the per-sample lines, logits and all, not the summary's timing
		out, errOut, code := stoke(t, "predict", "--weights", weights, "--model", "resnet8", "--size", "8", "--data", root, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict --weights %s: exit %d: %s", weights, code, errOut)
		}
		lines := predictLines(t, out)
		if len(lines) == 0 {
			t.Fatalf("predict --weights %s printed no sample", weights)
		}
		return fmt.Sprint(lines)
	}
	want := predict(w)
	for _, name := range []string{"hf-hub:org/tiny", srv.URL + "/w.safetensors"} {
		if got := predict(name); got != want {
			t.Errorf("predict --weights %s differs from the file's", name)
		}
	}
	lines := func(weights string) []predictJSON {
		out, errOut, code := stoke(t, "predict", "--weights", weights, "--model", "resnet8", "--size", "8", "--data", root, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict --weights %s: exit %d: %s", weights, code, errOut)
		}
		return predictLines(t, out)
	}
	plain, named := lines(w), lines("hf-hub:cfg/tiny")
	for i, p := range named {
		if q := plain[i]; len(named) != len(plain) || p.Label != 1-q.Label || p.ClassName != []string{"b", "a"}[p.Class] ||
			fmt.Sprint(p.Logits) != fmt.Sprint(q.Logits) {
			t.Fatalf("predict --weights hf-hub:cfg/tiny (its config.json names the classes b, a): %+v; without it %+v", p, q)
		}
	}
	// timm's NAME.TAG names its model, the zoo's timm/NAME: no --model needed (here it is built
	// for the folder's 8-pixel images, which a ConvNeXt refuses, naming itself).
	if _, errOut, code := stoke(t, "predict", "--weights", "convnext_atto.tiny", "--size", "8", "--data", root, "-q"); code != 1 ||
		!strings.Contains(errOut, `model "timm/convnext_atto"`) {
		t.Errorf("predict --weights convnext_atto.tiny without --model: exit %d: %s; want timm/convnext_atto built", code, errOut)
	}
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--epochs", "1",
		"--eval-on-train", "--init", "hf-hub:org/tiny", "-q"); code != 0 {
		t.Errorf("train --init hf-hub:org/tiny: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "predict", "--weights", "hf-hub:org/none", "--model", "resnet8", "--data", root); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("a repository without weights: exit %d: %s", code, errOut)
	}
}
