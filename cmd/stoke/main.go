// Command stoke is Stoke's command line: train a classifier (on one process or data-parallel on
// several), predict, export (safetensors, ONNX), preview a batch, benchmark or profile a
// data-loading pipeline, pack a dataset into shards, measure the collective, and list the devices.
// `stoke --help` lists the commands and `stoke CMD --help` their flags; package cli is the same
// command line as a library, for a stoke of one's own that knows one's layers and models.
package main

import "github.com/stoke-ml/stoke/cli"

func main() { cli.Main() }
