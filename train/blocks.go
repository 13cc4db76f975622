package train

import (
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/kernels"
)

// ---- BatchNorm2D ----

type batchNorm struct {
	c                 int
	g                 kernels.BatchNorm // per-sample geometry (N is set per pass)
	w, b, mean, vr    *Param
	saveMean, saveInv kernels.F32
	x, y, dx          kernels.F32
	momentum, eps     float32
	frozen            bool // evaluation mode in training too (a frozen layer: FrozenBatchNorm2d)
	// sync, set in a data-parallel run with Config.SyncBatchNorm, holds the statistics gathered
	// from every rank (world records of BatchNormStats) and the backward pass's summed sums.
	sync *bnSync
}

type bnSync struct{ gather, sums kernels.F32 }

// BatchNorm2D normalizes each of c channels of [C H W] inputs as PyTorch's nn.BatchNorm2d(c):
// while training, with the batch's mean and variance over samples and pixels, moving running
// estimates with momentum 0.1; in evaluation, with the running estimates; then scales and shifts
// by a learned weight (initially 1) and bias (initially 0), which get no weight decay. The
// running statistics are checkpointed and exported with the weights.
func BatchNorm2D(c int) Layer { return &batchNorm{c: c, momentum: 0.1, eps: 1e-5} }

func (l *batchNorm) String() string { return fmt.Sprintf("batchnorm %d", l.c) }

func (l *batchNorm) setup(in []int) ([]int, error) {
	if len(in) != 3 || in[0] != l.c || l.c <= 0 {
		return nil, fmt.Errorf("train: %v: input shape %v; want [%d H W]", l, in, l.c)
	}
	l.g = kernels.BatchNorm{N: 1, C: l.c, HW: in[1] * in[2], Momentum: l.momentum, Eps: l.eps}
	return in, nil
}

func (l *batchNorm) newParams(prefix string) []*Param {
	sh := []int{l.c}
	l.w = &Param{Name: prefix + ".weight", Shape: sh, kind: kindScale}
	l.b = &Param{Name: prefix + ".bias", Shape: sh, kind: kindBias}
	l.mean = &Param{Name: prefix + ".running_mean", Shape: sh, kind: kindBuffer0}
	l.vr = &Param{Name: prefix + ".running_var", Shape: sh, kind: kindBuffer1}
	return []*Param{l.w, l.b, l.mean, l.vr}
}

func (l *batchNorm) geom(n int) kernels.BatchNorm { g := l.g; g.N = n; return g }

func (l *batchNorm) reserve(a *arena, n int) (err error) {
	g := l.geom(n)
	if l.y, err = a.f32(g.Len()); err != nil {
		return err
	}
	if l.dx, err = a.f32(g.Len()); err != nil {
		return err
	}
	if l.saveMean, err = a.f32(l.c); err != nil {
		return err
	}
	l.saveInv, err = a.f32(l.c)
	return err
}

func (l *batchNorm) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	g := l.geom(n)
	l.x = x
	y := l.y.Slice(0, g.Len())
	if !r.train || l.frozen {
		return y, r.ops.BatchNormEval(r.s, y, x, l.w.W, l.b.W, l.mean.W, l.vr.W, g)
	}
	if l.sync == nil || r.sync == nil {
		return y, r.ops.BatchNormTrain(r.s, y, x, l.w.W, l.b.W, l.mean.W, l.vr.W, l.saveMean, l.saveInv, g)
	}
	// SyncBatchNorm: every rank writes its record in its own place of the gather buffer (zeros
	// elsewhere), and the sum over the ranks is every rank's records, which each rank combines in
	// rank order: the same statistics, bit for bit, on every rank.
	rec := 2*l.c + 1
	if err := r.ops.Fill(r.s, l.sync.gather, 0); err != nil {
		return y, err
	}
	if err := r.ops.BatchNormStats(r.s, l.sync.gather.Slice(r.sync.rank*rec, (r.sync.rank+1)*rec), x, g); err != nil {
		return y, err
	}
	if err := r.sync.sum(l.sync.gather); err != nil {
		return y, fmt.Errorf("sync batch norm statistics: %w", err)
	}
	return y, r.ops.BatchNormTrainStats(r.s, y, x, l.w.W, l.b.W, l.mean.W, l.vr.W, l.saveMean, l.saveInv, l.sync.gather, g)
}

func (l *batchNorm) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	g := l.geom(n)
	var dx kernels.F32
	if needDx {
		dx = l.dx.Slice(0, g.Len())
	}
	if l.sync == nil || r.sync == nil || !needDx {
		return dx, r.ops.BatchNormBackward(r.s, dx, l.w.G, l.b.G, dy, l.x, l.w.W, l.saveMean, l.saveInv, g)
	}
	// SyncBatchNorm: the weight and bias gradients stay this rank's (DDP averages them as any
	// other), and their sums over every rank, with the total count, give dx.
	if err := r.ops.BatchNormBackward(r.s, kernels.F32{}, l.w.G, l.b.G, dy, l.x, l.w.W, l.saveMean, l.saveInv, g); err != nil {
		return dx, err
	}
	c := l.c
	if err := r.ops.Copy(r.s, l.sync.sums.Slice(0, c), l.w.G); err != nil {
		return dx, err
	}
	if err := r.ops.Copy(r.s, l.sync.sums.Slice(c, 2*c), l.b.G); err != nil {
		return dx, err
	}
	if err := r.ops.Fill(r.s, l.sync.sums.Slice(2*c, 2*c+1), float32(g.N*g.HW)); err != nil {
		return dx, err
	}
	if err := r.sync.sum(l.sync.sums); err != nil {
		return dx, fmt.Errorf("sync batch norm gradient sums: %w", err)
	}
	return dx, r.ops.BatchNormBackwardInput(r.s, dx, dy, l.x, l.w.W, l.saveMean, l.saveInv, l.sync.sums, g)
}

// ---- GlobalAvgPool ----

type globalAvgPool struct {
	c, hw int
	y, dx kernels.F32
}

// GlobalAvgPool averages each channel of a [C H W] input over its pixels, giving [C] per sample
// (PyTorch's AdaptiveAvgPool2d(1) followed by flatten).
func GlobalAvgPool() Layer { return &globalAvgPool{} }

func (l *globalAvgPool) String() string { return "avgpool" }

func (l *globalAvgPool) setup(in []int) ([]int, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("train: %v: input shape %v; want [C H W]", l, in)
	}
	l.c, l.hw = in[0], in[1]*in[2]
	return []int{l.c}, nil
}

func (l *globalAvgPool) newParams(string) []*Param { return nil }

func (l *globalAvgPool) reserve(a *arena, n int) (err error) {
	if l.y, err = a.f32(n * l.c); err != nil {
		return err
	}
	l.dx, err = a.f32(n * l.c * l.hw)
	return err
}

func (l *globalAvgPool) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	y := l.y.Slice(0, n*l.c)
	return y, r.ops.GlobalAvgPool(r.s, y, x, l.hw)
}

func (l *globalAvgPool) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	if !needDx {
		return kernels.F32{}, nil
	}
	dx := l.dx.Slice(0, n*l.c*l.hw)
	return dx, r.ops.GlobalAvgPoolBackward(r.s, dx, dy, l.hw)
}

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
