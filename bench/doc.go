// Package bench holds the side-by-side benchmarks: our processors against
// contrib's tail_sampling and against the cost of decoding OTLP, on the
// same pre-built requests, in one run. See docs/BENCHMARKS.md.
package bench
