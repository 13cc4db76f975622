package models_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
)

// TestRegistry: New builds a registered model by its name with arguments (spaces around it
// trimmed), an unknown name is ErrUnknown listing the names, a name taken twice ErrRegistered;
// Names holds the built-in models and the zoo's, sorted.
func TestRegistry(t *testing.T) {
	m, err := models.New(" mlp ", models.Shape{C: 1, H: 8, W: 8}, 10)
	if err != nil || m.Name != "mlp" {
		t.Fatalf("New(mlp) = %+v, %v", m, err)
	}
	if _, err := nn.Infer(m.Module, false, 2, 1, 8, 8); err != nil {
		t.Errorf("the mlp's module: %v", err)
	}
	if _, err := models.New("mlp(width=3)", models.Shape{C: 1, H: 8, W: 8}, 10); err == nil || !strings.Contains(err.Error(), "takes no arguments") {
		t.Errorf("mlp with arguments: %v", err)
	}
	if _, err := models.New("nope", models.Shape{C: 1, H: 8, W: 8}, 10); !errors.Is(err, models.ErrUnknown) || !strings.Contains(err.Error(), "vit_b_16") {
		t.Errorf("an unknown model: %v; want ErrUnknown listing the names", err)
	}
	if _, err := models.New("vit(image_size=8", models.Shape{C: 1, H: 8, W: 8}, 10); err == nil || !strings.Contains(err.Error(), "unbalanced") {
		t.Errorf("unbalanced parentheses: %v", err)
	}
	build := func(string, models.Shape, int) (*models.Model, error) { return nil, errors.New("x") }
	if err := models.Register("mlp", build); !errors.Is(err, models.ErrRegistered) {
		t.Errorf("Register of a taken name: %v; want ErrRegistered", err)
	}
	if err := models.Register("two words", build); err == nil {
		t.Error("Register of a name with a space: no error")
	}
	names := models.Names()
	for _, want := range []string{"cnn", "mlp", "resnet18", "resnet20", "resnet50", "resnet8", "vit_b_16", "timm/convnext_atto"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() has no %s", want)
		}
	}
	if !slices.IsSorted(names) {
		t.Error("Names() is not sorted")
	}
}

// TestDecodeArgs: a builder's arguments decode into its struct from the name's key=value form or
// JSON, keeping the defaults of what is not given; unknown, repeated and mistyped keys are
// errors naming them.
func TestDecodeArgs(t *testing.T) {
	type args struct {
		Heads int     `json:"heads"`
		Width int     `json:"width"`
		Drop  float64 `json:"drop"`
		Norm  string  `json:"norm"`
		Bias  bool    `json:"bias"`
	}
	for _, tc := range []struct {
		in   string
		want args
	}{
		{"", args{Heads: 4, Width: 24}},
		{" heads = 3 , drop=0.1,norm=batch, bias=true", args{Heads: 3, Width: 24, Drop: 0.1, Norm: "batch", Bias: true}},
		{`norm="layer"`, args{Heads: 4, Width: 24, Norm: "layer"}},
		{`{"width": 32, "heads": 2}`, args{Heads: 2, Width: 32}},
	} {
		a := args{Heads: 4, Width: 24}
		if err := models.DecodeArgs(tc.in, &a); err != nil || a != tc.want {
			t.Errorf("models.DecodeArgs(%q) = %+v, %v; want %+v", tc.in, a, err, tc.want)
		}
	}
	for in, want := range map[string]string{
		"heads=3,heads=4":       "heads given twice",
		"hedas=3":               `unknown field "hedas"`,
		"heads=four":            "heads",
		"heads":                 `argument "heads": want key=value`,
		`{"heads": 1} {}`:       "more after the JSON object",
		`{"heads":4,"heads":8}`: "heads given twice",
		"heads=4,Heads=8":       "Heads given twice",
		"heads=null":            "heads: null",
		`{"heads":4}}`:          "more after the JSON object",
		`{"heads": "x"}`:        "heads",
	} {
		var a args
		if err := models.DecodeArgs(in, &a); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("models.DecodeArgs(%q) = %v; want an error naming %q", in, err, want)
		}
	}
}
