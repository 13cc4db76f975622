package train

import (
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/kernels"
)

// ---- Residual ----

type residual struct {
	main, shortcut []Layer
	per, inPer     int // output and input elements per sample
	y, dx          kernels.F32
}

// Residual is a block with a skip connection: y = main(x) + shortcut(x), where main and shortcut
// are layers applied in order and an empty shortcut is the identity. Both paths must give the
// same shape. A block is a Layer, so blocks chain in Sequential like any other layer; a ResNet's
// basic block is
//
//	Residual([]Layer{Conv2D(c, c, 3, 1, NoBias()), BatchNorm2D(c), ReLU(), Conv2D(c, c, 3, 1, NoBias()), BatchNorm2D(c)}, nil),
//	ReLU(),
//
// The weights of the layers inside a block are He-initialized (they feed a ReLU, through
// BatchNorm and the addition).
func Residual(main, shortcut []Layer) Layer { return &residual{main: main, shortcut: shortcut} }

func (l *residual) String() string {
	name := func(ls []Layer) string {
		parts := make([]string, len(ls))
		for i, x := range ls {
			parts[i] = x.String()
		}
		return strings.Join(parts, " - ")
	}
	if len(l.shortcut) == 0 {
		return fmt.Sprintf("residual(%s)", name(l.main))
	}
	return fmt.Sprintf("residual(%s | %s)", name(l.main), name(l.shortcut))
}

func (l *residual) setup(in []int) ([]int, error) {
	if len(l.main) == 0 {
		return nil, fmt.Errorf("train: residual block with no layers")
	}
	path := func(ls []Layer) ([]int, error) {
		s := in
		for _, x := range ls {
			var err error
			if s, err = x.setup(s); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	out, err := path(l.main)
	if err != nil {
		return nil, err
	}
	short, err := path(l.shortcut)
	if err != nil {
		return nil, err
	}
	if fmt.Sprint(out) != fmt.Sprint(short) {
		return nil, fmt.Errorf("train: residual block: main path gives %v, shortcut %v", out, short)
	}
	l.per, l.inPer = prod(out), prod(in)
	return out, nil
}

func (l *residual) newParams(prefix string) []*Param {
	var ps []*Param
	for _, p := range []struct {
		name   string
		layers []Layer
	}{{"main", l.main}, {"shortcut", l.shortcut}} {
		for i, x := range p.layers {
			for _, q := range x.newParams(fmt.Sprintf("%s.%s.%d.%s", prefix, p.name, i, layerKind(x))) {
				if q.kind == kindWeight {
					q.he = true
				}
				ps = append(ps, q)
			}
		}
	}
	return ps
}

func (l *residual) reserve(a *arena, n int) (err error) {
	for _, x := range append(append([]Layer(nil), l.main...), l.shortcut...) {
		if err := x.reserve(a, n); err != nil {
			return err
		}
	}
	if l.y, err = a.f32(n * l.per); err != nil {
		return err
	}
	l.dx, err = a.f32(n * l.inPer)
	return err
}

func (l *residual) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	h, s := x, x
	var err error
	for _, m := range l.main {
		if h, err = m.forward(r, h, n); err != nil {
			return h, err
		}
	}
	for _, m := range l.shortcut {
		if s, err = m.forward(r, s, n); err != nil {
			return s, err
		}
	}
	y := l.y.Slice(0, n*l.per)
	return y, r.ops.Add(r.s, y, h, s)
}

// backward runs both paths back from dy (every inner layer but the first of each path needs its
// input gradient) and adds their input gradients when the block's own is needed.
func (l *residual) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	path := func(ls []Layer) (kernels.F32, error) {
		d := dy
		for i := len(ls) - 1; i >= 0; i-- {
			var err error
			if d, err = ls[i].backward(r, d, n, i > 0 || needDx); err != nil {
				return d, err
			}
		}
		return d, nil
	}
	dm, err := path(l.main)
	if err != nil {
		return dm, err
	}
	ds, err := path(l.shortcut)
	if err != nil || !needDx {
		return kernels.F32{}, err
	}
	dx := l.dx.Slice(0, n*l.inPer)
	return dx, r.ops.Add(r.s, dx, dm, ds)
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
