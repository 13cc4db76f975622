package loaders

import (
	"context"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/gpu"
)

// CopyStage is the stage name under which a Loader reports each host-to-device copy to
// Config.Tracer.
const CopyStage = "h2d copy"

// copyTrace is one fed batch whose copy is to be reported once it has completed.
type copyTrace struct {
	seq         int
	start, done gpu.Event
}

// tracingDevice gives the feeder a copy stream that notes the events the feeder records around
// each batch's copies, so that the Loader can time every copy with the feeder's own events. The
// feeder opens one stream only (its copy stream); buffers and events pass through unwrapped.
type tracingDevice struct {
	gpu.Device
	copy *tracingStream
}

func (d *tracingDevice) NewStream() (gpu.Stream, error) {
	s, err := d.Device.NewStream()
	if err != nil {
		return nil, err
	}
	d.copy = &tracingStream{Stream: s}
	return d.copy, nil
}

// tracingStream remembers the last two events recorded with copies enqueued between them.
type tracingStream struct {
	gpu.Stream

	mu          sync.Mutex
	last        gpu.Event // the latest event recorded
	copied      bool      // copies enqueued since last
	start, done gpu.Event // the events around the latest copies
}

var (
	_ gpu.Device = (*tracingDevice)(nil)
	_ gpu.Stream = (*tracingStream)(nil)
)

func (s *tracingStream) CopyH2D(dst gpu.Buffer, dstOff int, src []byte) error {
	err := s.Stream.CopyH2D(dst, dstOff, src)
	s.mu.Lock()
	s.copied = true
	s.mu.Unlock()
	return err
}

func (s *tracingStream) Record() (gpu.Event, error) {
	ev, err := s.Stream.Record()
	if err != nil {
		return ev, err
	}
	s.mu.Lock()
	if s.copied && s.last != nil {
		s.start, s.done = s.last, ev
	}
	s.last, s.copied = ev, false
	s.mu.Unlock()
	return ev, nil
}

// latest returns the events around the copies enqueued last: those of the batch just fed, since
// one goroutine (the copy stage) feeds batches one at a time.
func (s *tracingStream) latest() (start, done gpu.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start, s.done
}

// traceCopies reports each copy sent on e.copies once its events have completed: the span ends
// when the copy was seen to complete and lasts the device time between the feeder's events. It
// returns when e.copies is closed; a copy that fails, or whose wait ctx ends, is not reported.
func (e *epochRun) traceCopies(ctx context.Context) {
	for c := range e.copies {
		if c.done.Synchronize(ctx) != nil {
			continue
		}
		end := time.Now()
		d, err := c.done.Elapsed(c.start)
		if err != nil {
			continue
		}
		e.l.cfg.Tracer.Span(CopyStage, 0, int64(c.seq), end.Add(-d), end)
	}
}
