// Package progress shows long work (training epochs, packing, benchmarking) to a person: a live
// bar with rate and ETA when the output is a terminal (github.com/schollz/progressbar), plain
// periodic lines when it is not (logs, CI), and nothing when quiet.
//
// # Concurrency
//
// A Bar is safe for concurrent use.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Mode selects how progress is shown.
type Mode int

const (
	// Auto draws a bar on a terminal and plain lines otherwise.
	Auto Mode = iota
	// Lines prints a plain line at most every Interval and at the end.
	Lines
	// Quiet shows nothing.
	Quiet
)

// Interval is how often Lines mode prints.
const Interval = 2 * time.Second

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Bar tracks one unit of long work of known size (total > 0) in some unit ("img", "step").
type Bar struct {
	mu     sync.Mutex
	w      io.Writer
	mode   Mode
	desc   string
	unit   string
	total  int64
	n      int64
	start  time.Time
	last   time.Time
	bar    *progressbar.ProgressBar
	done   bool
	suffix string
}

// New starts a bar on w. In Auto mode it draws a live bar if w is a terminal, else plain lines.
func New(w io.Writer, mode Mode, desc, unit string, total int64) *Bar {
	b := &Bar{w: w, mode: mode, desc: desc, unit: unit, total: total, start: time.Now()}
	b.last = b.start
	if mode == Auto {
		if IsTerminal(w) {
			b.bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowCount(),
				progressbar.OptionShowIts(),
				progressbar.OptionSetItsString(unit),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetWidth(30),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
			)
		} else {
			b.mode = Lines
		}
	}
	return b
}

// SetSuffix sets a short status shown after the counts (e.g. "loss 0.1234").
func (b *Bar) SetSuffix(s string) {
	b.mu.Lock()
	b.suffix = s
	if b.bar != nil {
		b.bar.Describe(b.desc + " " + s)
	}
	b.mu.Unlock()
}

// Add records n more units done.
func (b *Bar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(n)
	switch {
	case b.bar != nil:
		_ = b.bar.Add(n)
	case b.mode == Lines:
		if now := time.Now(); now.Sub(b.last) >= Interval {
			b.last = now
			b.line(now)
		}
	}
}

// Finish ends the bar; Lines mode prints a final line. Calling it twice is harmless.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	switch {
	case b.bar != nil:
		if b.n < b.total {
			_ = b.bar.Finish()
		}
	case b.mode == Lines:
		b.line(time.Now())
	}
}

func (b *Bar) line(now time.Time) {
	el := now.Sub(b.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(b.n) / el
	}
	eta := ""
	if rate > 0 && b.n < b.total {
		eta = fmt.Sprintf(", eta %s", (time.Duration(float64(b.total-b.n)/rate) * time.Second).Round(time.Second))
	}
	suffix := ""
	if b.suffix != "" {
		suffix = ", " + b.suffix
	}
	fmt.Fprintf(b.w, "%s: %d/%d %s (%3.0f%%), %.0f %s/s%s%s\n", b.desc, b.n, b.total, b.unit,
		100*float64(b.n)/float64(max(b.total, 1)), rate, b.unit, eta, suffix)
}
