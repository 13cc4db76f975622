package profile

import (
	"context"
	"time"

	"github.com/stoke-ml/stoke/loaders"
)

// SampleBusy measures, every period until ctx ends, how many workers of each of a Loader's stages
// were busy and how busy the copy engine was since the previous sample, from stats (the Loader's
// Stats method), and then records the series in rec as counter tracks "busy workers: STAGE" and
// "copy engine busy". Run it on a goroutine of its own while the Loader runs; a new epoch's
// pipeline starts its stages' counts afresh.
func SampleBusy(ctx context.Context, rec *Recorder, stats func() loaders.Stats, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	type mark struct{ busy, elapsed time.Duration }
	prev := map[string]mark{}
	series := map[string]*counter{}
	var order []string
	add := func(name string, at time.Time, dt, busy, ceiling float64) {
		c := series[name]
		if c == nil {
			c = &counter{ceiling: ceiling}
			series[name] = c
			order = append(order, name)
		}
		c.at = append(c.at, at)
		c.dt = append(c.dt, dt)
		c.busy = append(c.busy, max(0, busy))
	}
	var prevCopy time.Duration
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			for _, name := range order {
				series[name].record(rec, name)
			}
			return
		case <-tick.C:
			// The tick's own time can be stale on a busy machine: take the time of the reading.
			st, now := stats(), time.Now()
			dt := float64(now.Sub(last))
			last = now
			if dt <= 0 {
				continue
			}
			for _, s := range st.Stages {
				m := prev[s.Name]
				if s.Elapsed < m.elapsed { // a new epoch's pipeline
					m = mark{}
				}
				prev[s.Name] = mark{s.Busy, s.Elapsed}
				add("busy workers: "+s.Name, now, dt, float64(s.Busy-m.busy), float64(s.Workers))
			}
			add("copy engine busy", now, dt, float64(st.CopyTime-prevCopy), 1)
			prevCopy = st.CopyTime
		}
	}
}

// counter is one sampled series: at each time, the busy time (summed over workers) reported in the
// dt before it. A stage's busy time is reported when an item ends, so a sample can hold work done
// during earlier ones: record moves what exceeds the ceiling (the stage's workers) times dt back to
// the samples before, where that work happened, keeping the total, and records busy/dt.
type counter struct {
	at       []time.Time
	dt, busy []float64 // nanoseconds
	ceiling  float64
}

func (c *counter) record(rec *Recorder, name string) {
	for i := len(c.busy) - 1; i > 0; i-- {
		if extra := c.busy[i] - c.ceiling*c.dt[i]; extra > 0 {
			c.busy[i-1] += extra
			c.busy[i] -= extra
		}
	}
	for i, at := range c.at {
		rec.Count(name, at, c.busy[i]/c.dt[i])
	}
}
