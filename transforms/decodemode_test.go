package transforms

import (
	"errors"
	"testing"
)

func TestDecodeMode(t *testing.T) {
	var nilChain *Chain
	tests := []struct {
		name string
		c    *Chain
		want DecodeMode
	}{
		{"Compose", Compose(Resize(8)), FastDecode},
		{"Train", Train(224), FastDecode},
		{"Eval", Eval(224), ExactDecode},
		{"nil", nilChain, FastDecode},
		{"Train exact", Train(224).WithDecode(ExactDecode), ExactDecode},
		{"Eval fast", Eval(224).WithDecode(FastDecode), FastDecode},
		{"nil exact", nilChain.WithDecode(ExactDecode), ExactDecode},
	}
	for _, tc := range tests {
		if got := tc.c.DecodeMode(); got != tc.want {
			t.Errorf("%s: DecodeMode() = %v; want %v", tc.name, got, tc.want)
		}
	}
	e := Eval(224)
	_ = e.WithDecode(FastDecode)
	if e.DecodeMode() != ExactDecode {
		t.Error("WithDecode changed its receiver")
	}
	if got, want := Compose(CenterCrop(4)).WithDecode(ExactDecode).String(), "Compose(CenterCrop(4)).WithDecode(exact)"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if got, want := Compose(CenterCrop(4)).String(), "Compose(CenterCrop(4))"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	for _, m := range []DecodeMode{FastDecode, ExactDecode, DeviceDecode} {
		if got, err := ParseDecodeMode(m.String()); got != m || err != nil {
			t.Errorf("ParseDecodeMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if _, err := ParseDecodeMode("best"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseDecodeMode(best) error = %v; want ErrInvalid", err)
	}
	// A mode that is neither fails the JPEG sample; other formats have one decoder.
	in := hwc(16, 16, 3, func(y, x, c int) byte { return byte(x*9 + y*5 + c) })
	jpg := encodeJPEG(t, toImage(in), 90)
	if err := Compose().WithDecode(7).NewWorker().Apply(make([]byte, 3*16*16), Input{Encoded: jpg}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Apply with DecodeMode(7) = %v; want ErrInvalid", err)
	}
	// Apply decodes as FastDecode under DeviceDecode: the host path of its samples.
	fast, dev := make([]byte, 3*8*8), make([]byte, 3*8*8)
	if err := Compose(Resize(8)).NewWorker().Apply(fast, Input{Encoded: jpg}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Compose(Resize(8)).WithDecode(DeviceDecode).NewWorker().Apply(dev, Input{Encoded: jpg}, nil); err != nil {
		t.Fatal(err)
	}
	if string(fast) != string(dev) {
		t.Error("Apply under DeviceDecode differs from FastDecode")
	}
}
