package train

import "testing"

// TestRecipesLearn: mlp, cnn and resnet8 (the resnets share a recipe), each trained with its recipe (optimizer, schedule, batch,
// label smoothing) learns the synthetic classes in two epochs: a recipe that diverges or does not
// train fails here, in seconds, before an MNIST run would show it.
func TestRecipesLearn(t *testing.T) {
	dev := openCPU(t)
	imgs, labels := synthetic(800, 1)
	timgs, tlabels := synthetic(300, 2)
	for _, name := range []string{"mlp", "cnn", "resnet8"} {
		r := RecipeFor(name)
		if r.Batch < 1 || !(r.LabelSmoothing >= 0 && r.LabelSmoothing < 1) || !(r.WarmupEpochs >= 0) {
			t.Fatalf("%s: recipe %v: want a batch >= 1, label smoothing in [0,1), a warm-up >= 0", name, r)
		}
		m, err := NewModel(name, img8, 10)
		if err != nil {
			t.Fatal(err)
		}
		data, test := newMemData(dev, imgs, labels, img8, r.Batch, true, 1), newMemData(dev, timgs, tlabels, img8, 100, false, 0)
		tr, err := New(m, dev, r.NewOptimizer(r.Batch), Config{Epochs: 2, Seed: 1, Schedule: r.Schedule(), LabelSmoothing: r.LabelSmoothing})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Fit(t.Context(), data, test)
		tr.Close()
		data.close()
		test.close()
		if err != nil {
			t.Fatalf("%s (%v): %v", name, r, err)
		}
		t.Logf("%s (%v): test accuracy %.3f, loss %.4f", name, r, res.TestAcc, res.FinalLoss)
		if res.TestAcc < 0.9 {
			t.Errorf("%s with its recipe (%v): test accuracy %.3f; want >= 0.9", name, r, res.TestAcc)
		}
	}
}
