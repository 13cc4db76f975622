package loaders

import (
	"github.com/stoke-ml/stoke/gpu"
)

// The names of a Loader's stages, in Stats.Stages, in the spans its Config.Tracer receives and in
// package profile's reports: the four pipeline stages of every epoch, then the two spans that no
// pipeline stage reports by itself (each host-to-device copy, and the part of each transform span
// spent in Dataset.Sample). Code that looks a stage up by name uses these.
const (
	// SamplerStage issues the epoch's indices (or reads the stream) and takes a host slot per batch.
	SamplerStage = "sampler"
	// TransformStage reads, decodes and augments each sample, on Config.Workers workers: the stage
	// whose worker count is tunable.
	TransformStage = "transform"
	// CollateStage groups one slot's samples into a batch.
	CollateStage = "collate"
	// FeedStage compacts skipped samples away, runs Config.Collate and hands the slot to the
	// gpu.Feeder (the host side of the copy).
	FeedStage = "copy"
	// CopyStage names the spans of each host-to-device copy, timed with the feeder's events (the
	// device side: package profile's copy engine).
	CopyStage = "h2d copy"
	// ReadStage names the part of each transform span spent in Dataset.Sample.
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
