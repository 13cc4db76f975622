// Package bytesize writes sizes in bytes for people.
package bytesize

import "fmt"

// Format writes n bytes in the largest binary unit that keeps a figure >= 1 ("1.5 GiB").
func Format(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
