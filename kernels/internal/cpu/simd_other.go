//go:build !amd64 || noasm

package cpu

// hasAVX2 is false: there is no assembly in this build.
const hasAVX2 = false

func reluSIMD(y, x []float32) int { return 0 }

func reluGradSIMD(dx, dy, y []float32) int { return 0 }
