// Command gen writes the code generated from the table of package opdef (see there); run it as
// `go generate ./kernels`, from the kernels directory.
package main

import (
	"log"
	"os"

	"github.com/stoke-ml/stoke/kernels/internal/opdef"
)

func main() {
	files, err := opdef.Generate()
	if err != nil {
		log.Fatal(err)
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
