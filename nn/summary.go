package nn

import (
	"fmt"
	"strings"
)

// Summary is what torchinfo's summary() tells of a module: its layers with their output shapes,
// parameters and multiply-adds, and the totals, for one input shape. Summarize makes it.
type Summary struct {
	// Input is the input's shape, batch first.
	Input []int
	// Layers are the ops that read a parameter (named after the parameter's module: "conv1",
	// "layer1.0.bn2") and the matrix products and attentions between activations (named after
	// the op, "matmul"), in the order the forward pass runs them.
	Layers []LayerSummary
	// Params is the number of values of the module's parameters, Trainable those of the trained
	// ones (not buffers), Buffers those of its buffers (running statistics).
	Params, Trainable, Buffers int64
	// MACs is the multiply-adds of a forward pass of the input: of the convolutions, linear
	// layers, matrix products and attentions (the elementwise ops, norms and poolings are not
	// counted, as torchinfo and fvcore do not).
	MACs int64
	// Activations is the number of values a training pass keeps for its backward pass (see
	// Activations; the float32 bytes are 4 times as many).
	Activations int64
}

// LayerSummary is one row of a Summary.
type LayerSummary struct {
	Name   string
	Op     string
	Output []int
	// Params counts the values of the parameters and buffers this op is the first to read.
	Params int64
	MACs   int64
}

// Summarize traces m's forward pass in evaluation mode on an input of the given shape (batch
// first), without memory or kernels (Trace), and sums up its layers.
func Summarize(m Module, shape ...int) (*Summary, error) {
	named, err := StateDict(m)
	if err != nil {
		return nil, err
	}
	steps, _, _, err := Trace(m, shape...)
	if err != nil {
		return nil, err
	}
	s := &Summary{Input: append([]int(nil), shape...)}
	if s.Activations, _, err = Activations(m, shape...); err != nil {
		return nil, err
	}
	name := map[*Tensor]string{}
	for _, n := range named {
		name[n.Tensor] = n.Name
		if n.Tensor.Trained() {
			s.Trainable += int64(n.Tensor.Len())
		} else {
			s.Buffers += int64(n.Tensor.Len())
		}
	}
	s.Params = s.Trainable + s.Buffers
	counted := map[*Tensor]bool{}
	for _, st := range steps {
		row := LayerSummary{Op: string(st.Op), Output: st.Out.Shape(), MACs: macs(st)}
		for _, in := range st.In {
			n, ok := name[in]
			if !ok {
				continue
			}
			if row.Name == "" { // the module of the op's first parameter: "fc" of "fc.weight"
				row.Name = n
				if i := strings.LastIndexByte(n, '.'); i > 0 {
					row.Name = n[:i]
				}
			}
			if !counted[in] {
				counted[in] = true
				row.Params += int64(in.Len())
			}
		}
		s.MACs += row.MACs
		if row.Name == "" && row.MACs == 0 {
			continue // an elementwise op, a view, a pooling: in the totals only
		}
		if row.Name == "" {
			row.Name = string(st.Op)
		}
		s.Layers = append(s.Layers, row)
	}
	return s, nil
}

// macs is the multiply-adds of a step: a convolution's or linear layer's, a matrix product's or
// an attention's (its two products); 0 for the others.
func macs(st Step) int64 {
	out := int64(st.Out.Len())
	switch st.Op {
	case OpConv2D: // weight [out, in/groups, kh, kw]: each output value sums in/groups*kh*kw products
		w := st.In[1]
		return out * int64(w.Dim(1)*w.Dim(2)*w.Dim(3))
	case OpLinear: // weight [out, in]
		return out * int64(st.In[1].Dim(1))
	case OpMatMul: // [..., M, K] x [..., K, N]
		a := st.In[0]
		return out * int64(a.Dim(a.Rank()-1))
	case OpScaledDotProductAttention: // q [..., Lq, D], k [..., Lk, D]: scores and their average
		q, k := st.In[0], st.In[1]
		return 2 * int64(q.Len()) * int64(k.Dim(k.Rank()-2))
	}
	return 0
}

// String is the summary as torchinfo prints it: a row per layer, then the totals.
func (s *Summary) String() string {
	var b strings.Builder
	width := len("Layer (op)")
	for _, l := range s.Layers {
		width = max(width, len(l.Name)+len(l.Op)+3)
	}
	fmt.Fprintf(&b, "%-*s  %-22s %12s %16s\n", width, "Layer (op)", "Output shape", "Params", "Mult-adds")
	for _, l := range s.Layers {
		fmt.Fprintf(&b, "%-*s  %-22s %12s %16s\n", width, l.Name+" ("+l.Op+")", fmt.Sprint(l.Output), group(l.Params), group(l.MACs))
	}
	fmt.Fprintf(&b, "Total params: %s (trainable %s, buffers %s)\n", group(s.Params), group(s.Trainable), group(s.Buffers))
	fmt.Fprintf(&b, "Mult-adds: %s (%.2f G) for input %v\n", group(s.MACs), float64(s.MACs)/1e9, s.Input)
	fmt.Fprintf(&b, "Memory (float32): params %.2f MB, activations kept for backward at most %.2f MB\n",
		float64(4*s.Params)/1e6, float64(4*s.Activations)/1e6)
	return b.String()
}

// group writes n with thousands separators: 11,689,512.
func group(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
