package cli

import (
	"flag"

	"github.com/stoke-ml/stoke/transforms"
)

// decodeFlag is --decode: a transforms.DecodeMode by name (fast, exact or device).
type decodeFlag struct{ m *transforms.DecodeMode }

func (f decodeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return f.m.String()
}

func (f decodeFlag) Set(s string) error {
	m, err := transforms.ParseDecodeMode(s)
	if err != nil {
		return err
	}
	*f.m = m
	return nil
}

// registerDecode adds --decode, the JPEG decode of split's transform: for "train" (stoke
// train) fast unless the flag says exact, for "test" (stoke predict) exact unless it says fast.
// A split without the flag keeps its transform's own (Train: fast, Eval: exact).
func (lf *loaderFlags) registerDecode(fs *flag.FlagSet, split string) {
	if lf.decode == nil {
		lf.decode = map[string]*transforms.DecodeMode{}
	}
	m, usage := transforms.FastDecode, "JPEG decode of the training data: fast (reduced scale), exact "+
		"(as PIL and torchvision decode; slower) or device (fast's pixels, the host entropy-decoding and the device doing the rest); evaluation decodes exact"
	if split == "test" {
		m, usage = transforms.ExactDecode, "JPEG decode: exact (as PIL and torchvision decode, what a model trained or served there sees), "+
			"fast (reduced scale, stoke train's default) or device (fast's pixels, the device doing the pixel work)"
	}
	lf.decode[split] = &m
	fs.Var(decodeFlag{&m}, "decode", usage)
}

// withDecode applies split's --decode, if it has one, to transform c (nil stays nil: no
// transform).
func (lf *loaderFlags) withDecode(c *transforms.Chain, split string) *transforms.Chain {
	if m := lf.decode[split]; m != nil && c != nil {
		return c.WithDecode(*m)
	}
	return c
}
