package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/stoke-ml/stoke/transforms"
)

func TestDecodeFlag(t *testing.T) {
	// stoke train registers --decode for "train", stoke predict for "test".
	fast, exact := transforms.FastDecode, transforms.ExactDecode
	tests := []struct {
		split      string
		args       []string
		train, eva transforms.DecodeMode
		bad        bool
	}{
		{"train", nil, fast, exact, false},
		{"train", []string{"--decode", "exact"}, exact, exact, false},
		{"train", []string{"--decode", "fast"}, fast, exact, false},
		{"test", nil, fast, exact, false},
		{"test", []string{"--decode", "fast"}, fast, fast, false},
		{"train", []string{"--decode", "best"}, 0, 0, true},
	}
	for _, tc := range tests {
		var lf loaderFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		lf.registerDecode(fs, tc.split)
		err := fs.Parse(tc.args)
		if (err != nil) != tc.bad {
			t.Fatalf("%s: parse %v: err = %v; want error %v", tc.split, tc.args, err, tc.bad)
		}
		if tc.bad {
			continue
		}
		if got := lf.withDecode(transforms.Train(224), "train").DecodeMode(); got != tc.train {
			t.Errorf("%v: train decode = %v; want %v", tc.args, got, tc.train)
		}
		if got := lf.withDecode(transforms.Eval(224), "test").DecodeMode(); got != tc.eva {
			t.Errorf("%v: test decode = %v; want %v", tc.args, got, tc.eva)
		}
		if lf.withDecode(nil, "train") != nil {
			t.Errorf("%v: withDecode(nil) != nil", tc.args)
		}
	}
}
