package loaders

import (
	"context"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/loadertest"
)

// TestStatsCompleteAfterEpoch checks that once an epoch's iterator has returned, Stats counts
// every byte the epoch copied (no copy still being accounted), with and without a compute stream
// (whose batches are yielded before their copies complete), over several epochs and a Skip-free
// short last batch.
func TestStatsCompleteAfterEpoch(t *testing.T) {
	loadertest.NoLeaks(t)
	dev, compute := cpuStream(t)
	for _, stream := range []gpu.Stream{nil, compute} {
		ds := rawDataset(50, 3, 4, 1) // 12-byte images; batches of 8: six of 8 and one of 2
		l := newLoader(t, ds, Config{Batch: 8, Workers: 3, Device: dev, Stream: stream})
		var want int64
		for e := range 3 {
			for b, err := range l.Epoch(context.Background(), e) {
				if err != nil {
					t.Fatal(err)
				}
				want += int64(b.N*b.Shape.Len() + 4*b.N)
				b.Release()
			}
			if st := l.Stats(); st.CopyBytes != want {
				t.Fatalf("stream %v, after epoch %d: Stats().CopyBytes = %d; want %d copied", stream != nil, e, st.CopyBytes, want)
			}
		}
	}
}
