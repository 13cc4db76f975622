package models

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/nn"
)

// The zoo registers timm's builders under timm's names with the prefix "timm/", as the Hugging
// Face hub names timm's weights ("timm/vit_tiny_patch16_224.augreg_in21k"): timm and torchvision
// both have a convnext_tiny and an efficientnet_b0, of the same architecture and different
// state_dict names, and a weights file loads into one layout only. One rule for every timm
// builder, colliding or not, so a name says which layout its weights have.
const timmPrefix = "timm/"

// TimmViTConfig is timm's VisionTransformer's create_model keyword arguments that its ViT and
// DeiT configurations use. DropRate is the head's dropout (timm's head_drop); DropPathRate the
// last block's stochastic depth (earlier blocks' rise linearly from 0).
type TimmViTConfig struct {
	ImgSize, PatchSize, EmbedDim, Depth, NumHeads int
	MLPRatio, DropRate, DropPathRate              float64
}

// TimmViT is timm.models.VisionTransformer with its defaults (a class token, learned position
// embeddings, pre-norm blocks, the class token's final state to the head): the architecture of
// torchvision's VisionTransformer with stochastic depth in its blocks and timm's state_dict names
// (cls_token, pos_embed, patch_embed.proj, blocks.N.attn.qkv, head).
type TimmViT struct {
	ClsToken   *nn.Tensor
	PosEmbed   *nn.Tensor
	PatchEmbed *TimmPatchEmbed
	Blocks     nn.Sequential
	Norm       *nn.LayerNormLayer
	Head       *nn.LinearLayer
	Config     TimmViTConfig `nn:"-"`
	name       string
}

// LayerID is the depth of a tensor for layer-wise learning-rate decay (optim.Layered, timm's
// get_layer_id_for_vit): 0 for the patch embedding, the class token and the position
// embedding, i+1 for blocks.i's tensors, depth+1 for the final norm and the head.
func (v *TimmViT) LayerID(name string) (id, last int) {
	last = v.Config.Depth + 1
	switch {
	case strings.HasPrefix(name, "patch_embed."), name == "cls_token", name == "pos_embed":
		return 0, last
	case strings.HasPrefix(name, "blocks."):
		block, _, _ := strings.Cut(strings.TrimPrefix(name, "blocks."), ".")
		if i, err := strconv.Atoi(block); err == nil {
			return i + 1, last
		}
	}
	return last, last
}

// TimmPatchEmbed is timm's PatchEmbed: a strided convolution, its grid flattened to tokens.
type TimmPatchEmbed struct {
	Proj *nn.Conv2dLayer
}

// TimmBlock is timm's Block: x + drop_path(attn(norm1(x))), then + drop_path(mlp(norm2(·))).
type TimmBlock struct {
	gradCheckpoint
	Norm1    *nn.LayerNormLayer
	Attn     *TimmAttention
	Norm2    *nn.LayerNormLayer
	MLP      *TimmMlp
	dropPath float32
}

// TimmAttention is timm's Attention: one qkv projection, then torchvision's multi-head
// self-attention, whose math (queries, keys and values in that order, each split by heads) and
// code it shares.
type TimmAttention struct {
	QKV  *nn.LinearLayer `nn:"qkv"`
	Proj *nn.LinearLayer
	mha  *MultiheadAttention // over QKV's and Proj's tensors
}

// TimmMlp is timm's Mlp: fc1, GELU, fc2, each fc a Linear, or a 1×1 convolution (use_conv, a
// ConvNeXt's conv_mlp).
type TimmMlp struct {
	FC1, FC2 nn.Module
}

// NewTimmViT builds timm's VisionTransformer for images of c channels and the given number of
// classes; name is the model's. It starts as timm's (init_weights in its default mode): every
// linear layer's weight and the position embeddings truncated normal with std 0.02, zero biases,
// the class token normal with std 1e-6, the patch embedding's convolution as torch.nn.Conv2d
// starts.
func NewTimmViT(cfg TimmViTConfig, c, classes int, name string) (*TimmViT, error) {
	hidden := int(float64(cfg.EmbedDim) * cfg.MLPRatio)
	switch {
	case cfg.PatchSize <= 0 || cfg.ImgSize < cfg.PatchSize:
		return nil, fmt.Errorf("patch_size %d and img_size %d: want 0 < patch_size <= img_size", cfg.PatchSize, cfg.ImgSize)
	case cfg.Depth <= 0 || cfg.NumHeads <= 0 || cfg.EmbedDim <= 0:
		return nil, fmt.Errorf("depth %d, num_heads %d, embed_dim %d: want each > 0", cfg.Depth, cfg.NumHeads, cfg.EmbedDim)
	case cfg.EmbedDim%cfg.NumHeads != 0:
		return nil, fmt.Errorf("embed_dim %d is not a multiple of num_heads %d", cfg.EmbedDim, cfg.NumHeads)
	case hidden <= 0 || hidden > maxArg:
		return nil, fmt.Errorf("mlp_ratio %g: embed_dim %d times it is %d hidden units; want 1 to %d", cfg.MLPRatio, cfg.EmbedDim, hidden, maxArg)
	}
	e, p := cfg.EmbedDim, cfg.PatchSize
	side := cfg.ImgSize / p
	patch := nn.NewConv2d(c, e, p, nn.ConvOptions{Stride: p}, true)
	torchDefault(patch.Weight, patch.Bias)
	v := &TimmViT{
		ClsToken:   nn.Param([]int{1, 1, e}, nn.Embedding).SetDist(nn.Normal(1e-6)),
		PosEmbed:   nn.Param([]int{1, side*side + 1, e}, nn.Embedding).SetDist(nn.TruncNormal(0.02)),
		PatchEmbed: &TimmPatchEmbed{Proj: patch},
		Norm:       layerNorm(e),
		Head:       nn.NewLinear(e, classes, true),
		Config:     cfg,
		name:       name,
	}
	for i := range cfg.Depth {
		qkv, proj := nn.NewLinear(e, 3*e, true), nn.NewLinear(e, e, true)
		dp := 0.0
		if cfg.Depth > 1 {
			dp = cfg.DropPathRate * float64(i) / float64(cfg.Depth-1) // torch.linspace(0, drop_path_rate, depth)
		}
		v.Blocks = append(v.Blocks, &TimmBlock{
			Norm1: layerNorm(e),
			Attn: &TimmAttention{QKV: qkv, Proj: proj,
				mha: &MultiheadAttention{InProjWeight: qkv.Weight, InProjBias: qkv.Bias, OutProj: proj, heads: cfg.NumHeads}},
			Norm2:    layerNorm(e),
			MLP:      &TimmMlp{FC1: nn.NewLinear(e, hidden, true), FC2: nn.NewLinear(hidden, e, true)},
			dropPath: float32(dp),
		})
	}
	initLayers(v, nil, always(nn.TruncNormal(0.02)))
	return v, nil
}

func (v *TimmViT) String() string { return v.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (v *TimmViT) Forward(x *nn.Tensor) *nn.Tensor {
	n, e := x.Dim(0), v.Config.EmbedDim
	x = v.PatchEmbed.Forward(x)
	cls := nn.Add(x.Graph().Full(0, n, 1, e), v.ClsToken) // the class token, once per sample
	x = nn.Add(nn.Concat(1, cls, x), v.PosEmbed)
	x = v.Norm.Forward(v.Blocks.Forward(x))
	x = nn.Narrow(x, 1, 0, 1).Reshape(n, e)
	return v.Head.Forward(nn.Dropout(x, float32(v.Config.DropRate)))
}

// Resample makes the position embeddings of weights trained at another image size (or patch
// size) fit this model: train.LoadWeights calls it for pos_embed when the file's shape differs
// (see resamplePosEmbed).
func (v *TimmViT) Resample(name string, from []int, values []float32) ([]float32, error) {
	if name != "pos_embed" {
		return nil, fmt.Errorf("only pos_embed is resampled")
	}
	return resamplePosEmbed(from, values, v.Config.EmbedDim, v.Config.ImgSize/v.Config.PatchSize)
}

// Forward maps images [N C H W] to tokens [N h·w E], row by row.
func (p *TimmPatchEmbed) Forward(x *nn.Tensor) *nn.Tensor {
	n := x.Dim(0)
	x = p.Proj.Forward(x) // [N E h w]
	return nn.Transpose(x.Reshape(n, x.Dim(1), -1), 1, 2)
}

// Forward runs the block on x [N S E].
func (b *TimmBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *TimmBlock) forward(x *nn.Tensor) *nn.Tensor {
	x = nn.Add(x, nn.DropPath(b.Attn.Forward(b.Norm1.Forward(x)), b.dropPath))
	return nn.Add(x, nn.DropPath(b.MLP.Forward(b.Norm2.Forward(x)), b.dropPath))
}

// Forward is self-attention over x [N S E].
func (a *TimmAttention) Forward(x *nn.Tensor) *nn.Tensor { return a.mha.Forward(x) }

// Forward is fc2(GELU(fc1(x))).
func (m *TimmMlp) Forward(x *nn.Tensor) *nn.Tensor {
	return m.FC2.Forward(nn.GELU(m.FC1.Forward(x)))
}

// timmViTBuilder builds timm/name from base, its configuration (img_size 224 unless given).
func timmViTBuilder(name string, base TimmViTConfig) Builder {
	return func(s string, in Shape, classes int) (*Model, error) {
		cfg := base
		args := []*arg{
			{name: "img_size", i: &cfg.ImgSize}, {name: "patch_size", i: &cfg.PatchSize},
			{name: "embed_dim", i: &cfg.EmbedDim}, {name: "depth", i: &cfg.Depth}, {name: "num_heads", i: &cfg.NumHeads},
			{name: "mlp_ratio", f: &cfg.MLPRatio, hi: 64}, {name: "drop_rate", f: &cfg.DropRate}, {name: "drop_path_rate", f: &cfg.DropPathRate},
		}
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		if in.H != cfg.ImgSize || in.W != cfg.ImgSize {
			return nil, fmt.Errorf("img_size %d; the images are %dx%d (give img_size=%d, or --size %d)", cfg.ImgSize, in.H, in.W, in.H, cfg.ImgSize)
		}
		name := spec(timmPrefix+name, args)
		v, err := NewTimmViT(cfg, in.C, classes, name)
		if err != nil {
			return nil, err
		}
		return &Model{Name: name, Module: v}, nil
	}
}

// timmViTs are timm's ViT and DeiT configurations (deit_*_patch16_224 are the same
// VisionTransformer as their vit_* peers: DeiT differs in its training recipe, not its layers).
var timmViTs = []struct {
	name string
	cfg  TimmViTConfig
}{
	{"vit_tiny_patch16_224", TimmViTConfig{ImgSize: 224, PatchSize: 16, EmbedDim: 192, Depth: 12, NumHeads: 3, MLPRatio: 4}},
	{"vit_small_patch16_224", TimmViTConfig{ImgSize: 224, PatchSize: 16, EmbedDim: 384, Depth: 12, NumHeads: 6, MLPRatio: 4}},
	{"vit_base_patch16_224", TimmViTConfig{ImgSize: 224, PatchSize: 16, EmbedDim: 768, Depth: 12, NumHeads: 12, MLPRatio: 4}},
	{"deit_tiny_patch16_224", TimmViTConfig{ImgSize: 224, PatchSize: 16, EmbedDim: 192, Depth: 12, NumHeads: 3, MLPRatio: 4}},
	{"deit_small_patch16_224", TimmViTConfig{ImgSize: 224, PatchSize: 16, EmbedDim: 384, Depth: 12, NumHeads: 6, MLPRatio: 4}},
	{"deit_base_patch16_224", TimmViTConfig{ImgSize: 224, PatchSize: 16, EmbedDim: 768, Depth: 12, NumHeads: 12, MLPRatio: 4}},
}

func init() {
	for _, v := range timmViTs {
		if err := Register(timmPrefix+v.name, timmViTBuilder(v.name, v.cfg)); err != nil {
			panic(err)
		}
	}
}
