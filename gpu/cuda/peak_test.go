//go:build cuda

package cuda

import (
	"testing"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
)

func TestFP32Lanes(t *testing.T) {
	for _, c := range []struct{ major, minor, want int }{
		{5, 2, 128}, {6, 0, 64}, {6, 1, 128}, {7, 0, 64}, {7, 5, 64}, {8, 0, 64}, {8, 6, 128}, {8, 9, 128},
		{9, 0, 128}, {10, 0, 128}, {12, 0, 128}, {3, 5, 0}, {13, 0, 0},
	} {
		if got := fp32Lanes(c.major, c.minor); got != c.want {
			t.Errorf("fp32Lanes(%d, %d) = %d; want %d", c.major, c.minor, got, c.want)
		}
	}
}

// TestCUDAPeakFLOPS: a GPU's peak is its multiprocessors' FP32 lanes at its clock, a teraFLOP/s
// or more; the stand-in, whose driver gives neither, has none.
func TestCUDAPeakFLOPS(t *testing.T) {
	d := openCUDA(t)
	dev := d.(*cudaDevice).dev
	sms, err1 := dev.Attribute(cu.MultiprocessorCount)
	khz, err2 := dev.Attribute(cu.ClockRate)
	if err1 != nil || err2 != nil {
		t.Fatalf("multiprocessors %v, clock %v", err1, err2)
	}
	peak := gpu.PeakFLOPS(d)
	t.Logf("%s: %d multiprocessors at %d MHz, compute capability %s: peak %.4g TFLOP/s", d.Info(), sms, khz/1000, d.Info().ComputeCapability, peak/1e12)
	if sms > 0 && khz > 0 && !(peak >= 1e12) || (sms == 0 || khz == 0) && peak != 0 {
		t.Errorf("PeakFLOPS() = %g with %d multiprocessors at %d kHz; want 1e12 or more with both, 0 without", peak, sms, khz)
	}
}
