package tensorboard

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ErrLogDir: the log directory cannot be created or written.
var ErrLogDir = errors.New("tensorboard: log directory not writable")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Writer appends events to one TensorBoard event file.
type Writer struct {
	f    *os.File
	w    *bufio.Writer
	path string
	rec  []byte // the record being built: header, then the event
	err  error
}

// Create makes dir (and its parents) and opens a new event file in it, named as TensorBoard
// expects (events.out.tfevents.<seconds>.<host>.<pid>), whose first event is the file version.
// A dir that is a file, or that cannot be created or written, is an error wrapping ErrLogDir.
func Create(dir string, now time.Time) (*Writer, error) {
	f, err := createIn(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d", now.Unix(), hostname(), os.Getpid()))
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, w: bufio.NewWriter(f), path: f.Name()}
	w.event(now, 0, func(b []byte) []byte {
		const version = "brain.Event:2"
		b = append(b, 3<<3|2, byte(len(version))) // file_version = 3
		return append(b, version...)
	})
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

func createIn(dir, name string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLogDir, dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrLogDir, dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLogDir, err)
	}
	return f, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	for i := range len(h) { // a name TensorBoard and file systems take as it is
		if c := h[i]; c == '/' || c == '\\' || c < ' ' {
			return "localhost"
		}
	}
	return h
}

// Path returns the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalar writes the scalar value of tag at step (TensorBoard's simple_value, a float32) with wall
// time now. An empty tag is an error.
func (w *Writer) Scalar(tag string, step int64, value float64, now time.Time) error {
	if tag == "" {
		return errors.New("tensorboard: empty tag")
	}
	return w.event(now, step, func(b []byte) []byte {
		// summary = 5 { value = 1 { tag = 1, simple_value = 2 } }
		vlen := 1 + uvarintLen(uint64(len(tag))) + len(tag) + 5
		b = append(b, 5<<3|2)
		b = binary.AppendUvarint(b, uint64(1+uvarintLen(uint64(vlen))+vlen))
		b = append(b, 1<<3|2)
		b = binary.AppendUvarint(b, uint64(vlen))
		b = append(b, 1<<3|2)
		b = binary.AppendUvarint(b, uint64(len(tag)))
		b = append(b, tag...)
		b = append(b, 2<<3|5)
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(value)))
	})
}

// event frames one Event (wall_time = 1, step = 2, then what body appends) as a TFRecord.
func (w *Writer) event(now time.Time, step int64, body func([]byte) []byte) error {
	if w.err != nil {
		return w.err
	}
	b := append(w.rec[:0], make([]byte, 12)...)
	b = append(b, 1<<3|1)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(now.UnixNano())/1e9))
	if step != 0 {
		b = append(b, 2<<3|0)
		b = binary.AppendUvarint(b, uint64(step))
	}
	b = body(b)
	data := b[12:]
	binary.LittleEndian.PutUint64(b, uint64(len(data)))
	binary.LittleEndian.PutUint32(b[8:], maskedCRC(b[:8]))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(data))
	w.rec = b
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("tensorboard: writing %s: %w", w.path, err)
	}
	return w.err
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Flush writes the buffered events to the file, so that TensorBoard sees them.
func (w *Writer) Flush() error {
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("tensorboard: writing %s: %w", w.path, err)
		}
	}
	return w.err
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: closing %s: %w", w.path, cerr)
	}
	return err
}

// CSV writes the same scalars as rows of step,tag,value,wall_time (seconds since 1970).
type CSV struct {
	f    *os.File
	w    *bufio.Writer
	path string
	row  []byte
	err  error
}

// CreateCSV makes dir and creates the file name in it (an existing one is an error, as for
// Create) with its header row.
func CreateCSV(dir, name string) (*CSV, error) {
	f, err := createIn(dir, name)
	if err != nil {
		return nil, err
	}
	c := &CSV{f: f, w: bufio.NewWriter(f), path: f.Name()}
	if _, err := c.w.WriteString("step,tag,value,wall_time\n"); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// Scalar writes one row. Tags are written as they are: use tags without commas, quotes or line
// breaks (an error otherwise).
func (c *CSV) Scalar(tag string, step int64, value float64, now time.Time) error {
	if c.err != nil {
		return c.err
	}
	for i := range len(tag) {
		if ch := tag[i]; ch == ',' || ch == '"' || ch == '\n' || ch == '\r' {
			return fmt.Errorf("tensorboard: tag %q: commas, quotes and line breaks are not allowed", tag)
		}
	}
	if tag == "" {
		return errors.New("tensorboard: empty tag")
	}
	b := strconv.AppendInt(c.row[:0], step, 10)
	b = append(b, ',')
	b = append(b, tag...)
	b = append(b, ',')
	b = strconv.AppendFloat(b, value, 'g', -1, 64)
	b = append(b, ',')
	b = strconv.AppendFloat(b, float64(now.UnixNano())/1e9, 'f', 6, 64)
	b = append(b, '\n')
	c.row = b
	if _, err := c.w.Write(b); err != nil {
		c.err = fmt.Errorf("tensorboard: writing %s: %w", c.path, err)
	}
	return c.err
}

// Flush writes the buffered rows to the file.
func (c *CSV) Flush() error {
	if c.err == nil {
		if err := c.w.Flush(); err != nil {
			c.err = fmt.Errorf("tensorboard: writing %s: %w", c.path, err)
		}
	}
	return c.err
}

// Close flushes and closes the file.
func (c *CSV) Close() error {
	err := c.Flush()
	if cerr := c.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: closing %s: %w", c.path, cerr)
	}
	return err
}
