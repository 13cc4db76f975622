package gpu

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/cpu"
)

// Peaker is implemented by a device that knows its peak float32 throughput, the denominator of
// a run's model FLOPs utilization (stoke train --json's mfu).
type Peaker interface {
	// PeakFLOPS is the most float32 FLOP/s the device can compute for this process (a fused
	// multiply-add counts as 2 FLOPs), 0 when unknown.
	PeakFLOPS() float64
}

// PeakFLOPS is dev's peak float32 FLOP/s when it is a Peaker, else 0 (unknown).
func PeakFLOPS(dev Device) float64 {
	if p, ok := dev.(Peaker); ok {
		return p.PeakFLOPS()
	}
	return 0
}

var _ Peaker = (*cpuDevice)(nil)

// PeakFLOPS is the float32 peak of the cores the CPU op set computes on: GOMAXPROCS goroutines,
// at most one per physical core (two hyperthreads share a core's FMA units), each core retiring
// two vector FMAs a cycle at the host's clock (see cpuPeak). It is 0 where the clock or the vector
// width is unknown: outside Linux, and on CPUs without AVX2 and FMA (arm64 among them). A virtual
// machine's /proc/cpuinfo often gives the base clock, below the boost its cores run at, so a
// utilization there reads high.
func (d *cpuDevice) PeakFLOPS() float64 {
	h := hostCPU()
	cores := runtime.GOMAXPROCS(0) // read now: one of several ranks on a host is given its share
	if h.cores > 0 {
		cores = min(cores, h.cores)
	}
	return cpuPeak(cores, h.mhz, fmaLanes(cpu.X86.HasAVX512F, cpu.X86.HasAVX2 && cpu.X86.HasFMA, h.vendor, h.family))
}

// cpuPeak is the float32 FLOP/s of cores cores at mhz MHz that each retire two fused multiply-adds
// of lanes float32 lanes a cycle (the two FMA ports of every x86 core since Haswell and Zen 2),
// 2 FLOPs each; 0 when any is unknown (0).
func cpuPeak(cores int, mhz float64, lanes int) float64 {
	return float64(cores) * mhz * 1e6 * 2 * float64(lanes) * 2
}

// fmaLanes is the float32 lanes of one FMA a core of these features computes in a cycle: 16 with
// AVX-512, 8 with AVX2 and FMA, 0 (unknown) without either. AMD's Zen 4 (family 0x19, the only
// one of that family with AVX-512) counts 8 with AVX-512 too: it runs a 512-bit FMA as two halves
// on its two 256-bit units (double-pumped), so it retires no more FLOPs a cycle than with AVX2,
// and counting 16 would halve its utilization. Where a core is narrower than its features say
// (Intel parts with one 512-bit FMA unit, Zen 5's mobile parts), the peak is overstated and the
// utilization reads low.
func fmaLanes(avx512, avx2fma bool, vendor string, family int) int {
	switch {
	case avx512 && !(vendor == "AuthenticAMD" && family == 0x19):
		return 16
	case avx512 || avx2fma:
		return 8
	}
	return 0
}

// cpuFacts is what the CPU's peak needs of /proc/cpuinfo.
type cpuFacts struct {
	mhz    float64 // the first processor's clock; 0: unknown
	vendor string  // vendor_id: GenuineIntel, AuthenticAMD
	family int     // cpu family
	cores  int     // distinct (physical id, core id) pairs; 0: unknown
}

// hostCPU reads the facts once: the first time a peak is asked for.
var hostCPU = sync.OnceValue(func() cpuFacts {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return cpuFacts{}
	}
	f := parseCPUInfo(string(b))
	// The clock the kernel reports can be the current one of a core that scales its frequency
	// (an idle core's, below the peak); the highest it may run at is the peak's.
	if b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); err == nil {
		if khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && khz > 0 {
			f.mhz = khz / 1000
		}
	}
	return f
})

// parseCPUInfo reads Linux's /proc/cpuinfo text: the first processor's clock ("cpu MHz"), vendor
// and family, and the physical cores over every processor.
func parseCPUInfo(text string) cpuFacts {
	var f cpuFacts
	n := 0 // processors begun
	var phys, core string
	cores := map[[2]string]bool{}
	flush := func() { // the end of a processor's block
		if core != "" {
			cores[[2]string{phys, core}] = true
		}
		phys, core = "", ""
	}
	for line := range strings.SplitSeq(text, "\n") {
		k, v, _ := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "processor":
			flush()
			n++
		case k == "physical id":
			phys = v
		case k == "core id":
			core = v
		case n > 1: // the clock, vendor and family are the first processor's
		case k == "cpu MHz":
			if mhz, err := strconv.ParseFloat(v, 64); err == nil && mhz > 0 {
				f.mhz = mhz
			}
		case k == "vendor_id":
			f.vendor = v
		case k == "cpu family":
			f.family, _ = strconv.Atoi(v)
		}
	}
	flush()
	f.cores = len(cores)
	return f
}
