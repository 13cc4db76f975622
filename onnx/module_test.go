package onnx

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// TestNNFormsEveryOp: every op of package nn (each constant of type nn.Op in its source, and the
// elementwise functions, which nn names by kernels.UnaryFunc's String) has an ONNX form or is
// declared training-only in nnForms, so that an op added to nn without one fails here, in the
// default build, not in an export at run time.
func TestNNFormsEveryOp(t *testing.T) {
	files, err := filepath.Glob("../nn/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("glob ../nn/*.go = %v, %v", files, err)
	}
	ops := map[nn.Op]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || spec.Type == nil || len(spec.Values) != len(spec.Names) {
				return true
			}
			if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "Op" {
				return true
			}
			for i, v := range spec.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					ops[nn.Op(s)] = "nn." + spec.Names[i].Name
				}
			}
			return true
		})
	}
	if len(ops) == 0 {
		t.Fatal("no constant of type Op in ../nn")
	}
	for f := kernels.UnaryFunc(1); !strings.HasPrefix(f.String(), "UnaryFunc("); f++ {
		op := nn.Op(f.String())
		if _, ok := ops[op]; !ok {
			t.Errorf("kernels.%s: nn records it as %q, which is no constant of type nn.Op", f, op)
			ops[op] = "kernels." + f.String()
		}
	}
	for op, name := range ops {
		if nnForms[op] == nil {
			t.Errorf("%s (%q) has no ONNX form in nnForms and is not declared trainingOnly there", name, op)
		}
	}
	for op := range nnForms {
		if _, ok := ops[op]; !ok {
			t.Errorf("nnForms has a form of %q, which is no op of nn", op)
		}
	}
}
