package loaders

import (
	"github.com/stoke-ml/stoke/gpu"
)

// Stage names under which a Loader reports to Config.Tracer what no pipeline stage reports by
// itself: each host-to-device copy, and the part of each transform span spent in Dataset.Sample.
const (
	CopyStage = "h2d copy"
	ReadStage = "read"
)

// fed notes that the feeder's next Feed carries batch seq, so that its copy is traced under the
// batch's number. Only the copy stage feeds, one batch at a time.
func (l *Loader) fed(seq int) {
	if l.cfg.Tracer == nil {
		return
	}
	l.traceMu.Lock()
	l.feedSeq[l.feeds] = seq
	l.feeds++
	l.traceMu.Unlock()
}

// copied is the feeder's Copied: it reports each completed copy to the Tracer, lasting the copy's
// device time and ending when the feeder saw it complete.
func (l *Loader) copied(c gpu.Copy) {
	l.traceMu.Lock()
	seq, ok := l.feedSeq[c.Seq]
	delete(l.feedSeq, c.Seq)
	l.traceMu.Unlock()
	if ok {
		l.cfg.Tracer.Span(CopyStage, 0, int64(seq), c.Start, c.End)
	}
}
