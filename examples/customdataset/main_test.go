package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
)

func TestDemoRuns(t *testing.T) {
	if err := run("", true, 32, 16, 2, 1, "cpu", "fail"); err != nil {
		t.Fatalf("run(-demo) = %v", err)
	}
}

func TestOpenCSV(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, text string
		wantLen    int
		wantErr    bool
	}{
		{"header and rows", "path,label\na.png,0\n/abs/b.png,2\n", 2, false},
		{"no header", "a.png,1\n", 1, false},
		{"bad label", "a.png,cat\n", 0, true},
		{"negative label", "a.png,-1\n", 0, true},
		{"three fields", "a.png,1,x\n", 0, true},
		{"empty", "path,label\n", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".csv")
			if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := openCSV(file)
			if (err != nil) != tc.wantErr {
				t.Fatalf("openCSV error = %v; want error %v", err, tc.wantErr)
			}
			if err == nil && d.Len() != tc.wantLen {
				t.Errorf("openCSV Len() = %d; want %d", d.Len(), tc.wantLen)
			}
			if tc.name == "empty" && !errors.Is(err, loaders.ErrEmpty) {
				t.Errorf("openCSV(empty) error = %v; want ErrEmpty", err)
			}
		})
	}
	d, err := openCSV(filepath.Join(dir, "header and rows.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.paths[0], filepath.Join(dir, "a.png"); got != want {
		t.Errorf("relative path = %s; want %s", got, want)
	}
}
