#!/bin/sh
# Regenerates onnx.pb.go from onnx.proto, ONNX's own definition of the format, copied unchanged
# from https://github.com/onnx/onnx/blob/v1.22.0/onnx/onnx.proto (Apache-2.0).
#
# Needs protoc (Debian: apt-get install protobuf-compiler) and protoc-gen-go at the version of
# google.golang.org/protobuf in go.mod (go install google.golang.org/protobuf/cmd/protoc-gen-go,
# run in the module). Run by `go generate ./onnx/...`.
set -eu
cd "$(dirname "$0")"
protoc --go_out=. --go_opt=paths=source_relative \
	--go_opt=Monnx.proto=github.com/stoke-ml/stoke/onnx/internal/onnxpb \
	onnx.proto
