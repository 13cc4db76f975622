package kernels_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// TestOpPlaces lists the places an op of kernels.Ops must appear, so that one added without all of
// them fails here, in the default build, on any machine. The compiler checks the interface, the
// argument checks (check.go) and the CPU op set (cpu.go, over its kernels in internal/cpu);
// TestChecksForEveryBackend that the op has check cases (internal/opcheck, and the recorder's
// method in check_test.go); the NVRTC tests of gpu/cuda that every kernel of its ops.cu compiles
// and loads (the op set loads each `extern "C" __global__` function it finds there). What only a
// -tags cuda build would see is read from the source here: a method of the CUDA op set
// (gpu/cuda/*.go), and a call of it in the CUDA parity tests (gpu/cuda/*_test.go, through a
// side's op set: sd.ops.Op).
func TestOpPlaces(t *testing.T) {
	cudaMethods, parityCalls := map[string]bool{}, map[string]bool{}
	const cudaDir = "../gpu/cuda"
	files, err := filepath.Glob(filepath.Join(cudaDir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob %s/*.go = %v, %v", cudaDir, files, err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		test := strings.HasSuffix(name, "_test.go")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if !test && n.Recv != nil && len(n.Recv.List) == 1 && types(n.Recv.List[0].Type) == "*cudaOps" {
					cudaMethods[n.Name.Name] = true
				}
			case *ast.SelectorExpr:
				if inner, ok := n.X.(*ast.SelectorExpr); test && ok && inner.Sel.Name == "ops" {
					if side, ok := inner.X.(*ast.Ident); ok && side.Name == "sd" {
						parityCalls[n.Sel.Name] = true
					}
				}
			}
			return true
		})
	}
	ops := reflect.TypeFor[kernels.Ops]()
	for i := range ops.NumMethod() {
		m := ops.Method(i).Name
		if !cudaMethods[m] {
			t.Errorf("kernels.Ops.%s: no method of the CUDA op set (func (o *cudaOps) %s in gpu/cuda)", m, m)
		}
		if m != "Backend" && !parityCalls[m] {
			t.Errorf("kernels.Ops.%s: no CUDA parity case calls it (sd.ops.%s in gpu/cuda's tests)", m, m)
		}
	}
}

// types spells a receiver type: "*cudaOps" or "cudaOps".
func types(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		return "*" + types(s.X)
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
