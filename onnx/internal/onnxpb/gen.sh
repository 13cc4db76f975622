#!/bin/sh
# Regenerates onnx.pb.go from onnx.proto, ONNX's own definition of the format, copied unchanged
# from https://github.com/onnx/onnx/blob/v1.22.0/onnx/onnx.proto (Apache-2.0).
#
# The Go types are generated from a copy whose protobuf package is stoke.onnx instead of onnx,
# registered as stoke/onnx/onnx.proto: the package and file names never reach the wire, and a
# program that links Stoke beside another Go package generated from onnx.proto would otherwise
# stop at start-up on google.golang.org/protobuf's registration conflict.
#
# Needs protoc (Debian: apt-get install protobuf-compiler) and protoc-gen-go at the version of
# google.golang.org/protobuf in go.mod (go install google.golang.org/protobuf/cmd/protoc-gen-go,
# run in the module). Run by `go generate ./onnx/...`.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/stoke/onnx"
sed 's/^package onnx;$/package stoke.onnx;/' onnx.proto >"$tmp/stoke/onnx/onnx.proto"
grep -q '^package stoke.onnx;$' "$tmp/stoke/onnx/onnx.proto"
protoc -I "$tmp" --go_out="$tmp" --go_opt=paths=source_relative \
	--go_opt=Mstoke/onnx/onnx.proto=github.com/stoke-ml/stoke/onnx/internal/onnxpb \
	stoke/onnx/onnx.proto
mv "$tmp/stoke/onnx/onnx.pb.go" onnx.pb.go
