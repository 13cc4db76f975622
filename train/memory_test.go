package train

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/optim"
)

// budgetDevice is a device whose memory ends after budget bytes of allocations.
type budgetDevice struct {
	gpu.Device
	budget int64
}

func (d *budgetDevice) Alloc(n int) (gpu.Buffer, error) {
	if d.budget -= int64(n); d.budget < 0 {
		return nil, gpu.ErrOutOfMemory
	}
	return d.Device.Alloc(n)
}

// TestBatchOutOfMemory: a model whose tensors fit but whose batch's activations do not fails the
// step with the device's ErrOutOfMemory and says what to lower, not a crash.
func TestBatchOutOfMemory(t *testing.T) {
	f := newFixture(t, 64)
	dev := &budgetDevice{Device: f.dev, budget: 64 << 10}
	tr, err := New(context.Background(), smallCNN(t), dev, optim.SGD{LR: 0.1}, Config{})
	if err != nil {
		t.Fatalf("New within the budget: %v", err)
	}
	defer tr.Close()
	_, err = tr.Fit(context.Background(), f.train, nil)
	if !errors.Is(err, gpu.ErrOutOfMemory) || !strings.Contains(err.Error(), "lower the batch size or the image size") {
		t.Fatalf("Fit = %v; want ErrOutOfMemory saying what to lower", err)
	}
}

// smallDevice is a device that says it has memory bytes.
type smallDevice struct {
	gpu.Device
	memory int64
}

func (d smallDevice) Info() gpu.Info {
	info := d.Device.Info()
	info.Memory = d.memory
	return info
}

// TestModelOverDeviceMemory: New refuses, before allocating, a model whose weights with their
// gradients, optimizer slots and EMA exceed the device's memory, counting each; the same model
// without the optimizer (to predict) fits.
func TestModelOverDeviceMemory(t *testing.T) {
	m := smallMLP(t)
	values := int64(0)
	for _, p := range m.tensors() {
		values += int64(prod(p.Shape))
	}
	// Weights, gradients and AdamW's two slots: 4 values each; the EMA a fifth.
	dev := smallDevice{Device: openCPU(t), memory: 4 * (4*values + values/2)}
	ctx := context.Background()
	tr, err := New(ctx, smallMLP(t), dev, optim.AdamW{LR: 1e-3}, Config{})
	if err != nil {
		t.Fatalf("weights, gradients and two slots in memory for them and a half: %v", err)
	}
	tr.Close()
	_, err = New(ctx, smallMLP(t), dev, optim.AdamW{LR: 1e-3}, Config{EMA: 0.99})
	if !errors.Is(err, gpu.ErrOutOfMemory) || !strings.Contains(err.Error(), "choose a smaller model") || !strings.Contains(err.Error(), "EMA") {
		t.Fatalf("with an EMA = %v; want ErrOutOfMemory naming the EMA", err)
	}
	dev.memory = 4 * 2 * values
	if _, err := New(ctx, smallMLP(t), dev, optim.AdamW{LR: 1e-3}, Config{}); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("AdamW in memory for weights and gradients = %v; want ErrOutOfMemory", err)
	}
	tr, err = New(ctx, smallMLP(t), dev, nil, Config{})
	if err != nil {
		t.Fatalf("without an optimizer, weights and gradients in memory for them: %v", err)
	}
	tr.Close()
}
