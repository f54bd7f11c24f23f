// Package traceinfo is the vocabulary the sampler's parts speak to each
// other: what is known of a trace before its decision (Summary, Names),
// probabilities with their OTEP 235 thresholds (Probability), and what a
// decision was (Decision, Reason, Decided).
//
// It owns plain values and their arithmetic only. It must not know how
// traces are buffered, how probabilities are chosen or where spans go: every
// other package of the sampler imports it, and it imports none of them.
package traceinfo
