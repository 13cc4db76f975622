package tensorboard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/pyoracle"
)

type scalar struct {
	tag   string
	step  int64
	value float64
	wall  time.Time
}

func testScalars() []scalar {
	t0 := time.Unix(1764600000, 250_000_000)
	var s []scalar
	for i := range 40 {
		at := t0.Add(time.Duration(i) * 1500 * time.Millisecond)
		s = append(s, scalar{"train/loss", int64(i + 1), 2.5 / float64(i+1), at},
			scalar{"train/lr", int64(i + 1), 0.1 * math.Cos(float64(i)/40), at})
	}
	s = append(s, scalar{"epoch/test_accuracy", 40, 0.8125, t0}, scalar{"odd values", 0, -3.5e-8, t0},
		scalar{"odd values", 1 << 40, 1e30, t0}, scalar{"odd values", 7, 0, t0},
		scalar{strings.Repeat("long/", 40) + "tag", 3, 123.456, t0})
	return s
}

func writeEvents(t *testing.T, dir string, ss []scalar) string {
	t.Helper()
	w, err := Create(dir, time.Unix(1764600000, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if err := w.Scalar(s.tag, s.step, s.value, s.wall); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// records splits an event file into its records' data, checking the framing and both CRCs.
func records(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("%d bytes left: a truncated header", len(b))
		}
		n := binary.LittleEndian.Uint64(b)
		if got, want := binary.LittleEndian.Uint32(b[8:]), maskedCRC(b[:8]); got != want {
			t.Fatalf("length CRC = %#x; want %#x", got, want)
		}
		if uint64(len(b)-16) < n {
			t.Fatalf("record of %d bytes with %d left", n, len(b)-16)
		}
		data := b[12 : 12+n]
		if got, want := binary.LittleEndian.Uint32(b[12+n:]), maskedCRC(data); got != want {
			t.Fatalf("data CRC = %#x; want %#x", got, want)
		}
		out = append(out, data)
		b = b[16+n:]
	}
	return out
}

// TestMaskedCRC checks the CRC-32C and its mask against published values: CRC-32C("123456789")
// is 0xe3069283 (RFC 3720's check value), masked as TFRecord does.
func TestMaskedCRC(t *testing.T) {
	c := uint32(0xe3069283)
	if got, want := maskedCRC([]byte("123456789")), (c>>15|c<<17)+0xa282ead8; got != want {
		t.Errorf("maskedCRC(123456789) = %#x; want %#x", got, want)
	}
}

func TestFramingAndFirstEvent(t *testing.T) {
	path := writeEvents(t, t.TempDir(), testScalars())
	if !strings.Contains(filepath.Base(path), "tfevents") {
		t.Errorf("file name %s; TensorBoard loads files whose name has tfevents", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, b)
	if len(recs) != 1+len(testScalars()) {
		t.Fatalf("%d records; want %d", len(recs), 1+len(testScalars()))
	}
	if !bytes.HasSuffix(recs[0], []byte("\x1a\x0dbrain.Event:2")) {
		t.Errorf("first event %q; want file_version brain.Event:2", recs[0])
	}
}

func TestCreateRefusesBadDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{file, filepath.Join(file, "sub")} {
		if _, err := Create(d, time.Now()); !errors.Is(err, ErrLogDir) {
			t.Errorf("Create(%s) err = %v; want ErrLogDir", d, err)
		}
		if _, err := CreateCSV(d, "s.csv"); !errors.Is(err, ErrLogDir) {
			t.Errorf("CreateCSV(%s) err = %v; want ErrLogDir", d, err)
		}
	}
	if _, err := CreateCSV(dir, "f"); !errors.Is(err, ErrLogDir) {
		t.Errorf("CreateCSV over an existing file: err = %v; want ErrLogDir", err)
	}
}

func TestCSV(t *testing.T) {
	dir := t.TempDir()
	c, err := CreateCSV(dir, "scalars.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Scalar("a,b", 1, 1, time.Now()); err == nil {
		t.Error("a tag with a comma was accepted")
	}
	if err := c.Scalar("train/loss", 12, 0.25, time.Unix(100, 500_000_000)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "scalars.csv"))
	if got, want := string(b), "step,tag,value,wall_time\n12,train/loss,0.25,100.500000\n"; got != want {
		t.Errorf("CSV = %q; want %q", got, want)
	}
}

const readerScript = `
import sys, json
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
ea.Reload()
out = {tag: [[e.step, e.value, e.wall_time] for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}
json.dump(out, sys.stdout)
`

// readWithTensorBoard reads the event files of dir with TensorBoard's EventAccumulator.
func readWithTensorBoard(t *testing.T, dir string) map[string][][3]float64 {
	t.Helper()
	py := pyoracle.Python(t, "tensorboard")
	out, err := exec.Command(py, "-c", readerScript, dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s: %v\n%s", py, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got map[string][][3]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return got
}

// TestEventAccumulatorReads: TensorBoard's own reader finds every tag, step and value (as
// float32) and wall time written.
func TestEventAccumulatorReads(t *testing.T) {
	dir := t.TempDir()
	ss := testScalars()
	writeEvents(t, dir, ss)
	got := readWithTensorBoard(t, dir)
	want := map[string][]scalar{}
	for _, s := range ss {
		want[s.tag] = append(want[s.tag], s)
	}
	if len(got) != len(want) {
		t.Errorf("TensorBoard found %d tags; want %d", len(got), len(want))
	}
	for tag, ws := range want {
		gs := got[tag]
		if len(gs) != len(ws) {
			t.Errorf("%s: %d scalars; want %d", tag, len(gs), len(ws))
			continue
		}
		// EventAccumulator keeps a tag's events in the order written.
		for i, w := range ws {
			g := gs[i]
			wall := float64(w.wall.UnixNano()) / 1e9
			if int64(g[0]) != w.step || g[1] != float64(float32(w.value)) || math.Abs(g[2]-wall) > 1e-6 {
				t.Errorf("%s[%d] = step %v value %v wall %v; want %d, %v, %v", tag, i, g[0], g[1], g[2], w.step, float32(w.value), wall)
			}
		}
	}
}

// TestEventAccumulatorDropsBadCRC: a record whose data CRC (or data) is wrong is not read, so
// the reader does check what TestEventAccumulatorReads shows it accepting.
func TestEventAccumulatorDropsBadCRC(t *testing.T) {
	for _, corrupt := range []string{"crc", "data"} {
		t.Run(corrupt, func(t *testing.T) {
			dir := t.TempDir()
			ss := []scalar{{"x", 1, 1, time.Unix(5, 0)}, {"x", 2, 2, time.Unix(6, 0)}, {"x", 3, 3, time.Unix(7, 0)}}
			path := writeEvents(t, dir, ss)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if corrupt == "crc" {
				b[len(b)-1] ^= 0x40 // the last record's data CRC
			} else {
				b[len(b)-5] ^= 0x40 // a byte of the last record's value
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got := readWithTensorBoard(t, dir)["x"]
			if len(got) != 2 || got[0][0] != 1 || got[1][0] != 2 {
				t.Errorf("with a bad %s in the last record TensorBoard read %v; want steps 1 and 2 only", corrupt, got)
			}
		})
	}
}
