//go:build cuda

package cuda

import (
	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
)

// peakFLOPS is device d's peak float32 FLOP/s from the driver's attributes (which need no
// context): its multiprocessors, each retiring fp32Lanes fused multiply-adds of 2 FLOPs a cycle,
// at its clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE, the boost clock: an H100 SXM's 132 SMs x 128
// lanes x 2 x 1.98 GHz is NVIDIA's 67 TFLOPS); 0 when the driver gives none of them, or the
// compute capability is one fp32Lanes does not know.
func peakFLOPS(d cu.Device) float64 {
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return 0
	}
	sms, err := d.Attribute(cu.MultiprocessorCount)
	if err != nil {
		return 0
	}
	khz, err := d.Attribute(cu.ClockRate)
	if err != nil {
		return 0
	}
	return float64(sms) * float64(fp32Lanes(major, minor)) * 2 * float64(khz) * 1e3
}

// fp32Lanes is the float32 fused multiply-adds one multiprocessor of compute capability
// major.minor retires a cycle (the CUDA C++ Programming Guide's table of arithmetic
// instructions' throughput): 64 on the data-centre parts of Pascal (6.0), Volta and Turing (7.x)
// and Ampere (8.0); 128 on Maxwell, the other Pascal and Ampere parts, Ada, Hopper and Blackwell;
// 0 (unknown) for the others.
func fp32Lanes(major, minor int) int {
	switch {
	case major == 7, (major == 6 || major == 8) && minor == 0:
		return 64
	case major >= 5 && major <= 12:
		return 128
	}
	return 0
}

// PeakFLOPS is the device's float32 peak, of its CUDA cores: the products of bf16 or fp16 runs
// (kernels.ForPrecision) use its tensor cores, whose peak is higher.
func (d *cudaDevice) PeakFLOPS() float64 { return d.peak }

var _ gpu.Peaker = (*cudaDevice)(nil)
