// Package profile turns what a data-loading run measured into what a person acts on: a table of
// the pipeline's stages (items, rate, workers, busy, starved and blocked shares), the share of the
// transform workers' time spent reading samples, the device side (bytes copied, copy bandwidth,
// the consumer's stall), a verdict naming the stage that bounds the run with the advice to fix
// it, the worker count AutoWorkers suggests (pipeline.SuggestWorkers, like tf.data's AUTOTUNE),
// and the run's timeline as a Chrome trace-event file (Perfetto, chrome://tracing) or an SVG
// picture. It is the engine of `stoke profile`, and a program profiles its own Loader the same
// way: a Recorder as loaders.Config.Tracer records the timeline, and FromLoader turns the
// Loader's Stats into a Report (see its example). Reports can also be built from any pipeline's
// statistics (FromPipeline, Consumer, Conclude).
//
// # Concurrency
//
// A Recorder is safe for concurrent use: workers report spans from their own goroutines. Reports,
// Timelines and the writers are plain values and functions.
//
// # Ownership
//
// Timeline returns copies; the writers keep nothing of what they are given.
package profile
