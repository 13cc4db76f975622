package docscheck

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestArchitectureLineCounts: the line counts of docs/ARCHITECTURE.md's package table (non-test
// Go lines of each package's folder, as the page says it counts them) are within 10% of the
// code's, so that the map does not drift from the territory. A row naming n packages gives n
// counts joined by " + " (a count followed by words, "420 + generated code", is its first
// package's).
func TestArchitectureLineCounts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	pkgRe := regexp.MustCompile("`([a-z][a-z0-9/]*)`")
	numRe := regexp.MustCompile(`^[0-9][0-9,]*`)
	checked := 0
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var pkgs []string
		for _, m := range pkgRe.FindAllStringSubmatch(cells[1], -1) {
			pkgs = append(pkgs, strings.TrimSuffix(m[1], "/"))
		}
		for i, part := range strings.Split(strings.TrimSpace(cells[3]), " + ") {
			num := numRe.FindString(part)
			if num == "" || i >= len(pkgs) {
				break
			}
			want, _ := strconv.Atoi(strings.ReplaceAll(num, ",", ""))
			got := goLines(t, filepath.Join(root, pkgs[i]))
			if got == 0 {
				continue // cmd/ and the like: a folder of folders
			}
			checked++
			if d := got - want; d*10 > want || -d*10 > want {
				t.Errorf("docs/ARCHITECTURE.md says %s has %d lines; it has %d", pkgs[i], want, got)
			}
		}
	}
	if checked < 15 {
		t.Fatalf("checked %d packages' line counts; the table's format may have changed", checked)
	}
}

// goLines counts the lines of the non-test Go files directly in dir.
func goLines(t *testing.T, dir string) int {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n
}
