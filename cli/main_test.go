package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
)

// stoke runs one command line in-process and returns stdout, stderr and the exit status.
func stoke(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// lastJSON decodes the last line of stdout into v.
func lastJSON(t *testing.T, stdout string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last line of stdout %q is not JSON: %v", lines[len(lines)-1], err)
	}
}

func TestUsageAndErrors(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, 2, "commands:", ""},
		{[]string{"--help"}, 0, "train", ""},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"bench", "--help"}, 0, "", "--data SPEC"},
		{[]string{"train", "--help"}, 0, "", "--model mlp|cnn"},
		{[]string{"devices", "--help"}, 0, "", "usage: stoke devices"},
		{[]string{"bench"}, 2, "", "stoke bench: --data is required"},
		{[]string{"bench", "--data", "mnist", "--on-error", "maybe"}, 2, "", `--on-error "maybe"`},
		{[]string{"bench", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"bench", "--data", "nosuch:thing"}, 1, "", "stoke bench: "},
		{[]string{"bench", "--data", "mnist", "--device", "tpu"}, 1, "", "unknown backend"},
		{[]string{"bench", "--data", "mnist", "--cache-size", "12X"}, 2, "", `invalid value "12X" for flag -cache-size`},
		{[]string{"train", "--optimizer", "lbfgs"}, 2, "", `--optimizer "lbfgs"`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := stoke(t, tc.args...)
			if code != tc.code {
				t.Errorf("stoke %v exit = %d; want %d (stderr %q)", tc.args, code, tc.code, errOut)
			}
			if !strings.Contains(out, tc.inStdout) {
				t.Errorf("stoke %v stdout = %q; want it to contain %q", tc.args, out, tc.inStdout)
			}
			if !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("stoke %v stderr = %q; want it to contain %q", tc.args, errOut, tc.inStderr)
			}
			if tc.code == 1 && strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
				t.Errorf("stoke %v stderr = %q; want one line", tc.args, errOut)
			}
		})
	}
}

func TestDevicesJSON(t *testing.T) {
	out, errOut, code := stoke(t, "devices", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		Backends []struct {
			Name    string
			Devices []struct {
				Backend string
				Memory  int64
			}
		}
	}
	lastJSON(t, out, &v)
	if strings.Count(out, "\n") != 1 {
		t.Errorf("devices --json -q stdout = %q; want only the JSON line", out)
	}
	if len(v.Backends) == 0 || v.Backends[0].Name != "cpu" || len(v.Backends[0].Devices) != 1 || v.Backends[0].Devices[0].Memory <= 0 {
		t.Errorf("devices = %+v; want the cpu backend with one device and its memory", v)
	}
}

// TestParseWithArgs: arguments may come before, between and after the flags, and after "--"
// everything is an argument.
func TestParseWithArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		top  int
	}{
		{[]string{"a.png", "--top", "2", "b.png"}, []string{"a.png", "b.png"}, 2},
		{[]string{"--top", "3", "-", "c.png"}, []string{"-", "c.png"}, 3},
		{[]string{"a.png", "--", "-x.png", "--top"}, []string{"a.png", "-x.png", "--top"}, 5},
	} {
		e := &env{name: "predict", stderr: io.Discard}
		fs := e.flags("", false)
		top := fs.Int("top", 5, "")
		got, err := e.parseWithArgs(fs, tc.args)
		if err != nil || !slices.Equal(got, tc.want) || *top != tc.top {
			t.Errorf("parseWithArgs(%q) = %q, --top %d, %v; want %q, %d", tc.args, got, *top, err, tc.want, tc.top)
		}
	}
}
