// Package tensorboard writes training scalars as TensorBoard event files and as CSV.
//
// An event file is a sequence of TFRecords (a little-endian uint64 length, the masked CRC-32C of
// those 8 bytes, the data, the masked CRC-32C of the data) whose data are Event protocol buffers,
// encoded here by hand: the first carries file_version "brain.Event:2", each later one a wall
// time, a step and a Summary of one simple_value scalar. TensorBoard's EventAccumulator reads
// them (TestEventAccumulatorReads) and drops a record whose CRC does not match.
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
