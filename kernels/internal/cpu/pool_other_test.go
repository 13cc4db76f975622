//go:build !amd64 || noasm

package cpu

import "testing"

// poolPaths lists the pooling paths of this build: the Go loop only.
func poolPaths(*testing.T) []poolPath { return []poolPath{{"go", func() {}}} }
