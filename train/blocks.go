package train

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/nn"
)

// Residual is a block with a skip connection: y = main(x) + shortcut(x), where main and shortcut
// are layers applied in order and an empty shortcut is the identity. Both paths must give the
// same shape. A block is a Layer, so blocks chain in Sequential like any other layer; a ResNet's
// basic block is
//
//	Residual([]Layer{Conv2D(c, c, 3, 1, NoBias()), BatchNorm2D(c), ReLU(), Conv2D(c, c, 3, 1, NoBias()), BatchNorm2D(c)}, nil),
//	ReLU(),
//
// The block is one module of package nn, whose backward pass the graph derives: its layers are
// the package's own, blocks, and modules of package nn (NN). A Module with a backward pass of
// its own (Custom) cannot sit inside a block (Setup says so); write the whole block as one.
// Its tensors are named by path and place ("3.residual.main.0.conv2d.weight"). The weights of
// the layers inside a block are He-initialized (they feed a ReLU, through BatchNorm and the
// addition).
func Residual(main, shortcut []Layer) Layer {
	check := func(in []int) error {
		if len(main) == 0 {
			return fmt.Errorf("train: residual block with no layers")
		}
		out, err := blockPath(main, "main", in)
		if err != nil {
			return err
		}
		short, err := blockPath(shortcut, "shortcut", in)
		if err != nil {
			return err
		}
		if !slices.Equal(out, short) {
			return fmt.Errorf("train: residual block: main path gives %v, shortcut %v", out, short)
		}
		return nil
	}
	b := residualBlock{Main: blockDict(main), Shortcut: blockDict(shortcut)}
	return Custom(NN(builtin{Module: b, desc: residualDesc(main, shortcut), check: check, block: true}))
}

// residualBlock is a Residual block as a module of package nn.
type residualBlock struct {
	Main, Shortcut nn.Dict
}

func (b residualBlock) Forward(x *nn.Tensor) *nn.Tensor {
	h, s := b.Main.Forward(x), x
	if len(b.Shortcut) > 0 {
		s = b.Shortcut.Forward(x)
	}
	return nn.Add(h, s)
}

// blockDict makes a block's path a Dict of its layers' modules, named by place and kind
// ("0.conv2d"); a layer that is not a module of package nn is left out (Setup refuses it).
func blockDict(layers []Layer) nn.Dict {
	d := make(nn.Dict, 0, len(layers))
	for i, l := range layers {
		if m, ok := nnOf(l); ok {
			d = append(d, nn.Entry{Name: fmt.Sprintf("%d.%s", i, layerKind(l)), Module: m})
		}
	}
	return d
}

// blockPath sets up one path of a block from the per-sample input shape in, and returns its
// output shape.
func blockPath(layers []Layer, path string, in []int) ([]int, error) {
	s := in
	for i, l := range layers {
		if _, ok := nnOf(l); !ok {
			return nil, fmt.Errorf("train: residual block: layer %s.%d %q has a backward pass of its own (Custom over Module); a block holds the package's layers and modules of package nn (NN)",
				path, i, l.String())
		}
		var err error
		if s, err = l.setup(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// nnOf is the module of package nn a layer runs (the package's own layers and blocks, and NN's).
func nnOf(l Layer) (NNModule, bool) {
	if n := nnLayer(l); n != nil {
		return n.m, true
	}
	return nil, false
}

// nnLayer is the layer's binding of a module of package nn; nil for a Module of one's own.
func nnLayer(l Layer) *nnModule {
	if c, ok := l.(*custom); ok {
		if n, ok := c.m.(*nnModule); ok {
			return n
		}
	}
	return nil
}

func residualDesc(main, shortcut []Layer) string {
	name := func(ls []Layer) string {
		parts := make([]string, len(ls))
		for i, x := range ls {
			parts[i] = x.String()
		}
		return strings.Join(parts, " - ")
	}
	if len(shortcut) == 0 {
		return fmt.Sprintf("residual(%s)", name(main))
	}
	return fmt.Sprintf("residual(%s | %s)", name(main), name(shortcut))
}

// layerKind is the first word of a layer's description ("conv2d", "residual"), used in parameter
// names.
func layerKind(l Layer) string {
	k := strings.Fields(l.String())[0]
	if i := strings.IndexByte(k, '('); i >= 0 {
		k = k[:i]
	}
	return k
}
