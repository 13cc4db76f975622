package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/onnx"
)

// ONNXOpset is the version of ONNX's default operator set that ExportONNX writes: 17 (ONNX 1.12,
// 2022), which onnxruntime from 1.12 on, TensorRT 8.6 and OpenVINO 2022.3 read.
const ONNXOpset = 17

// The metadata_props keys ExportONNX writes.
const (
	// ONNXMetaModel is the model's description (Model.String).
	ONNXMetaModel = "stoke.model"
	// ONNXMetaInputShape is the shape of one input image, "C,H,W" ("3,224,224").
	ONNXMetaInputShape = "stoke.input_shape"
	// ONNXMetaMean and ONNXMetaStd are the per-channel normalization the input must have had,
	// comma-separated ("0.485,0.456,0.406").
	ONNXMetaMean = "stoke.mean"
	ONNXMetaStd  = "stoke.std"
	// ONNXMetaInput says in words what the input is.
	ONNXMetaInput = "stoke.input"
	// ONNXMetaPretrainedCfg is the trainer's Preprocess, when it has one, as JSON under timm's
	// pretrained_cfg keys: the whole evaluation transform that makes an image the input
	// (input_size, interpolation, crop_pct, crop_mode, mean, std, and resize, the exact shorter
	// side of a center crop's resize) and the class names (num_classes, label_names).
	ONNXMetaPretrainedCfg = "stoke.pretrained_cfg"
)

// ExportONNX writes the model to path as an ONNX model (opset ONNXOpset) that computes its logits
// in evaluation mode, as Predict does: BatchNorm on its running statistics (BatchNormalization
// nodes), Dropout left out. The graph's input "input" is a float32 tensor [N C H W] (NCHW, N
// dynamic, named "batch") of images already normalized: each pixel scaled to [0, 1], then
// (x - mean[c]) / std[c]. Its output "logits" is [N classes]. mean and std are the normalization
// the model was trained with (Data.Normalization: one value per channel; nil for the trainer's
// Preprocess's, or without one mean 0 and std 1); they are not part of the graph but recorded in
// its metadata_props, under ONNXMetaMean and ONNXMetaStd, with the input's shape
// (ONNXMetaInputShape), a description of the input (ONNXMetaInput), the model's own
// (ONNXMetaModel) and, when the trainer has a Preprocess, the whole evaluation transform and the
// class names (ONNXMetaPretrainedCfg).
//
// The model is written down from its forward pass, traced by nn.Trace in evaluation mode: its
// tensors are initializers under their state_dict names (as Export names them: torchvision's for
// the resnets, conv1.weight, layer1.0.bn1.running_mean, fc.bias), its fused ops ONNX's (Conv,
// Gemm or MatMul, BatchNormalization, LayerNormalization, Softmax, MaxPool, GlobalAveragePool),
// GELU as its erf composition (opset 17 has no Gelu), reshapes with -1 where the batch goes so
// that any batch size runs; a fused op's node is named after its module. The file
// is written atomically (a temporary file renamed over path), once the weights are read back from
// the device: if ctx ends first, nothing is written.
func (t *Trainer) ExportONNX(ctx context.Context, path string, mean, std []float32) error {
	m := t.m
	fail := func(err error) error { return fmt.Errorf("train: export onnx %s: %w", path, err) }
	var cfg *pretrainedCfg
	if t.pre != nil {
		if mean == nil && std == nil {
			mean, std = t.pre.Eval.Mean, t.pre.Eval.Std
		}
		cfg = t.pre.cfg(m.in, m.classes)
	}
	mean, std, err := onnxNormalization(m.in.C, mean, std)
	if err != nil {
		return fail(err)
	}
	host := map[*Param][]float32{}
	for _, p := range m.all {
		h := make([]float32, p.W.Len)
		if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 4*len(h)), p.W.Buf, 4*p.W.Off); err != nil {
			return fail(err)
		}
		host[p] = h
	}
	if err := t.wait(ctx); err != nil {
		return fail(err)
	}
	if cfg != nil {
		cfg.Mean, cfg.Std = mean, std
	}
	model, err := m.onnxModel(host, mean, std, cfg)
	if err != nil {
		return fail(err)
	}
	b, err := onnx.Marshal(model)
	if err != nil {
		return fail(err)
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fail(err)
	}
	return nil
}

// onnxNormalization checks mean and std (one finite value per channel, std positive), nil
// meaning mean 0 and std 1.
func onnxNormalization(c int, mean, std []float32) ([]float32, []float32, error) {
	if mean == nil && std == nil {
		mean, std = make([]float32, c), make([]float32, c)
		for i := range std {
			std[i] = 1
		}
	}
	if len(mean) != c || len(std) != c {
		return nil, nil, fmt.Errorf("%w: normalization of %d means and %d stds for %d channels", ErrConfig, len(mean), len(std), c)
	}
	for i := range c {
		if math.IsNaN(float64(mean[i])) || math.IsInf(float64(mean[i]), 0) || !(std[i] > 0) || math.IsInf(float64(std[i]), 0) {
			return nil, nil, fmt.Errorf("%w: channel %d's normalization is mean %g, std %g; want finite values, std positive", ErrConfig, i, mean[i], std[i])
		}
	}
	return mean, std, nil
}

// onnxModel builds the ONNX model of m from its tensors' values.
func (m *Model) onnxModel(host map[*Param][]float32, mean, std []float32, cfg *pretrainedCfg) (*onnx.Model, error) {
	in := m.in
	e := &onnxEmitter{host: host}
	e.g.Name = m.name
	batch := onnx.Dim{Param: "batch"}
	e.g.Inputs = []onnx.Value{{Name: "input", Shape: []onnx.Dim{batch, {Size: int64(in.C)}, {Size: int64(in.H)}, {Size: int64(in.W)}}}}
	x, shape, err := e.module(m, "input")
	if err != nil {
		return nil, err
	}
	if len(shape) != 1 {
		x = e.node("flatten", "Flatten", []string{x}, onnx.Int("axis", 1))
	}
	// The last node's output is the graph's "logits" (an Identity when no node gives it: a model
	// that only flattens).
	if n := len(e.g.Nodes); n > 0 && e.g.Nodes[n-1].Outputs[0] == x {
		e.g.Nodes[n-1].Outputs[0] = "logits"
	} else {
		e.node("logits", "Identity", []string{x})
	}
	e.g.Outputs = []onnx.Value{{Name: "logits", Shape: []onnx.Dim{batch, {Size: int64(m.classes)}}}}
	floats := func(v []float32) string {
		s := make([]string, len(v))
		for i, f := range v {
			s[i] = strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
		return strings.Join(s, ",")
	}
	input := fmt.Sprintf("float32 [N %d %d %d] (NCHW), each pixel scaled to [0, 1] then normalized per channel as (x - mean[c]) / std[c] "+
		"with %s and %s; output logits [N %d]", in.C, in.H, in.W, ONNXMetaMean, ONNXMetaStd, m.classes)
	meta := []onnx.Property{
		{Key: ONNXMetaModel, Value: m.String()},
		{Key: ONNXMetaInputShape, Value: fmt.Sprintf("%d,%d,%d", in.C, in.H, in.W)},
		{Key: ONNXMetaMean, Value: floats(mean)},
		{Key: ONNXMetaStd, Value: floats(std)},
		{Key: ONNXMetaInput, Value: input},
	}
	if cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		meta = append(meta, onnx.Property{Key: ONNXMetaPretrainedCfg, Value: string(b)})
	}
	return &onnx.Model{
		Opset:    ONNXOpset,
		Producer: "stoke",
		Doc:      fmt.Sprintf("%s, exported by Stoke. Input: %s.", m.String(), input),
		Graph:    e.g,
		Metadata: meta,
	}, nil
}

// onnxEmitter appends a model's nodes and initializers to an ONNX graph.
type onnxEmitter struct {
	g    onnx.Graph
	host map[*Param][]float32
}

// node appends a node named name (its output tensor has the same name) and returns its output.
func (e *onnxEmitter) node(name, op string, inputs []string, attrs ...onnx.Attr) string {
	e.g.Nodes = append(e.g.Nodes, onnx.Node{Name: name, Op: op, Inputs: inputs, Outputs: []string{name}, Attrs: attrs})
	return name
}

// init adds p's values as an initializer under p's name, and returns the name.
func (e *onnxEmitter) init(p *Param) string {
	dims := make([]int64, len(p.Shape))
	for i, d := range p.Shape {
		dims[i] = int64(d)
	}
	e.g.Initializers = append(e.g.Initializers, onnx.Tensor{Name: p.Name, Dims: dims, Data: e.host[p]})
	return p.Name
}
