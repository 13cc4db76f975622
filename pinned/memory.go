package pinned

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// SystemMemory returns the memory this process may use: the machine's physical memory
// (MemTotal of /proc/meminfo), or the memory limit of its cgroup when that is lower. It returns 0
// when neither is known (other systems than Linux).
func SystemMemory() int64 {
	total := memTotal()
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		// "max" (v2) and the huge page-rounded maximum (v1) mean no limit.
		if v := readInt(p); v > 0 && (total == 0 || v < total) {
			total = v
		}
	}
	return total
}

// AvailableMemory returns the memory this process may still take without pushing the machine
// into swap or its cgroup over its limit: MemAvailable of /proc/meminfo (free memory and the
// caches the kernel can reclaim), or what is left under the cgroup's limit when that is less. It
// returns 0 when it is not known.
func AvailableMemory() int64 {
	avail := meminfo("MemAvailable:")
	for _, p := range [][2]string{{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}} {
		limit, used := readInt(p[0]), readInt(p[1])
		if limit > 0 && used > 0 && used <= limit && (avail == 0 || limit-used < avail) {
			avail = limit - used
		}
	}
	return avail
}

// readInt reads a file holding one integer; 0 when it cannot ("max" means no limit).
func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

func memTotal() int64 { return meminfo("MemTotal:") }

// meminfo reads a field of /proc/meminfo in bytes; 0 when it cannot.
func meminfo(field string) int64 {
	fh, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return v << 10
				}
			}
		}
	}
	return 0
}
