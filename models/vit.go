package models

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/nn"
)

// ViTConfig is torchvision's VisionTransformer's arguments.
type ViTConfig struct {
	ImageSize, PatchSize, NumLayers, NumHeads, HiddenDim, MLPDim int
	Dropout, AttentionDropout                                    float64
}

// VisionTransformer is torchvision.models.VisionTransformer (Dosovitskiy et al., 2021): the image
// cut into patches by a strided convolution, a class token and learned position embeddings, pre-norm
// encoder blocks of multi-head self-attention and a GELU MLP, the class token's final state to a
// linear head. Its tensors carry torchvision's state_dict names.
type VisionTransformer struct {
	ConvProj   *nn.Conv2dLayer
	ClassToken *nn.Tensor
	Encoder    *Encoder
	Heads      nn.Dict
	Config     ViTConfig `nn:"-"`
}

// Encoder is the transformer's stack of blocks between the position embeddings and a final norm.
type Encoder struct {
	PosEmbedding *nn.Tensor
	Layers       nn.Dict
	LN           *nn.LayerNormLayer
	dropout      float32
}

// EncoderBlock is x + attention(ln_1(x)), then + mlp(ln_2(·)).
type EncoderBlock struct {
	gradCheckpoint
	LN1           *nn.LayerNormLayer `nn:"ln_1"`
	SelfAttention *MultiheadAttention
	LN2           *nn.LayerNormLayer `nn:"ln_2"`
	MLP           nn.Sequential
	dropout       float32
}

// MultiheadAttention is torch.nn.MultiheadAttention's self-attention (batch first): one input
// projection to queries, keys and values, scaled dot-product attention per head, an output
// projection.
type MultiheadAttention struct {
	InProjWeight, InProjBias *nn.Tensor
	OutProj                  *nn.LinearLayer
	heads                    int
	dropout                  float32
}

// NewViT builds a VisionTransformer for images of c channels and the given number of classes,
// initialized as torchvision's: the patch projection truncated normal with std √(1/fan_in), the
// position embeddings normal with std 0.02, the class token and the head zeros, the attention's
// input projection Xavier uniform (its output projection as torch.nn.Linear starts), the MLPs'
// weights Xavier uniform and their biases normal with std 1e-6, the other biases zeros.
func NewViT(cfg ViTConfig, c, classes int) (*VisionTransformer, error) {
	switch {
	case cfg.PatchSize <= 0 || cfg.ImageSize < cfg.PatchSize:
		return nil, fmt.Errorf("patch_size %d and image_size %d: want 0 < patch_size <= image_size", cfg.PatchSize, cfg.ImageSize)
	case cfg.NumLayers <= 0 || cfg.NumHeads <= 0 || cfg.HiddenDim <= 0 || cfg.MLPDim <= 0:
		return nil, fmt.Errorf("num_layers %d, num_heads %d, hidden_dim %d, mlp_dim %d: want each > 0", cfg.NumLayers, cfg.NumHeads, cfg.HiddenDim, cfg.MLPDim)
	case cfg.ImageSize%cfg.PatchSize != 0:
		// As torchvision ("Input shape indivisible by patch size!"): the pixels past the last
		// whole patch would be dropped without a word.
		return nil, fmt.Errorf("image_size %d is not a multiple of patch_size %d", cfg.ImageSize, cfg.PatchSize)
	case cfg.HiddenDim%cfg.NumHeads != 0:
		return nil, fmt.Errorf("hidden_dim %d is not a multiple of num_heads %d", cfg.HiddenDim, cfg.NumHeads)
	}
	e, p := cfg.HiddenDim, cfg.PatchSize
	side := cfg.ImageSize / p
	enc := &Encoder{
		PosEmbedding: nn.Param([]int{1, side*side + 1, e}, nn.Embedding),
		LN:           layerNorm(e), dropout: float32(cfg.Dropout),
	}
	for i := range cfg.NumLayers {
		attn := &MultiheadAttention{
			InProjWeight: nn.Param([]int{3 * e, e}, nn.Weight), InProjBias: nn.Param([]int{3 * e}, nn.Zeros),
			OutProj: nn.NewLinear(e, e, true), heads: cfg.NumHeads, dropout: float32(cfg.AttentionDropout),
		}
		// torch.nn.MultiheadAttention's _reset_parameters.
		attn.InProjWeight.SetDist(xavierUniform(attn.InProjWeight))
		torchDefault(attn.OutProj.Weight, nil)
		fc1, fc2 := nn.NewLinear(e, cfg.MLPDim, true), nn.NewLinear(cfg.MLPDim, e, true)
		for _, l := range []*nn.LinearLayer{fc1, fc2} { // MLPBlock's
			l.Weight.SetDist(xavierUniform(l.Weight))
			l.Bias.SetDist(nn.Normal(1e-6))
		}
		enc.Layers = append(enc.Layers, nn.Entry{Name: fmt.Sprintf("encoder_layer_%d", i), Module: &EncoderBlock{
			LN1: layerNorm(e), SelfAttention: attn, LN2: layerNorm(e),
			MLP: nn.Sequential{fc1, nn.Fn(nn.GELU), nn.DropoutLayer{P: float32(cfg.Dropout)},
				fc2, nn.DropoutLayer{P: float32(cfg.Dropout)}},
			dropout: float32(cfg.Dropout),
		}})
	}
	proj := nn.NewConv2d(c, e, p, nn.ConvOptions{Stride: p}, true)
	fanIn, _ := fans(proj.Weight)
	proj.Weight.SetDist(nn.TruncNormal(math.Sqrt(1 / fanIn)))
	head := nn.NewLinear(e, classes, true)
	head.Weight.SetDist(nn.Const(0))
	return &VisionTransformer{
		ConvProj:   proj,
		ClassToken: nn.Param([]int{1, 1, e}, nn.Zeros),
		Encoder:    enc,
		Heads:      nn.Dict{{Name: "head", Module: head}},
		Config:     cfg,
	}, nil
}

// layerNorm is torchvision's ViT norm: LayerNorm with eps 1e-6.
func layerNorm(d int) *nn.LayerNormLayer {
	l := nn.NewLayerNorm(d)
	l.Eps = 1e-6
	return l
}

func (v *VisionTransformer) String() string { return "vit" }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (v *VisionTransformer) Forward(x *nn.Tensor) *nn.Tensor {
	n, e := x.Dim(0), v.Config.HiddenDim
	x = v.ConvProj.Forward(x) // [N E h w]
	x = nn.Transpose(x.Reshape(n, e, -1), 1, 2)
	token := nn.Add(x.Graph().Full(0, n, 1, e), v.ClassToken) // the class token, once per sample
	x = v.Encoder.Forward(nn.Concat(1, token, x))
	return v.Heads.Forward(nn.Narrow(x, 1, 0, 1).Reshape(n, e))
}

// Forward adds the position embeddings and runs the blocks and the final norm.
func (enc *Encoder) Forward(x *nn.Tensor) *nn.Tensor {
	x = nn.Dropout(nn.Add(x, enc.PosEmbedding), enc.dropout)
	return enc.LN.Forward(enc.Layers.Forward(x))
}

// Forward runs the block on x [N S E].
func (b *EncoderBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *EncoderBlock) forward(x *nn.Tensor) *nn.Tensor {
	x = nn.Add(nn.Dropout(b.SelfAttention.Forward(b.LN1.Forward(x)), b.dropout), x)
	return nn.Add(x, b.MLP.Forward(b.LN2.Forward(x)))
}

// Forward is self-attention over x [N S E].
func (a *MultiheadAttention) Forward(x *nn.Tensor) *nn.Tensor {
	n, s, e := x.Dim(0), x.Dim(1), x.Dim(2)
	h := a.heads
	d := e / h
	qkv := nn.Linear(x, a.InProjWeight, a.InProjBias)           // [N S 3E]
	qkv = nn.Permute(qkv.Reshape(n, s, 3, h, d), 2, 0, 3, 1, 4) // [3 N H S D]
	parts := nn.Split(qkv, 0, 1, 1, 1)
	q, k, v := parts[0].Reshape(n*h, s, d), parts[1].Reshape(n*h, s, d), parts[2].Reshape(n*h, s, d)
	scale := float32(1 / math.Sqrt(float64(d)))
	var out *nn.Tensor // [NH S D]
	if a.dropout > 0 && x.Graph().Training() {
		// Dropout on the probabilities: the fused op has none, so the scores are made whole.
		scores := nn.MatMul(nn.Scale(q, scale), nn.Transpose(k, 1, 2)) // [NH S S]
		out = nn.MatMul(nn.Dropout(nn.Softmax(scores), a.dropout), v)
	} else {
		out = nn.ScaledDotProductAttention(q, k, v, scale)
	}
	out = nn.Permute(out.Reshape(n, h, s, d), 0, 2, 1, 3).Reshape(n, s, e)
	return a.OutProj.Forward(out)
}

// LayerID is the depth of a tensor for layer-wise learning-rate decay (optim.Layered, timm's
// get_layer_id_for_vit): 0 for the patch projection, the class token and the position
// embedding, i+1 for encoder_layer_i's tensors, num_layers+1 for the final norm and the head.
func (v *VisionTransformer) LayerID(name string) (id, last int) {
	last = v.Config.NumLayers + 1
	switch {
	case strings.HasPrefix(name, "conv_proj."), name == "class_token", name == "encoder.pos_embedding":
		return 0, last
	case strings.HasPrefix(name, "encoder.layers.encoder_layer_"):
		block, _, _ := strings.Cut(strings.TrimPrefix(name, "encoder.layers.encoder_layer_"), ".")
		if i, err := strconv.Atoi(block); err == nil {
			return i + 1, last
		}
	}
	return last, last
}

// vitArgs are the arguments of vit and its named configurations, bound to cfg.
func vitArgs(cfg *ViTConfig, required bool) []*arg {
	return []*arg{
		{name: "image_size", i: &cfg.ImageSize, required: required}, {name: "patch_size", i: &cfg.PatchSize, required: required},
		{name: "num_layers", i: &cfg.NumLayers, required: required}, {name: "num_heads", i: &cfg.NumHeads, required: required},
		{name: "hidden_dim", i: &cfg.HiddenDim, required: required}, {name: "mlp_dim", i: &cfg.MLPDim, required: required},
		{name: "dropout", f: &cfg.Dropout}, {name: "attention_dropout", f: &cfg.AttentionDropout},
	}
}

// vitBuilder builds name from base (its named configuration; zero for vit itself).
func vitBuilder(name string, base ViTConfig) Builder {
	return func(s string, in Shape, classes int) (*Model, error) {
		cfg := base
		args := vitArgs(&cfg, base == ViTConfig{})
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		if base != (ViTConfig{}) && !args[0].set && in.H == in.W {
			// A named ViT takes its images' side unless image_size says otherwise, as torchvision
			// builds vit_h_14 at its default weights' 518 and timm at a given img_size: the
			// position embedding is made for the grid (and resampled from weights of another,
			// Resampler), and the checkpoint records the input it was built for.
			cfg.ImageSize = in.H
		}
		if in.H != cfg.ImageSize || in.W != cfg.ImageSize {
			return nil, fmt.Errorf("image_size %d; the images are %dx%d (give image_size=%d, or --size %d)", cfg.ImageSize, in.H, in.W, in.H, cfg.ImageSize)
		}
		v, err := NewViT(cfg, in.C, classes)
		if err != nil {
			return nil, err
		}
		return &Model{Name: spec(name, args), Module: v}, nil
	}
}

func init() {
	vits := []struct {
		name string
		cfg  ViTConfig
	}{
		{"vit", ViTConfig{}},
		{"vit_b_16", ViTConfig{ImageSize: 224, PatchSize: 16, NumLayers: 12, NumHeads: 12, HiddenDim: 768, MLPDim: 3072}},
		{"vit_b_32", ViTConfig{ImageSize: 224, PatchSize: 32, NumLayers: 12, NumHeads: 12, HiddenDim: 768, MLPDim: 3072}},
		{"vit_l_16", ViTConfig{ImageSize: 224, PatchSize: 16, NumLayers: 24, NumHeads: 16, HiddenDim: 1024, MLPDim: 4096}},
		{"vit_l_32", ViTConfig{ImageSize: 224, PatchSize: 32, NumLayers: 24, NumHeads: 16, HiddenDim: 1024, MLPDim: 4096}},
		{"vit_h_14", ViTConfig{ImageSize: 224, PatchSize: 14, NumLayers: 32, NumHeads: 16, HiddenDim: 1280, MLPDim: 5120}},
	}
	for _, v := range vits {
		if err := Register(v.name, vitBuilder(v.name, v.cfg)); err != nil {
			panic(err)
		}
	}
}
