package train

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// A checkpoint names its model by Model.String: "NAME CxHxW->K: layer - layer - ...", each layer
// as its String describes it (a Residual block as "residual(main | shortcut)"). parseModel builds
// a Sequential model back from that description, so that CheckpointModel takes a model built by
// hand from the package's layers as well as one of NewModel's.

// Bounds on a described model, so that a corrupt or hostile description cannot ask for a model
// that exhausts memory before its weights are compared with the checkpoint's tensors.
const (
	maxArchDepth = 16      // nested Residual blocks
	maxArchSide  = 1 << 15 // an input side, a channel or feature count
	maxArchInput = 1 << 24 // values of one input image (3x2364x2364)
)

var archHead = regexp.MustCompile(`^(.+?) (\d+)x(\d+)x(\d+)->(\d+): (.*)$`)

// parseModel builds the model whose String is desc from the package's layers. A layer it does not
// know is named in the error.
func parseModel(desc string) (*Model, error) {
	mm := archHead.FindStringSubmatch(desc)
	if mm == nil {
		return nil, fmt.Errorf("model %q is not a model description (NAME CxHxW->CLASSES: layers)", desc)
	}
	var dims [4]int
	for i := range dims {
		v, err := strconv.Atoi(mm[2+i])
		if err != nil || v < 1 || v > maxArchSide {
			return nil, fmt.Errorf("model %q: size %q out of range (1 to %d)", desc, mm[2+i], maxArchSide)
		}
		dims[i] = v
	}
	in := Shape{C: dims[0], H: dims[1], W: dims[2]}
	if in.Len() > maxArchInput {
		return nil, fmt.Errorf("model %q: input %v of more than %d values", desc, in, maxArchInput)
	}
	layers, err := parseLayers(mm[6], 0)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", mm[1], err)
	}
	m, err := Sequential(mm[1], in, dims[3], layers...)
	if err != nil {
		return nil, err
	}
	if m.String() != desc {
		return nil, fmt.Errorf("model %q: rebuilt as %q", desc, m.String())
	}
	return m, nil
}

// splitTop splits s at sep where no parenthesis is open.
func splitTop(s, sep string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '(':
			depth++
		case s[i] == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced parentheses in %q", s)
			}
		case depth == 0 && strings.HasPrefix(s[i:], sep):
			parts = append(parts, s[start:i])
			start = i + len(sep)
			i += len(sep) - 1
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses in %q", s)
	}
	return append(parts, s[start:]), nil
}

func parseLayers(s string, depth int) ([]Layer, error) {
	if depth > maxArchDepth {
		return nil, fmt.Errorf("residual blocks nested deeper than %d", maxArchDepth)
	}
	parts, err := splitTop(s, " - ")
	if err != nil {
		return nil, err
	}
	layers := make([]Layer, 0, len(parts))
	for _, p := range parts {
		l, err := parseLayer(p, depth)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	return layers, nil
}

// archInt parses a size in [lo, maxArchSide].
func archInt(s string, lo int) (int, bool) {
	v, err := strconv.Atoi(s)
	return v, err == nil && v >= lo && v <= maxArchSide
}

func parseLayer(s string, depth int) (Layer, error) {
	if inner, ok := strings.CutPrefix(s, "residual("); ok && strings.HasSuffix(inner, ")") {
		paths, err := splitTop(inner[:len(inner)-1], " | ")
		if err != nil || len(paths) > 2 {
			return nil, fmt.Errorf("layer %q: not a residual block", s)
		}
		main, err := parseLayers(paths[0], depth+1)
		if err != nil {
			return nil, err
		}
		var short []Layer
		if len(paths) == 2 {
			if short, err = parseLayers(paths[1], depth+1); err != nil {
				return nil, err
			}
		}
		return Residual(main, short), nil
	}
	if l, ok, err := registered(s); ok {
		return l, err
	}
	f := strings.Fields(s)
	bad := fmt.Errorf("layer %q is not one of the package's layers nor registered (a layer of your own: RegisterLayer its kind, "+
		"or build the model again and load the checkpoint with New(m, dev, nil, Config{Resume: path}))", s)
	if len(f) == 0 {
		return nil, bad
	}
	io := func(t string) (int, int, bool) {
		a, b, ok := strings.Cut(t, "->")
		x, ok1 := archInt(a, 1)
		y, ok2 := archInt(b, 1)
		return x, y, ok && ok1 && ok2
	}
	square := func(t string) (int, bool) {
		a, b, ok := strings.Cut(t, "x")
		x, ok1 := archInt(a, 1)
		return x, ok && ok1 && a == b
	}
	var l Layer
	switch {
	case len(f) == 1 && f[0] == "relu":
		l = ReLU()
	case len(f) == 1 && f[0] == "flatten":
		l = Flatten()
	case len(f) == 1 && f[0] == "avgpool":
		l = GlobalAvgPool()
	case len(f) == 2 && f[0] == "linear":
		in, out, ok := io(f[1])
		if !ok {
			return nil, bad
		}
		l = Linear(in, out)
	case len(f) == 2 && f[0] == "batchnorm":
		c, ok := archInt(f[1], 1)
		if !ok {
			return nil, bad
		}
		l = BatchNorm2D(c)
	case len(f) == 2 && f[0] == "dropout":
		p, err := strconv.ParseFloat(f[1], 32)
		if err != nil || math.IsNaN(p) {
			return nil, bad
		}
		l = Dropout(float32(p))
	case f[0] == "maxpool" && (len(f) == 2 || len(f) == 6 && f[2] == "stride" && f[4] == "pad"):
		k, ok := square(f[1])
		if !ok {
			return nil, bad
		}
		stride, pad := k, 0
		if len(f) == 6 {
			var ok1, ok2 bool
			stride, ok1 = archInt(f[3], 1)
			pad, ok2 = archInt(f[5], 0)
			if !ok1 || !ok2 {
				return nil, bad
			}
		}
		l = maxPool2D(k, stride, pad)
	case f[0] == "conv2d" && len(f) >= 5 && f[3] == "pad":
		in, out, ok := io(f[1])
		k, ok1 := square(f[2])
		pad, ok2 := archInt(f[4], 0)
		if !ok || !ok1 || !ok2 {
			return nil, bad
		}
		var opts []ConvOption
		rest := f[5:]
		if len(rest) >= 2 && rest[0] == "stride" {
			st, ok := archInt(rest[1], 1)
			if !ok {
				return nil, bad
			}
			opts, rest = append(opts, Stride(st)), rest[2:]
		}
		if len(rest) == 2 && rest[0] == "no" && rest[1] == "bias" {
			opts, rest = append(opts, NoBias()), nil
		}
		if len(rest) != 0 {
			return nil, bad
		}
		l = Conv2D(in, out, k, pad, opts...)
	default:
		return nil, bad
	}
	if l.String() != s {
		return nil, bad
	}
	return l, nil
}
