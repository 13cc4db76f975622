package train

import "fmt"

// netBuilder collects a model's layers and, for each parameterized layer in order, the name its
// tensors get (torchvision's module path: "conv1", "layer1.0.bn2", "fc").
type netBuilder struct {
	layers []Layer
	names  []string
}

func (b *netBuilder) add(name string, l Layer) {
	b.layers = append(b.layers, l)
	if name != "" {
		b.names = append(b.names, name)
	}
}

// convBN appends to main the layers of conv k×k (no bias) then BatchNorm, with their names.
func convBN(main *[]Layer, names *[]string, prefix string, i, inC, outC, k, stride int) {
	*main = append(*main, Conv2D(inC, outC, k, k/2, Stride(stride), NoBias()), BatchNorm2D(outC))
	*names = append(*names, fmt.Sprintf("%sconv%d", prefix, i), fmt.Sprintf("%sbn%d", prefix, i))
}

// block appends a residual block and its closing ReLU: torchvision's BasicBlock (two 3x3
// convolutions) or Bottleneck (1x1, 3x3 with the stride, 1x1 to 4x the width), with a 1x1
// convolution and BatchNorm as the shortcut when the shape changes. It returns the output
// channels.
func (b *netBuilder) block(name string, inC, width, stride int, bottleneck bool) int {
	var main []Layer
	p := name + "."
	outC := width
	if bottleneck {
		outC = 4 * width
		convBN(&main, &b.names, p, 1, inC, width, 1, 1)
		main = append(main, ReLU())
		convBN(&main, &b.names, p, 2, width, width, 3, stride)
		main = append(main, ReLU())
		convBN(&main, &b.names, p, 3, width, outC, 1, 1)
	} else {
		convBN(&main, &b.names, p, 1, inC, width, 3, stride)
		main = append(main, ReLU())
		convBN(&main, &b.names, p, 2, width, width, 3, 1)
	}
	var short []Layer
	if stride != 1 || inC != outC {
		short = []Layer{Conv2D(inC, outC, 1, 0, Stride(stride), NoBias()), BatchNorm2D(outC)}
		b.names = append(b.names, p+"downsample.0", p+"downsample.1")
	}
	b.layers = append(b.layers, Residual(main, short), ReLU())
	return outC
}

// stem appends conv1 - bn1 - relu.
func (b *netBuilder) stem(inC, outC, k, stride int) {
	b.add("conv1", Conv2D(inC, outC, k, k/2, Stride(stride), NoBias()))
	b.add("bn1", BatchNorm2D(outC))
	b.add("", ReLU())
}

// head appends global average pooling and the linear classifier "fc".
func (b *netBuilder) head(inC, classes int) {
	b.add("", GlobalAvgPool())
	b.add("fc", Linear(inC, classes))
}

// model builds the Sequential model and renames its tensors after the builder's layer names.
func (b *netBuilder) model(name string, in Shape, classes int) (*Model, error) {
	m, err := Sequential(name, in, classes, b.layers...)
	if err != nil {
		return nil, err
	}
	return m, m.rename(b.names)
}

// rename gives the tensors of the i-th parameterized layer (in parameter order) the name
// names[i] + "." + their own last component ("weight", "running_var").
func (m *Model) rename(names []string) error {
	idx := map[string]int{}
	all := make([]*Param, 0, len(m.params)+len(m.buffers))
	for _, ps := range m.layerParams {
		all = append(all, ps...)
	}
	for _, p := range all {
		prefix, _ := splitLast(p.Name)
		if _, ok := idx[prefix]; !ok {
			idx[prefix] = len(idx)
		}
	}
	if len(idx) != len(names) {
		return fmt.Errorf("train: %w: %s: %d parameterized layers, %d names", ErrModel, m.name, len(idx), len(names))
	}
	for _, p := range all {
		prefix, last := splitLast(p.Name)
		p.Name = names[idx[prefix]] + "." + last
	}
	return nil
}

func splitLast(name string) (prefix, last string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	return "", name
}

// stages appends the residual stages "layer1", "layer2", ...: blocks[i] blocks of widths[i], the
// first block of every stage after the first with stride 2. It returns the output channels.
func (b *netBuilder) stages(c int, widths, blocks []int, bottleneck bool) int {
	for stage, width := range widths {
		for i := range blocks[stage] {
			stride := 1
			if i == 0 && stage > 0 {
				stride = 2
			}
			c = b.block(fmt.Sprintf("layer%d.%d", stage+1, i), c, width, stride, bottleneck)
		}
	}
	return c
}

// cifarResNet is He et al.'s CIFAR ResNet with n basic blocks per stage (depth 6n+2).
func cifarResNet(name string, in Shape, classes, n int) (*Model, error) {
	var b netBuilder
	b.stem(in.C, 16, 3, 1)
	b.head(b.stages(16, []int{16, 32, 64}, []int{n, n, n}, false), classes)
	return b.model(name, in, classes)
}

// torchResNet is torchvision's ResNet with the given blocks per stage; images of at most 32 px a
// side get a 3x3 stride-1 stem without max pooling.
func torchResNet(name string, in Shape, classes int, bottleneck bool, blocks []int) (*Model, error) {
	var b netBuilder
	if in.H <= 32 && in.W <= 32 {
		b.stem(in.C, 64, 3, 1)
	} else {
		b.stem(in.C, 64, 7, 2)
		b.add("", maxPool2D(3, 2, 1))
	}
	b.head(b.stages(64, []int{64, 128, 256, 512}, blocks, bottleneck), classes)
	return b.model(name, in, classes)
}
