package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/stoke-ml/stoke/train"
)

// TestMarshalJSONNonFinite: the --json encoder writes what json.Marshal writes for finite figures
// (every field name, omitempty, the embedded train.Result), and null for NaN and infinities where
// json.Marshal fails.
func TestMarshalJSONNonFinite(t *testing.T) {
	finite := []any{
		trainResult{Result: train.Result{TestAcc: 0.5, History: []train.EpochResult{{Epoch: 1, TrainLoss: 0.25, ClassAcc: []float64{1, 0}}}},
			FinalTest: &finalTest{Accuracy: 0.75}, Eval: "test", LR: 0.1, Warnings: []string{"w"}},
		trainResult{},
		predictSummary{Model: "mlp", ClassAcc: []float64{0.5}, Confusion: [][]int{{1, 2}, {3, 4}}},
		predictJSON{Index: 3, Logits: []float32{1.5, -2}},
		map[string]any{"b": 1.0, "a": []float32{2}},
	}
	for _, v := range finite {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := encodeFinite(&got, reflect.ValueOf(v)); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("encodeFinite(%T) = %s; want %s", v, got.String(), want)
		}
	}

	nan, inf := math.NaN(), math.Inf(1)
	v := trainResult{Result: train.Result{TestAcc: nan, FinalLoss: 0.5, History: []train.EpochResult{{Epoch: 1, TrainLoss: inf}}},
		FinalTest: &finalTest{Accuracy: math.Inf(-1)}, LR: 0.1}
	if _, err := json.Marshal(v); err == nil {
		t.Fatal("json.Marshal took a NaN: the test tests nothing")
	}
	b, err := marshalJSON(v)
	if err != nil {
		t.Fatalf("marshalJSON(NaN) = %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("marshalJSON wrote %s, not JSON: %v", b, err)
	}
	hist := got["history"].([]any)[0].(map[string]any)
	if got["test_acc"] != nil || hist["train_loss"] != nil || got["final_test"].(map[string]any)["accuracy"] != nil ||
		got["final_loss"] != 0.5 || got["lr"] != 0.1 || hist["epoch"] != 1.0 {
		t.Fatalf("marshalJSON = %s; want null for each non-finite figure and the others kept", b)
	}
	b, err = marshalJSON(predictJSON{Logits: []float32{1, float32(nan), float32(inf)}})
	if err != nil || !bytes.Contains(b, []byte(`"logits":[1,null,null]`)) {
		t.Fatalf("marshalJSON(logits with NaN) = %s, %v", b, err)
	}
}
