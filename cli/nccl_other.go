//go:build !cuda

package cli

import (
	"context"
	"io"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/train"
)

// deviceReducer is nil without the CUDA backend: the gradients are all-reduced through the host
// (collective's ring).
func deviceReducer(context.Context, *collective.Group, gpu.Device) (train.DeviceReducer, io.Closer, error) {
	return nil, nil, nil
}
