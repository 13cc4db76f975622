package onnx

import (
	"fmt"
	"strconv"
	"strings"
)

// The metadata_props keys Describe writes.
const (
	// MetaModel is the model's description ("resnet8 3x32x32->10").
	MetaModel = "stoke.model"
	// MetaInputShape is the shape of one input image, "C,H,W" ("3,224,224").
	MetaInputShape = "stoke.input_shape"
	// MetaMean and MetaStd are the per-channel normalization the input must have had,
	// comma-separated ("0.485,0.456,0.406").
	MetaMean = "stoke.mean"
	MetaStd  = "stoke.std"
	// MetaInput says in words what the input is.
	MetaInput = "stoke.input"
	// MetaPretrainedCfg is the model's evaluation transform and class names as JSON under timm's
	// pretrained_cfg keys (input_size, interpolation, crop_pct, crop_mode, mean, std, resize,
	// num_classes, label_names: models.PretrainedCfg), when the exporter knows them.
	MetaPretrainedCfg = "stoke.pretrained_cfg"
)

// Describe sets m's metadata and doc for an image classifier as FromModule writes one: desc
// (MetaModel), the input's shape in ([C H W], MetaInputShape), the per-channel normalization its
// pixels on [0, 1] must have had (MetaMean, MetaStd; one value per channel), a sentence saying so
// (MetaInput), and pretrainedCfg (MetaPretrainedCfg) unless it is empty.
func (m *Model) Describe(desc string, in []int, classes int, mean, std []float32, pretrainedCfg []byte) {
	floats := func(v []float32) string {
		s := make([]string, len(v))
		for i, f := range v {
			s[i] = strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
		return strings.Join(s, ",")
	}
	dims := make([]string, len(in))
	for i, d := range in {
		dims[i] = strconv.Itoa(d)
	}
	input := fmt.Sprintf("float32 [N %s] (NCHW), each pixel scaled to [0, 1] then normalized per channel as (x - mean[c]) / std[c] "+
		"with %s and %s; output logits [N %d]", strings.Join(dims, " "), MetaMean, MetaStd, classes)
	m.Metadata = []Property{
		{Key: MetaModel, Value: desc},
		{Key: MetaInputShape, Value: strings.Join(dims, ",")},
		{Key: MetaMean, Value: floats(mean)},
		{Key: MetaStd, Value: floats(std)},
		{Key: MetaInput, Value: input},
	}
	if len(pretrainedCfg) > 0 {
		m.Metadata = append(m.Metadata, Property{Key: MetaPretrainedCfg, Value: string(pretrainedCfg)})
	}
	m.Doc = fmt.Sprintf("%s, exported by Stoke. Input: %s.", desc, input)
}
