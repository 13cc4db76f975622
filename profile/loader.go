package profile

import (
	"runtime"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// FromLoader builds the report of a Loader run from st, the Loader's Stats after it: the table of
// st.Stages with a row for the consumer (named consumer: the loop that took the st.Batches
// batches, waiting st.Wait of st.Elapsed for them), the copies and how busy they kept the copy
// engine, the share of the transform workers' time spent reading samples and the parts of the
// rest (decoding, resampling, each transform's pixel steps), the worker count
// AutoWorkers suggests for this machine's cores, and the verdict. The Loader's Stats hold the
// stages of its last epoch only: to profile several, sum each epoch's with an Accumulator and put
// its Stats in st.Stages (st.Read and st.Transform count every epoch, so the shares of reading
// and of the parts are right for a Loader that ran one epoch, or with an Accumulator's sum). Device is left empty (the table omits it); set it to name the device.
func FromLoader(st loaders.Stats, consumer string) *Report {
	r := &Report{
		Cores: runtime.GOMAXPROCS(0), Batches: st.Batches, Samples: st.Samples, Seconds: st.Elapsed.Seconds(),
		Stages:   append(FromPipeline(st.Stages), Consumer(consumer, st.Batches, st.Wait, st.Elapsed)),
		Copy:     Copy{Bytes: st.CopyBytes, Seconds: st.CopyTime.Seconds(), GBps: st.CopyGBps()},
		Stall:    st.StallFraction(),
		Pinned:   st.Pool.Pinned,
		Parallel: loaders.TransformStage,
	}
	if st.Batches > 0 {
		r.Batch = int((st.Samples + st.Batches - 1) / st.Batches)
	}
	if st.Elapsed > 0 {
		r.Copy.Busy = min(1, float64(st.CopyTime)/float64(st.Elapsed))
	}
	for _, s := range st.Stages {
		if s.Name == loaders.TransformStage {
			r.Workers = s.Workers
			if s.Busy > 0 {
				r.ReadShare = min(1, float64(st.Read)/float64(s.Busy))
				for _, t := range append([]transforms.Time{{Name: "read", Time: st.Read}}, st.Transform...) {
					r.Parts = append(r.Parts, Part{Name: t.Name, Seconds: t.Time.Seconds(), Share: min(1, float64(t.Time)/float64(s.Busy))})
				}
			}
		}
	}
	r.Conclude()
	return r
}
