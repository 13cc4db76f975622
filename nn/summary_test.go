package nn_test

import (
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

// TestSummarize: a small network's layers, parameters and multiply-adds, counted by hand.
func TestSummarize(t *testing.T) {
	m := nn.Dict{
		{Name: "conv", Module: nn.NewConv2d(3, 8, 3, nn.ConvOptions{Stride: 1, Padding: 1}, true)},
		{Name: "bn", Module: nn.NewBatchNorm2d(8)},
		{Name: "relu", Module: nn.Fn(nn.ReLU)},
		{Name: "pool", Module: nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Flatten(nn.GlobalAvgPool(x)) })},
		{Name: "fc", Module: nn.NewLinear(8, 10, true)},
	}
	s, err := nn.Summarize(m, 2, 3, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range s.Layers {
		rows = append(rows, l.Name+" "+l.Op)
	}
	if got := strings.Join(rows, ", "); got != "conv conv2d, bn batch_norm, fc linear" {
		t.Errorf("layers %s", got)
	}
	// conv: 8*3*3*3 + 8 = 224; bn: 8+8 trained, 8+8 running; fc: 80 + 10.
	if s.Trainable != 224+16+90 || s.Buffers != 16 || s.Params != s.Trainable+s.Buffers {
		t.Errorf("params %d (trainable %d, buffers %d); want 346 (330, 16)", s.Params, s.Trainable, s.Buffers)
	}
	// conv: 2*8*16*16 outputs of 27 products each; fc: 2*10 outputs of 8.
	if want := int64(2*8*16*16*27 + 2*10*8); s.MACs != want || s.Layers[0].MACs != 2*8*16*16*27 {
		t.Errorf("mult-adds %d (conv %d); want %d", s.MACs, s.Layers[0].MACs, want)
	}
	if s.Layers[1].Params != 32 || s.Layers[0].Output[1] != 8 {
		t.Errorf("bn row %+v, conv row %+v", s.Layers[1], s.Layers[0])
	}
	if out := s.String(); !strings.Contains(out, "Total params: 346 (trainable 330, buffers 16)") || !strings.Contains(out, "conv (conv2d)") {
		t.Errorf("String():\n%s", out)
	}
}
