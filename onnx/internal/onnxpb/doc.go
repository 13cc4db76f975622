// Package onnxpb is the Go form of ONNX's protobuf definition of a model (onnx.proto), generated
// by protoc-gen-go under the protobuf package name stoke.onnx (see gen.sh): the types package
// onnx marshals and unmarshals with google.golang.org/protobuf.
package onnxpb

//go:generate ./gen.sh
