package cli

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/onnx"
	"github.com/stoke-ml/stoke/train"
)

// predictLines parses stoke predict --json's per-sample lines.
func predictLines(t *testing.T, out string) []predictJSON {
	t.Helper()
	var preds []predictJSON
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"samples"`) {
			break
		}
		var p predictJSON
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("predict line %q: %v", sc.Text(), err)
		}
		preds = append(preds, p)
	}
	return preds
}

// TestPredictTorchvisionWeights: stoke predict --weights on a torchvision resnet18 and resnet50
// saved with safetensors, and resnet18 saved with torch.save as torchvision publishes its weights
// (a .pth; seeded in PyTorch, BatchNorm statistics set to non-trivial values, no download),
// prints the logits torchvision computes on the same images, within 1e-4. The resnet18 files come
// as a user names them, from a local server: the safetensors from a hub repository
// (hf-hub:torchvision/resnet18, the hub's headers), the .pth from a URL named as torchvision's,
// resnet18-HASH.pth; a second predict downloads nothing.
func TestPredictTorchvisionWeights(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "PIL")
	var mu sync.Mutex
	served, gets := map[string][]byte{}, map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.Replace(r.URL.Path, "/resolve/"+hubCommit+"/", "/resolve/main/", 1) // the hub serves a commit as its branch
		mu.Lock()
		body, ok := served[path]
		if r.Method == http.MethodGet {
			gets[path]++
		}
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("X-Repo-Commit", hubCommit)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("TORCH_HOME", t.TempDir())
	for _, file := range []string{"resnet18.safetensors", "resnet50.safetensors", "resnet18.pth"} {
		model, _, _ := strings.Cut(file, ".")
		// Images at the side the model's evaluation transform resizes to (73 px for resnet18's
		// Resize(64*256/224), 66 for resnet50's 64*232/224): it keeps them as they are and its
		// CenterCrop(64) takes the same pixels as the script's crop.
		root := noisyFolder(t, 3, 3, evalSide(model, 64))
		var paths []string
		for _, c := range []string{"a", "b", "c"} {
			for _, i := range []string{"0", "1", "2"} {
				paths = append(paths, filepath.Join(root, c, i+".png"))
			}
		}
		st := filepath.Join(t.TempDir(), file)
		cmd := exec.Command(py, append([]string{filepath.Join("..", "train", "testdata", "torchvision_weights.py"), model, "3", st, "64"}, paths...)...)
		cmd.Stderr = os.Stderr
		pyOut, err := cmd.Output()
		if err != nil {
			t.Fatalf("torchvision_weights.py %s: %v", model, err)
		}
		want := map[string][]float64{}
		for i, line := range strings.Split(strings.TrimSpace(string(pyOut)), "\n") {
			var row []float64
			if err := json.Unmarshal([]byte(line), &row); err != nil || i >= len(paths) {
				t.Fatalf("torchvision_weights.py line %d %q: %v", i, line, err)
			}
			want[paths[i]] = row
		}
		weights, path := st, ""
		if model == "resnet18" {
			body, err := os.ReadFile(st)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(body)
			weights, path = "hf-hub:torchvision/resnet18", "/torchvision/resnet18/resolve/main/model.safetensors"
			if strings.HasSuffix(file, ".pth") {
				path = "/models/resnet18-" + hex.EncodeToString(sum[:4]) + ".pth"
				weights = srv.URL + path
			}
			mu.Lock()
			served[path] = body
			mu.Unlock()
		}
		out, errOut, code := stoke(t, "predict", "--weights", weights, "--model", model, "--size", "64", "--data", root, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict --weights %s: exit %d: %s", weights, code, errOut)
		}
		if path != "" {
			if again, errOut, code := stoke(t, "predict", "--weights", weights, "--model", model, "--size", "64", "--data", root, "--json", "-q"); code != 0 || fmt.Sprint(predictLines(t, again)) != fmt.Sprint(predictLines(t, out)) {
				t.Errorf("predict --weights %s again: exit %d (%s), or other predictions", weights, code, errOut)
			}
			mu.Lock()
			if gets[path] != 1 {
				t.Errorf("%s: downloaded %d times by two predicts; want once", weights, gets[path])
			}
			mu.Unlock()
		}
		preds := predictLines(t, out)
		if len(preds) != len(paths) {
			t.Fatalf("%s: predict printed %d samples; want %d", model, len(preds), len(paths))
		}
		var worst float64
		for _, p := range preds {
			row, ok := want[p.Path]
			if !ok || len(row) != len(p.Logits) {
				t.Fatalf("%s: %s: torchvision gave %v, stoke %v", model, p.Path, row, p.Logits)
			}
			for j, v := range row {
				worst = max(worst, math.Abs(v-float64(p.Logits[j])))
			}
		}
		t.Logf("%s: largest logit difference from torchvision %.2g over %d images", file, worst, len(preds))
		if worst > 1e-4 {
			t.Errorf("%s: stoke predict --weights differs from torchvision by up to %.3g; want at most 1e-4", model, worst)
		}
	}
}

// evalSide is the side model's evaluation transform resizes images to for a model of size x size
// pixels (models.EvalTransform.Chain): an image of that side reaches the crop unresampled.
func evalSide(model string, size int) int {
	e := models.EvalTransformFor(model)
	return size * e.Resize / e.Crop
}

// TestPredictWeightsErrors: the flags that go with --weights, and a strict load that lists the
// problem.
func TestPredictWeightsErrors(t *testing.T) {
	root := photoFolder(t, 2, 2, nil)
	dir := t.TempDir()
	ck, st := filepath.Join(dir, "ck"), filepath.Join(dir, "w.safetensors")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
		"--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", st); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	// The exported weights predict as the checkpoint does.
	a, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--json", "-q")
	if code != 0 {
		t.Fatalf("predict: %s", errOut)
	}
	b, errOut, code := stoke(t, "predict", "--weights", st, "--model", "mlp", "--size", "8", "--data", root, "--json", "-q")
	if code != 0 {
		t.Fatalf("predict --weights: %s", errOut)
	}
	pa, pb := predictLines(t, a), predictLines(t, b)
	if len(pa) != 4 || len(pb) != 4 {
		t.Fatalf("%d and %d predictions; want 4", len(pa), len(pb))
	}
	for i := range pa {
		for j := range pa[i].Logits {
			if pa[i].Logits[j] != pb[i].Logits[j] {
				t.Fatalf("sample %d logit %d: checkpoint %v, weights %v", i, j, pa[i].Logits[j], pb[i].Logits[j])
			}
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"predict", "--weights", st, "--data", root}, 2, "--weights needs --model"},
		{[]string{"predict", "--weights", st, "--checkpoint", ck, "--model", "mlp", "--data", root}, 2, "choose one"},
		{[]string{"predict", "--checkpoint", ck, "--model", "mlp", "--data", root}, 2, "go with --weights"},
		{[]string{"predict", "--weights", st, "--model", "cnn", "--size", "8", "--data", root}, 1, "file does not match: model cnn: 8 missing (0.conv2d.weight"},
		{[]string{"predict", "--weights", st, "--model", "mlp", "--size", "8", "--classes", "3", "--data", root}, 1,
			"mis-shaped (5.linear.weight: file [2 256], model [3 256]"},
		{[]string{"predict", "--weights", root + "/a/0.png", "--model", "mlp", "--size", "8", "--data", root}, 1, "bad safetensors file"},
	} {
		_, errOut, code := stoke(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("stoke %v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestExportWeightsNameWithoutData: stoke export --weights of a torchvision name needs no --model
// and no --data: the name gives the model, ImageNet's 1,000 classes, the input at its crop
// (3x224x224 for resnet18.IMAGENET1K_V1) and its transform, which the ONNX file records. A file
// name says none of it and is refused without --data (TestExportONNXFlags). The weights are of
// resnet18's shape, in torch.hub's cache where a download would have put them.
func TestExportWeightsNameWithoutData(t *testing.T) {
	cacheTorchvision(t, "resnet18", "resnet18-f37072fd.pth")
	out := filepath.Join(t.TempDir(), "r18.onnx")
	if _, errOut, code := stoke(t, "export", "--weights", "resnet18.IMAGENET1K_V1", "--out", out); code != 0 {
		t.Fatalf("export --weights resnet18.IMAGENET1K_V1: exit %d: %s", code, errOut)
	}
	m := readONNX(t, out)
	for key, want := range map[string]string{onnx.MetaInputShape: "3,224,224", onnx.MetaMean: "0.485,0.456,0.406", onnx.MetaModel: "resnet18 3x224x224->1000"} {
		if got, _ := m.Meta(key); got != want {
			t.Errorf("ONNX %s = %q; want %q", key, got, want)
		}
	}
	if cfg, _ := m.Meta(onnx.MetaPretrainedCfg); !strings.Contains(cfg, `"resize":256`) || !strings.Contains(cfg, `"interpolation":"bilinear"`) {
		t.Errorf("ONNX %s = %s; want IMAGENET1K_V1's Resize(256), bilinear", onnx.MetaPretrainedCfg, cfg)
	}
}

// TestInitWeightsNameTransform: stoke train --init of a torchvision name evaluates photos, and its
// checkpoint records, the name's own transform (timm's resolve_data_config of a pretrained
// model): resnet50.IMAGENET1K_V1's Resize(256) for CenterCrop(224), kept at 40 px as floor(40 *
// 256 / 224) = 45, where the model's default (IMAGENET1K_V2's Resize(232)) gives 41.
func TestInitWeightsNameTransform(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	common := []string{"train", "--data", root, "--model", "resnet50", "--size", "40", "--batch", "4", "--max-steps", "1", "--eval-on-train", "-q"}
	cacheTorchvision(t, "resnet50", "resnet50-0676ba61.pth")
	resize := func(args ...string) int {
		t.Helper()
		out := filepath.Join(t.TempDir(), "ck")
		if _, errOut, code := stoke(t, append(append(common, "--checkpoint", out), args...)...); code != 0 {
			t.Fatalf("train %v: exit %d: %s", args, code, errOut)
		}
		m, err := train.CheckpointModel(out)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := gpu.Open("cpu")
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		tr, err := train.New(t.Context(), m, dev, nil, train.Config{Resume: out})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		return tr.Preprocess().Eval.Resize
	}
	if got := resize("--init", "resnet50.IMAGENET1K_V1"); got != 45 {
		t.Errorf("--init resnet50.IMAGENET1K_V1 at 40 px: the checkpoint records Resize(%d); want its weights' 45", got)
	}
	if got := resize(); got != 41 {
		t.Errorf("no --init at 40 px: the checkpoint records Resize(%d); want the model's default 41", got)
	}
}

// cacheTorchvision sets $TORCH_HOME to a folder of the test's whose torch.hub cache holds file, a
// safetensors file of the weights of model (1,000 classes, trained one step on 40 px photos),
// where torch.hub would keep the download of a torchvision name (whose hash the cache is not
// checked against, as torch.hub does not check it).
func cacheTorchvision(t *testing.T, model, file string) {
	t.Helper()
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	if _, errOut, code := stoke(t, "train", "--data", photoFolder(t, 2, 4, nil), "--model", model, "--classes", "1000", "--size", "40",
		"--batch", "4", "--max-steps", "1", "--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	torchHome := t.TempDir()
	t.Setenv("TORCH_HOME", torchHome)
	cached := filepath.Join(torchHome, "hub", "checkpoints", file)
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", cached); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
}

// TestWeightsInputBounded: the input and class count a hub config.json gives export without
// --data are checked before a model is built from them.
func TestWeightsInputBounded(t *testing.T) {
	lf := &loaderFlags{size: 224}
	for _, cfg := range []string{
		`{"pretrained_cfg": {"input_size": [3, 224, 224], "num_classes": 1000000000}}`,
		`{"pretrained_cfg": {"input_size": [100000, 224, 224], "num_classes": 10}}`,
		`{"pretrained_cfg": {"input_size": [3, 224, 224], "num_classes": 0}}`,
	} {
		if _, _, err := weightsInput(lf, nil, nil, []byte(cfg), false, 0); err == nil || !strings.Contains(err.Error(), "want 1 to 64 channels") {
			t.Errorf("config %s: %v; want a refusal of its sizes", cfg, err)
		}
	}
	shape, classes, err := weightsInput(lf, nil, nil, []byte(`{"pretrained_cfg": {"input_size": [3, 288, 288], "num_classes": 7}}`), false, 0)
	if err != nil || shape != (train.Shape{C: 3, H: 224, W: 224}) || classes != 7 {
		t.Errorf("a good config at --size 224: %v, %d, %v; want 3x224x224, 7 classes", shape, classes, err)
	}
}
