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
	sink
	rec []byte // the record being built: header, then the event
}

// sink is a buffered file that keeps its first error.
type sink struct {
	f    *os.File
	w    *bufio.Writer
	path string
	err  error
}

func newSink(f *os.File) sink { return sink{f: f, w: bufio.NewWriter(f), path: f.Name()} }

func (s *sink) write(b []byte) error {
	if s.err == nil {
		if _, err := s.w.Write(b); err != nil {
			s.err = fmt.Errorf("tensorboard: writing %s: %w", s.path, err)
		}
	}
	return s.err
}

// Path returns the file's path.
func (s *sink) Path() string { return s.path }

// Flush writes what is buffered to the file (so that TensorBoard sees it).
func (s *sink) Flush() error {
	if s.err == nil {
		if err := s.w.Flush(); err != nil {
			s.err = fmt.Errorf("tensorboard: writing %s: %w", s.path, err)
		}
	}
	return s.err
}

// Close flushes and closes the file.
func (s *sink) Close() error {
	err := s.Flush()
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: closing %s: %w", s.path, cerr)
	}
	return err
}

// Create makes dir (and its parents) and opens a new event file in it, named as TensorBoard
// expects (events.out.tfevents.<seconds>.<host>.<pid>), whose first event is the file version.
// A dir that is a file, or that cannot be created or written, is an error wrapping ErrLogDir.
func Create(dir string, now time.Time) (*Writer, error) {
	f, err := createIn(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d", now.Unix(), hostname(), os.Getpid()))
	if err != nil {
		return nil, err
	}
	w := &Writer{sink: newSink(f)}
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
	return w.write(b)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// CSV writes the same scalars as rows of step,tag,value,wall_time (seconds since 1970).
type CSV struct {
	sink
	row []byte
}

// CreateCSV makes dir and creates the file name in it (an existing one is an error, as for
// Create) with its header row.
func CreateCSV(dir, name string) (*CSV, error) {
	f, err := createIn(dir, name)
	if err != nil {
		return nil, err
	}
	c := &CSV{sink: newSink(f)}
	c.write([]byte("step,tag,value,wall_time\n"))
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
	return c.write(b)
}
