// Command stoke is a stoke of this module's own: Stoke's command line (package cli) built with
// the layers and the model of package layers registered, so that it trains, predicts, exports
// and resumes models holding them, as a prebuilt stoke cannot (it was not built with this code):
//
//	go build -o stoke ./cmd/stoke
//	./stoke train --model se-net --data DIR --size 16 --checkpoint se.ck
//	./stoke predict --checkpoint se.ck --data DIR
//	./stoke export --checkpoint se.ck --out se.onnx --data DIR
package main

import (
	"github.com/stoke-ml/stoke/cli"

	_ "example.com/stoke-external/layers" // registers layernorm2d, squeezeexcite and se-net
)

func main() { cli.Main() }
