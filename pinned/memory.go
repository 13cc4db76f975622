package pinned

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// SystemMemory returns the memory this process may use: the machine's physical memory
// (MemTotal of /proc/meminfo), or the memory limit of its cgroup or its address space (ulimit -v)
// when that is lower. It returns 0 when none is known (other systems than Linux).
func SystemMemory() int64 {
	total := memTotal()
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		// "max" (v2) and the huge page-rounded maximum (v1) mean no limit.
		if v := readInt(p); v > 0 && (total == 0 || v < total) {
			total = v
		}
	}
	if v := addressLimit(); v > 0 && (total == 0 || v < total) {
		total = v
	}
	return total
}

// AvailableMemory returns the memory this process may still take without pushing the machine
// into swap or its cgroup over its limit: MemAvailable of /proc/meminfo (free memory and the
// caches the kernel can reclaim), or what is left under the cgroup's limit when that is less (its
// usage less the inactive page cache, which the kernel reclaims first), or the address-space
// limit (ulimit -v) when that is less. It returns 0 when it is not known.
func AvailableMemory() int64 {
	avail := meminfo("MemAvailable:")
	less := func(v int64) {
		if v > 0 && (avail == 0 || v < avail) {
			avail = v
		}
	}
	for _, c := range []struct{ limit, usage, stat, inactive string }{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"},
	} {
		limit, used := readInt(c.limit), readInt(c.usage)
		if limit <= 0 || used <= 0 {
			continue
		}
		used = max(used-statField(c.stat, c.inactive), 0)
		if used <= limit {
			less(limit - used)
		}
	}
	less(addressLimit())
	return avail
}

// statField reads a field of a cgroup's memory.stat ("inactive_file 123"); 0 when it cannot.
func statField(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, v, ok := strings.Cut(line, " "); ok && name == field {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
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
