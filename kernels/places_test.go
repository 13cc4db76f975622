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
// them fails here, in the default build, on any machine. The op's entry in the table of
// internal/opdef gives the interface, the argument checks, the test recorder's method, the check
// cases, the CUDA parity case (TestCUDAParityTable runs every entry's good call on both op sets)
// and, when the entry declares them (its CPU and CUDA code), the backends' methods through go
// generate, and TestGeneratedFresh fails when they are stale; the compiler checks the CPU op set
// (cpu_gen.go or cpu.go, over its kernels in internal/cpu); the NVRTC tests of gpu/cuda that every
// kernel of its ops.cu compiles and loads (the op set loads each `extern "C" __global__` function
// it finds there). What only a -tags cuda build would see is read from the source here: a method
// of the CUDA op set (gpu/cuda/*.go, ops_gen.go among them), once: not both generated and written
// by hand.
func TestOpPlaces(t *testing.T) {
	cudaMethods := map[string]int{}
	const cudaDir = "../gpu/cuda"
	files, err := filepath.Glob(filepath.Join(cudaDir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob %s/*.go = %v, %v", cudaDir, files, err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 && types(fn.Recv.List[0].Type) == "*cudaOps" {
				cudaMethods[fn.Name.Name]++
			}
		}
	}
	ops := reflect.TypeFor[kernels.Ops]()
	for i := range ops.NumMethod() {
		switch m := ops.Method(i).Name; cudaMethods[m] {
		case 0:
			t.Errorf("kernels.Ops.%s: no method of the CUDA op set (func (o *cudaOps) %s in gpu/cuda, or the table entry's CUDA code)", m, m)
		case 1:
		default:
			t.Errorf("kernels.Ops.%s: %d methods of the CUDA op set: one from the table entry's CUDA code and one by hand?", m, cudaMethods[m])
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
