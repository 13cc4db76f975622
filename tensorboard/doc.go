// Package tensorboard writes training scalars as TensorBoard event files and as CSV.
//
// An event file is a sequence of TFRecords (a little-endian uint64 length, the masked CRC-32C of
// those 8 bytes, the data, the masked CRC-32C of the data) whose data are Event protocol buffers,
// encoded here by hand: the first carries file_version "brain.Event:2", each later one a wall
// time, a step and a Summary of one simple_value scalar. TensorBoard's EventAccumulator reads
// them (TestEventAccumulatorReads) and drops a record whose CRC does not match.
//
// # Logging a training run
//
// stoke train --log-dir DIR writes its scalars with this package; a program of yours logs from
// the trainer's Progress callback, which runs on one goroutine:
//
//	tb, err := tensorboard.Create("runs/exp1", time.Now())
//	if err != nil { return err }
//	defer tb.Close()
//	cfg := train.Config{Epochs: 10, Progress: func(p *train.Progress) {
//		step := int64((p.Epoch-1)*p.Steps + p.Step)
//		if p.Done {
//			step = int64(p.Epoch * p.Steps)
//			tb.Scalar("epoch/test_accuracy", step, p.Result.TestAcc, time.Now())
//			tb.Flush() // TensorBoard sees the epoch now
//			return
//		}
//		tb.Scalar("train/loss", step, p.Loss, time.Now())
//	}}
//
// then `tensorboard --logdir runs` shows them. Scalar keeps the first write error and returns it
// from every later call and from Close, so checking Close's error is enough.
//
// # Concurrency
//
// A Writer or a CSV is not safe for concurrent use: one goroutine (a trainer's Progress callback)
// writes it.
//
// # Ownership
//
// Create and CreateCSV open their file; Close flushes and closes it. The first error of a write
// is kept and returned by every later call and by Close.
package tensorboard
