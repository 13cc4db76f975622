package gpu

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

func TestCPUPeak(t *testing.T) {
	for _, c := range []struct {
		name            string
		avx512, avx2fma bool
		vendor          string
		family, cores   int
		mhz, want       float64
	}{
		// The 2-core AMD EPYC (Zen 4) of docs/figures.md: 2 x 2596.15 MHz x 2 FMAs x 8 lanes x 2.
		{"zen4", true, true, "AuthenticAMD", 0x19, 2, 2596.15, 2 * 2596.15e6 * 32},
		{"zen3", false, true, "AuthenticAMD", 0x19, 8, 3000, 8 * 3e9 * 32},
		{"zen5", true, true, "AuthenticAMD", 0x1a, 4, 3000, 4 * 3e9 * 64},
		{"intel avx-512", true, true, "GenuineIntel", 6, 16, 2000, 16 * 2e9 * 64},
		{"intel avx2", false, true, "GenuineIntel", 6, 4, 3500, 4 * 3.5e9 * 32},
		{"no fma", false, false, "", 0, 4, 2000, 0},
		{"clock unknown", true, true, "GenuineIntel", 6, 4, 0, 0},
	} {
		lanes := fmaLanes(c.avx512, c.avx2fma, c.vendor, c.family)
		if got := cpuPeak(c.cores, c.mhz, lanes); got != c.want {
			t.Errorf("%s: cpuPeak(%d, %g, fmaLanes = %d) = %g; want %g", c.name, c.cores, c.mhz, lanes, got, c.want)
		}
	}
}

func TestParseCPUInfo(t *testing.T) {
	const block = "processor\t: %d\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\ncpu MHz\t\t: %s\n" +
		"physical id\t: 0\ncore id\t\t: %d\nflags\t\t: fpu avx2 fma avx512f\n\n"
	for _, c := range []struct {
		name, text string
		want       cpuFacts
	}{
		{"two cores", fmt.Sprintf(block, 0, "2596.150", 0) + fmt.Sprintf(block, 1, "2596.150", 1),
			cpuFacts{mhz: 2596.15, vendor: "AuthenticAMD", family: 25, cores: 2}},
		// Two hyperthreads a core: four processors, two cores; the first processor's clock.
		{"hyperthreads", fmt.Sprintf(block, 0, "3000.5", 0) + fmt.Sprintf(block, 1, "1200", 1) + fmt.Sprintf(block, 2, "1200", 0) + fmt.Sprintf(block, 3, "1200", 1),
			cpuFacts{mhz: 3000.5, vendor: "AuthenticAMD", family: 25, cores: 2}},
		// arm64's file: no clock, vendor or core ids.
		{"arm64", "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n",
			cpuFacts{}},
		{"empty", "", cpuFacts{}},
		{"bad clock", "processor\t: 0\ncpu MHz\t\t: fast\n", cpuFacts{}},
	} {
		if got := parseCPUInfo(c.text); got != c.want {
			t.Errorf("%s: parseCPUInfo = %+v; want %+v", c.name, got, c.want)
		}
	}
}

// TestPeakFLOPS checks the CPU device's peak against the formula over this host's facts, and
// that a device that is no Peaker has none.
func TestPeakFLOPS(t *testing.T) {
	d := openCPU(t)
	got := PeakFLOPS(d)
	h := hostCPU()
	if runtime.GOOS == "linux" && cpu.X86.HasAVX2 && cpu.X86.HasFMA && h.mhz > 0 && got <= 0 {
		t.Errorf("PeakFLOPS(cpu) = %g on Linux with AVX2, FMA and a %g MHz clock; want > 0", got, h.mhz)
	}
	if got < 0 {
		t.Errorf("PeakFLOPS(cpu) = %g; want >= 0", got)
	}
	t.Logf("cpu peak: %.4g GFLOP/s (%+v, GOMAXPROCS %d)", got/1e9, h, runtime.GOMAXPROCS(0))
	if got := PeakFLOPS(struct{ Device }{d}); got != 0 {
		t.Errorf("PeakFLOPS(a device that is no Peaker) = %g; want 0", got)
	}
}
