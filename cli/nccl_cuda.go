//go:build cuda

package cli

import (
	"context"
	"io"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/collective/nccl"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/train"
)

// deviceReducer is the gradients' all-reduce in device memory for a data-parallel run on CUDA
// devices: an NCCL communicator over the group (its unique id through the group's store), or nil
// on another backend or in a group of one. The closer, if not nil, releases the communicator.
func deviceReducer(ctx context.Context, g *collective.Group, dev gpu.Device) (train.DeviceReducer, io.Closer, error) {
	if g.Size() == 1 || dev.Info().Backend != "cuda" {
		return nil, nil, nil
	}
	c, err := nccl.New(ctx, g, dev)
	if err != nil {
		return nil, nil, err
	}
	return ncclReducer{c}, c, nil
}

// ncclReducer all-reduces tensors (gradients, SyncBatchNorm's statistics) with ncclAllReduce on
// the compute stream.
type ncclReducer struct{ c *nccl.Comm }

func (r ncclReducer) AllReduceOnDevice(s gpu.Stream, v kernels.F32, op collective.Op) error {
	return r.c.AllReduce(s, v.Buf, 4*v.Off, v.Len, nccl.Float32, op)
}

// AllReduceBF16OnDevice all-reduces a bf16 run's gradients as bfloat16 (ncclBfloat16).
func (r ncclReducer) AllReduceBF16OnDevice(s gpu.Stream, v kernels.U8, op collective.Op) error {
	return r.c.AllReduce(s, v.Buf, v.Off, v.Len/2, nccl.BFloat16, op)
}

// AllReduceFP16OnDevice all-reduces an fp16 run's gradients as IEEE half (ncclFloat16).
func (r ncclReducer) AllReduceFP16OnDevice(s gpu.Stream, v kernels.U8, op collective.Op) error {
	return r.c.AllReduce(s, v.Buf, v.Off, v.Len/2, nccl.Float16, op)
}
