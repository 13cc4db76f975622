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
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		// "max" (v2) and the huge page-rounded maximum (v1) mean no limit.
		if err == nil && v > 0 && (total == 0 || v < total) {
			total = v
		}
	}
	return total
}

func memTotal() int64 {
	fh, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
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
