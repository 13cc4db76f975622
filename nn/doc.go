// Package nn is Stoke's differentiable core: float32 tensors on a gpu.Device, ops whose forward
// pass and vector-Jacobian product (VJP) are written once, side by side, reverse-mode
// differentiation over the graph a forward pass records, and modules as PyTorch users know them.
//
// A layer made of existing ops is a Go type with a Forward and no backward:
//
//	type SE struct{ FC1, FC2 *nn.LinearLayer }
//
//	func (m *SE) Forward(x *nn.Tensor) *nn.Tensor {
//		s := nn.Mean(x, []int{2, 3}, true) // [N C 1 1]
//		s = nn.Sigmoid(m.FC2.Forward(nn.ReLU(m.FC1.Forward(s.Reshape(s.Dim(0), s.Dim(1))))))
//		return nn.Mul(x, s.Reshape(s.Dim(0), s.Dim(1), 1, 1))
//	}
//
// # Tensors and graphs
//
// A Tensor is a shape and a packed row-major view of device memory. Tensors made by ops belong
// to the Graph of their inputs; a Graph records each op's inputs, output and VJP as the forward
// pass runs, and Backward walks the record in reverse, summing the gradients of a tensor used
// twice and reducing the gradient of a broadcast operand (PyTorch's rules: trailing dimensions
// aligned, size-1 dimensions stretched) to its shape. Reshape, and Narrow along the first
// dimension, are views of their input's memory; Permute, Narrow along another dimension and
// Concat copy.
//
// Ops never return an error and never panic: the first failure (a shape mismatch, a size that is
// negative or too large, a kernel's refusal, operands of two graphs) is kept by the graph, later
// ops on it do nothing, and Graph.Err reports it, as bufio.Scanner does; it wraps ErrShape,
// ErrArgument or ErrGraph. Check it once after the forward pass and once after Backward. A
// tensor an op failed to make has no shape (Dim of it is 0), so code that computes the next
// shape from it runs on without a panic. FuzzOps drives every op with random shapes to hold this.
//
// Fused ops stay first-class: Conv2d, BatchNorm, LayerNorm, Softmax, ScaledDotProductAttention,
// CrossEntropy and the activations run one kernel of the kernels op set forward and one backward;
// the others are compositions.
//
// # Modules
//
// A Module is anything with Forward(*Tensor) *Tensor. Its parameters and buffers are found by
// walking its exported fields (PyTorch registers them by attribute): a *Tensor made by Param or
// Buffer, a Module, or a slice of Modules (named by index), depth first in field order. A field's
// name is its Go name in snake case ("RunningMean" is "running_mean", "Layer1" is "layer1"), or
// its `nn:"name"` tag; the tag `nn:"-"` hides a field, and an embedded module's tensors are named as
// the embedder's own (a Python subclass's). So the dotted names of StateDict are
// torchvision's for a tree of torchvision's shape: "layer1.0.conv1.weight".
//
// A tensor starts as its Init says (a weight, zeros, ones, an embedding), or drawn from the
// distribution SetDist gives it: torch.nn.init's fills, Const, Normal, TruncNormal and Uniform. A
// model's constructor sets them as torchvision's do, over the modules Apply visits.
//
// # Ownership
//
// A Graph owns the memory of the tensors its ops make: it reuses that memory after Reset, so a
// tensor of a graph is valid until the graph's next Reset. Memory is handed out from a pool keyed
// by size: a step whose shapes repeat the previous step's allocates no device memory. The Tensor
// values themselves, their shapes and the record are reused after Reset too, so such a step
// allocates little Go memory either (one VJP closure per op). The memory of parameters and
// buffers belongs to whoever binds them (Bind, or a train.Trainer through train.Graph); a Graph
// only reads them and writes their gradients.
//
// # Concurrency
//
// A Graph and the tensors of it are used by one goroutine. Ops enqueue kernels on the graph's
// stream and do not wait: reading a tensor (Tensor.Host) synchronizes the stream.
//
// # Inference
//
// Graph.Freeze makes a graph's evaluation passes an inference engine's: parameters and buffers
// are taken as constants (as torch.jit.freeze takes them), so each convolution's and linear
// layer's weights are prepared once for the op set (transformed and packed on the CPU) and batch
// norms are folded into the convolutions before them (ConvBatchNorm), kept across Reset until
// Thaw or a training pass. The trainer's evaluation passes, and so prediction, run frozen.
//
// # Determinism
//
// Every op is bit-for-bit repeatable on one backend; Backward visits the record in a fixed
// order and sums gradients in it; Dropout's masks are a function of the graph's seed and the
// op's place in the pass.
package nn
