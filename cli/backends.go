package cli

// The backends the stoke command can open besides the CPU: the CUDA backend when built with
// -tags cuda (without the tag the package is empty).
import _ "github.com/stoke-ml/stoke/gpu/cuda"
