package models

import (
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/nn"
)

// SwinConfig is torchvision's SwinTransformer's arguments, with square patches and windows:
// four stages of Depths[i] blocks of EmbedDim·2^i channels and NumHeads[i] heads, attention
// within WindowSize×WindowSize windows, shifted by half a window in every second block. V2 selects
// SwinTransformerBlockV2 and PatchMergingV2 (swin_v2_*).
type SwinConfig struct {
	PatchSize, EmbedDim, WindowSize                          int
	Depths, NumHeads                                         [4]int
	MLPRatio, Dropout, AttentionDropout, StochasticDepthProb float64
	V2                                                       bool
}

// SwinTransformer is torchvision.models.SwinTransformer (Liu et al., 2021; V2: Liu et al., 2022):
// a patch embedding, four stages of shifted-window attention blocks joined by patch merging, a
// final LayerNorm, average pooling and a linear head. Its tensors carry torchvision's state_dict
// names (features.1.0.attn.relative_position_bias_table, features.2.reduction.weight,
// head.weight). The two buffers torchvision derives from the window size, relative_position_index
// and V2's relative_coords_table, are constants of the forward pass here, given to the loader and
// the exporter by Derived, so torchvision's files load strictly and Stoke's exports load into
// torchvision strictly.
type SwinTransformer struct {
	Features nn.Sequential
	Norm     *nn.LayerNormLayer
	Head     *nn.LinearLayer
	name     string
}

// SwinBlock is torchvision's SwinTransformerBlock: x + drop_path(attn(norm1(x))), then
// + drop_path(mlp(norm2(·))); V2 normalizes after the branch instead (x + drop_path(norm1(attn(x)))).
type SwinBlock struct {
	gradCheckpoint
	Norm1    *nn.LayerNormLayer
	Attn     *ShiftedWindowAttention
	Norm2    *nn.LayerNormLayer
	MLP      nn.Sequential
	dropPath float32
	v2       bool
}

// ShiftedWindowAttention is torchvision's ShiftedWindowAttention (V1: scaled dot products plus a
// learned bias per relative position) or ShiftedWindowAttentionV2 (cosine similarity times a
// learned per-head scale, plus 16·sigmoid of a bias that a small MLP computes from log-spaced
// relative coordinates). V1 has RelativePositionBiasTable; V2 has LogitScale and CpbMLP.
type ShiftedWindowAttention struct {
	RelativePositionBiasTable *nn.Tensor // V1: [(2w−1)², heads], row (Δh+w−1)·(2w−1) + Δw+w−1
	LogitScale                *nn.Tensor // V2: [heads 1 1], the log of the scale
	Qkv, Proj                 *nn.LinearLayer
	CpbMLP                    nn.Sequential `nn:"cpb_mlp"` // V2
	window, shift, heads      int
	dropout, attnDropout      float32
}

// PatchMerging is torchvision's PatchMerging: each 2×2 group of pixels (the map padded to even
// sides) concatenated to 4C channels, normalized and reduced to 2C; PatchMergingV2 reduces, then
// normalizes.
type PatchMerging struct {
	Reduction *nn.LinearLayer
	Norm      *nn.LayerNormLayer
	v2        bool
}

// NewSwin builds a SwinTransformer for images of c channels and the given number of classes,
// initialized as torchvision's: every linear layer's weight (V2's position MLPs' too) and the
// relative position bias tables truncated normal with std 0.02, zero biases, V2's logit scales
// log 10, the patch embedding's convolution as torch.nn.Conv2d starts.
func NewSwin(cfg SwinConfig, c, classes int, name string) (*SwinTransformer, error) {
	switch {
	case cfg.PatchSize <= 0 || cfg.EmbedDim <= 0:
		return nil, fmt.Errorf("patch_size %d, embed_dim %d: want each > 0", cfg.PatchSize, cfg.EmbedDim)
	case cfg.WindowSize <= 0:
		return nil, fmt.Errorf("window_size %d: want > 0", cfg.WindowSize)
	case cfg.V2 && cfg.WindowSize < 2:
		// V2's coordinate table divides by window_size−1.
		return nil, fmt.Errorf("window_size %d: V2 wants at least 2", cfg.WindowSize)
	}
	total := 0
	for i := range 4 {
		dim := cfg.EmbedDim << i
		switch {
		case cfg.Depths[i] <= 0 || cfg.NumHeads[i] <= 0:
			return nil, fmt.Errorf("stage %d: depth %d, num_heads %d: want each > 0", i+1, cfg.Depths[i], cfg.NumHeads[i])
		case dim%cfg.NumHeads[i] != 0:
			return nil, fmt.Errorf("stage %d: %d channels (embed_dim·%d) are not a multiple of num_heads_%d=%d", i+1, dim, 1<<i, i+1, cfg.NumHeads[i])
		case int(float64(dim)*cfg.MLPRatio) <= 0:
			return nil, fmt.Errorf("mlp_ratio %g: stage %d's MLP has no hidden units", cfg.MLPRatio, i+1)
		}
		total += cfg.Depths[i]
	}
	e, p := cfg.EmbedDim, cfg.PatchSize
	embed := nn.NewConv2d(c, e, p, nn.ConvOptions{Stride: p}, true)
	torchDefault(embed.Weight, embed.Bias)
	feats := nn.Sequential{nn.Sequential{
		embed,
		nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Permute(x, 0, 2, 3, 1) }), // channels last
		nn.NewLayerNorm(e),
	}}
	id := 0
	for i := range 4 {
		dim, heads := e<<i, cfg.NumHeads[i]
		var stage nn.Sequential
		for j := range cfg.Depths[i] {
			pd := 0.0
			if total > 1 {
				pd = cfg.StochasticDepthProb * float64(id) / float64(total-1)
			}
			hidden := int(float64(dim) * cfg.MLPRatio)
			attn := &ShiftedWindowAttention{
				Qkv: nn.NewLinear(dim, 3*dim, true), Proj: nn.NewLinear(dim, dim, true),
				window: cfg.WindowSize, shift: (j % 2) * (cfg.WindowSize / 2), heads: heads,
				dropout: float32(cfg.Dropout), attnDropout: float32(cfg.AttentionDropout),
			}
			if cfg.V2 {
				attn.LogitScale = nn.Param([]int{heads, 1, 1}, nn.Ones).SetDist(nn.Const(math.Log(10)))
				attn.CpbMLP = nn.Sequential{nn.NewLinear(2, 512, true), nn.Fn(nn.ReLU), nn.NewLinear(512, heads, false)}
			} else {
				m := 2*cfg.WindowSize - 1
				attn.RelativePositionBiasTable = nn.Param([]int{m * m, heads}, nn.Embedding).SetDist(nn.TruncNormal(0.02))
			}
			stage = append(stage, &SwinBlock{
				Norm1: nn.NewLayerNorm(dim), Attn: attn, Norm2: nn.NewLayerNorm(dim),
				MLP: nn.Sequential{nn.NewLinear(dim, hidden, true), nn.Fn(nn.GELU), nn.DropoutLayer{P: float32(cfg.Dropout)},
					nn.NewLinear(hidden, dim, true), nn.DropoutLayer{P: float32(cfg.Dropout)}},
				dropPath: float32(pd), v2: cfg.V2,
			})
			id++
		}
		feats = append(feats, stage)
		if i < 3 {
			norm := 4 * dim
			if cfg.V2 {
				norm = 2 * dim
			}
			feats = append(feats, &PatchMerging{Reduction: nn.NewLinear(4*dim, 2*dim, false), Norm: nn.NewLayerNorm(norm), v2: cfg.V2})
		}
	}
	last := e << 3
	m := &SwinTransformer{Features: feats, Norm: nn.NewLayerNorm(last), Head: nn.NewLinear(last, classes, true), name: name}
	initLayers(m, nil, always(nn.TruncNormal(0.02)))
	return m, nil
}

func (m *SwinTransformer) String() string { return m.name }

// Derived implements weights.Derived: each attention block's relative_position_index (and V2's
// relative_coords_table), as torchvision's state_dict holds them.
func (m *SwinTransformer) Derived() []nn.DerivedTensor {
	var out []nn.DerivedTensor
	for i, f := range m.Features {
		stage, ok := f.(nn.Sequential)
		if !ok || i == 0 {
			continue
		}
		for j, b := range stage {
			a := b.(*SwinBlock).Attn
			ws := a.window
			prefix := fmt.Sprintf("features.%d.%d.attn.", i, j)
			if a.LogitScale != nil {
				out = append(out, nn.DerivedTensor{Name: prefix + "relative_coords_table",
					Shape: []int{1, 2*ws - 1, 2*ws - 1, 2}, F32: coordsTable(ws)})
			}
			// torchvision's define_relative_position_index: tokens p and q of a window, at
			// (ph, pw) and (qh, qw), index the table's row (ph−qh+w−1)·(2w−1) + pw−qw+w−1.
			t := ws * ws
			index := make([]int64, 0, t*t)
			for p := range t {
				for q := range t {
					index = append(index, int64((p/ws-q/ws+ws-1)*(2*ws-1)+p%ws-q%ws+ws-1))
				}
			}
			out = append(out, nn.DerivedTensor{Name: prefix + "relative_position_index", Shape: []int{t * t}, I64: index})
		}
	}
	return out
}

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *SwinTransformer) Forward(x *nn.Tensor) *nn.Tensor {
	x = m.Norm.Forward(m.Features.Forward(x))             // [N H W C]
	return m.Head.Forward(nn.Mean(x, []int{1, 2}, false)) // avgpool and flatten
}

// Forward runs the block on x [N H W C].
func (b *SwinBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *SwinBlock) forward(x *nn.Tensor) *nn.Tensor {
	if b.v2 {
		x = nn.Add(x, nn.DropPath(b.Norm1.Forward(b.Attn.Forward(x)), b.dropPath))
		return nn.Add(x, nn.DropPath(b.Norm2.Forward(b.MLP.Forward(x)), b.dropPath))
	}
	x = nn.Add(x, nn.DropPath(b.Attn.Forward(b.Norm1.Forward(x)), b.dropPath))
	return nn.Add(x, nn.DropPath(b.MLP.Forward(b.Norm2.Forward(x)), b.dropPath))
}

// Forward merges x [N H W C] to [N ⌈H/2⌉ ⌈W/2⌉ 2C].
func (p *PatchMerging) Forward(x *nn.Tensor) *nn.Tensor {
	x = padTo(padTo(x, 1, 2), 2, 2)
	n, h, w, c := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	// Pixel (2i+r, 2j+s) goes to channels [(2s+r)·C, (2s+r+1)·C) of (i, j): torchvision's
	// cat([x0, x1, x2, x3]) of x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2].
	x = nn.Permute(x.Reshape(n, h/2, 2, w/2, 2, c), 0, 1, 3, 4, 2, 5).Reshape(n, h/2, w/2, 4*c)
	if p.v2 {
		return p.Norm.Forward(p.Reduction.Forward(x))
	}
	return p.Reduction.Forward(p.Norm.Forward(x))
}

// Forward is torchvision's shifted_window_attention over x [N H W C]: the map padded with zeros
// to whole windows, rolled back by the shift (none along a side that one window covers), cut
// into windows that attend within themselves (a rolled-in token masked from the others with
// −100), put back, rolled forward and unpadded. Its dropouts act in training only (torchvision's
// F.dropout calls also drop in evaluation).
func (a *ShiftedWindowAttention) Forward(x *nn.Tensor) *nn.Tensor {
	g := x.Graph()
	n, h, w, c := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	ws, heads := a.window, a.heads
	d := c / heads
	x = padTo(padTo(x, 1, ws), 2, ws)
	ph, pw := x.Dim(1), x.Dim(2)
	sh, sw := a.shift, a.shift
	if ws >= ph {
		sh = 0
	}
	if ws >= pw {
		sw = 0
	}
	x = roll(roll(x, 1, -sh), 2, -sw)
	nh, nw, t := ph/ws, pw/ws, ws*ws
	b := n * nh * nw // windows
	x = nn.Permute(x.Reshape(n, nh, ws, nw, ws, c), 0, 1, 3, 2, 4, 5).Reshape(b, t, c)

	bias := a.Qkv.Bias
	if a.LogitScale != nil {
		// V2 has no key bias: torchvision zeroes that third of qkv.bias in every pass.
		mask := make([]float32, 3*c)
		for i := range mask {
			if i < c || i >= 2*c {
				mask[i] = 1
			}
		}
		bias = nn.Mul(bias, g.Constant(mask, 3*c))
	}
	qkv := nn.Permute(nn.Linear(x, a.Qkv.Weight, bias).Reshape(b, t, 3, heads, d), 2, 0, 3, 1, 4) // [3 B heads T D]
	parts := nn.Split(qkv, 0, 1, 1, 1)
	q, k, v := parts[0].Reshape(b*heads, t, d), parts[1].Reshape(b*heads, t, d), parts[2].Reshape(b*heads, t, d)
	var attn *nn.Tensor
	if a.LogitScale != nil {
		attn = nn.MatMul(normalize(q), nn.Transpose(normalize(k), 1, 2)).Reshape(b, heads, t, t)
		// clamp(logit_scale, max=log 100).exp(): min(s, m) = s − relu(s − m), exact below m.
		s := a.LogitScale
		s = nn.Sub(s, nn.ReLU(nn.AddScalar(s, -float32(math.Log(100)))))
		attn = nn.Mul(attn, nn.Exp(s))
	} else {
		q = nn.Scale(q, float32(math.Pow(float64(d), -0.5)))
		attn = nn.MatMul(q, nn.Transpose(k, 1, 2)).Reshape(b, heads, t, t)
	}
	attn = nn.Add(attn, a.positionBias(g))
	if sh > 0 || sw > 0 {
		mask := g.Constant(shiftMask(ph, pw, ws, sh, sw), nh*nw, 1, t, t)
		attn = nn.Add(attn.Reshape(n, nh*nw, heads, t, t), mask).Reshape(b, heads, t, t)
	}
	attn = nn.Dropout(nn.Softmax(attn), a.attnDropout)
	out := nn.MatMul(attn.Reshape(b*heads, t, t), v) // [B·heads T D]
	out = nn.Permute(out.Reshape(b, heads, t, d), 0, 2, 1, 3).Reshape(b, t, c)
	out = nn.Dropout(a.Proj.Forward(out), a.dropout)

	out = nn.Permute(out.Reshape(n, nh, nw, ws, ws, c), 0, 1, 3, 2, 4, 5).Reshape(n, ph, pw, c)
	out = roll(roll(out, 1, sh), 2, sw)
	if ph != h {
		out = nn.Narrow(out, 1, 0, h)
	}
	if pw != w {
		out = nn.Narrow(out, 2, 0, w)
	}
	return out
}

// positionBias is the bias [heads T T] that attention adds for each pair of a window's tokens:
// the table's row for their relative position (torchvision's gather by relative_position_index).
// The gather is two products with a constant one-hot [w², 2w−1] matrix, once along each axis of
// the relative position (one product over all T² pairs would take a constant of T²·(2w−1)²
// values), so its gradient is MatMul's.
func (a *ShiftedWindowAttention) positionBias(g *nn.Graph) *nn.Tensor {
	ws, heads := a.window, a.heads
	m := 2*ws - 1
	var table *nn.Tensor
	if a.LogitScale != nil {
		table = nn.Scale(nn.Sigmoid(a.CpbMLP.Forward(g.Constant(coordsTable(ws), m*m, 2))), 16)
	} else {
		table = a.RelativePositionBiasTable
	}
	sel := make([]float32, ws*ws*m) // row i·w+j: 1 at i−j+w−1
	for i := range ws {
		for j := range ws {
			sel[(i*ws+j)*m+i-j+ws-1] = 1
		}
	}
	one := g.Constant(sel, ws*ws, m)
	u := nn.MatMul(one, table.Reshape(m, m*heads))                                  // [(hi hj) (Δw head)]
	u = nn.Permute(u.Reshape(ws, ws, m, heads), 2, 0, 1, 3).Reshape(m, ws*ws*heads) // [Δw (hi hj head)]
	v := nn.MatMul(one, u)                                                          // [(wi wj) (hi hj head)]
	return nn.Permute(v.Reshape(ws, ws, ws, ws, heads), 4, 2, 0, 3, 1).Reshape(heads, ws*ws, ws*ws)
}

// coordsTable is V2's relative_coords_table [(2w−1)² 2]: each relative position (Δh, Δw) scaled
// to [−8, 8] and mapped by sign(x)·log2(|x|+1)/3.
func coordsTable(ws int) []float32 {
	m := 2*ws - 1
	out := make([]float32, 0, 2*m*m)
	f := func(r int) float32 {
		x := float32(r) / float32(ws-1) * 8
		y := float32(math.Log2(math.Abs(float64(x))+1)) / 3
		if x < 0 {
			return -y
		}
		return y
	}
	for i := range m {
		for j := range m {
			out = append(out, f(i-ws+1), f(j-ws+1))
		}
	}
	return out
}

// shiftMask is the mask [windows T T] of a shifted pass over a padded map of ph×pw: 0 between
// tokens of one region of the rolled map, −100 across regions. The regions are torchvision's:
// along each side [0, L−w), [L−w, L−s), [L−s, L). A side is unshifted only where one window
// covers it (L = w): one region, as torchvision's.
func shiftMask(ph, pw, ws, sh, sw int) []float32 {
	region := func(l, s int) []int {
		r := make([]int, l)
		for i := range r {
			switch {
			case i >= l-s:
				r[i] = 2
			case i >= l-ws:
				r[i] = 1
			}
		}
		return r
	}
	rh, rw := region(ph, sh), region(pw, sw)
	nh, nw, t := ph/ws, pw/ws, ws*ws
	label := make([]int, t)
	out := make([]float32, 0, nh*nw*t*t)
	for wh := range nh {
		for ww := range nw {
			for i := range ws {
				for j := range ws {
					label[i*ws+j] = 3*rh[wh*ws+i] + rw[ww*ws+j]
				}
			}
			for _, li := range label {
				for _, lj := range label {
					if li == lj {
						out = append(out, 0)
					} else {
						out = append(out, -100)
					}
				}
			}
		}
	}
	return out
}

// normalize is torch.nn.functional.normalize over the last dimension: x/‖x‖, with ‖x‖² kept
// above 1e-24 where torch keeps ‖x‖ above 1e-12 (the same for any x not all but zero).
func normalize(x *nn.Tensor) *nn.Tensor {
	return nn.Mul(x, nn.Rsqrt(nn.AddScalar(nn.Sum(nn.Mul(x, x), []int{-1}, true), 1e-24)))
}

// padTo pads dimension dim of x with zeros at the end to a multiple of k (F.pad).
func padTo(x *nn.Tensor, dim, k int) *nn.Tensor {
	l := x.Dim(dim)
	if l%k == 0 {
		return x
	}
	shape := x.Shape()
	shape[dim] = k - l%k
	return nn.Concat(dim, x, x.Graph().Full(0, shape...))
}

// roll is torch.roll of x by s (−L < s < L) along dim: element i moves to i+s, modulo L.
func roll(x *nn.Tensor, dim, s int) *nn.Tensor {
	l := x.Dim(dim)
	k := (s%l + l) % l
	if k == 0 {
		return x
	}
	return nn.Concat(dim, nn.Narrow(x, dim, l-k, k), nn.Narrow(x, dim, 0, l-k))
}

// swinBuilder builds name from base (its named configuration; zero sizes for swin and swin_v2).
func swinBuilder(name string, base SwinConfig) Builder {
	return func(s string, in Shape, classes int) (*Model, error) {
		cfg := base
		var args []*arg
		if base.EmbedDim == 0 {
			cfg.MLPRatio, cfg.StochasticDepthProb = 4, 0.1 // SwinTransformer's defaults
			args = append(args, &arg{name: "patch_size", i: &cfg.PatchSize, required: true}, &arg{name: "embed_dim", i: &cfg.EmbedDim, required: true})
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("depth_%d", i+1), i: &cfg.Depths[i], required: true})
			}
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("num_heads_%d", i+1), i: &cfg.NumHeads[i], required: true})
			}
			args = append(args, &arg{name: "window_size", i: &cfg.WindowSize, required: true}, &arg{name: "mlp_ratio", f: &cfg.MLPRatio, hi: 64},
				&arg{name: "dropout", f: &cfg.Dropout}, &arg{name: "attention_dropout", f: &cfg.AttentionDropout})
		}
		args = append(args, &arg{name: "stochastic_depth_prob", f: &cfg.StochasticDepthProb})
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		if in.H < cfg.PatchSize || in.W < cfg.PatchSize {
			return nil, fmt.Errorf("the images are %dx%d; want at least patch_size %d on each side", in.H, in.W, cfg.PatchSize)
		}
		name := spec(name, args)
		m, err := NewSwin(cfg, in.C, classes, name)
		if err != nil {
			return nil, err
		}
		return &Model{Name: name, Module: m}, nil
	}
}

func init() {
	type stages = [4]int
	for _, c := range []struct {
		name string
		cfg  SwinConfig
	}{
		{"swin", SwinConfig{}},
		{"swin_v2", SwinConfig{V2: true}},
		{"swin_t", SwinConfig{4, 96, 7, stages{2, 2, 6, 2}, stages{3, 6, 12, 24}, 4, 0, 0, 0.2, false}},
		{"swin_s", SwinConfig{4, 96, 7, stages{2, 2, 18, 2}, stages{3, 6, 12, 24}, 4, 0, 0, 0.3, false}},
		{"swin_b", SwinConfig{4, 128, 7, stages{2, 2, 18, 2}, stages{4, 8, 16, 32}, 4, 0, 0, 0.5, false}},
		{"swin_v2_t", SwinConfig{4, 96, 8, stages{2, 2, 6, 2}, stages{3, 6, 12, 24}, 4, 0, 0, 0.2, true}},
		{"swin_v2_s", SwinConfig{4, 96, 8, stages{2, 2, 18, 2}, stages{3, 6, 12, 24}, 4, 0, 0, 0.3, true}},
		{"swin_v2_b", SwinConfig{4, 128, 8, stages{2, 2, 18, 2}, stages{4, 8, 16, 32}, 4, 0, 0, 0.5, true}},
	} {
		if err := Register(c.name, swinBuilder(c.name, c.cfg)); err != nil {
			panic(err)
		}
	}
}
