// Package relief owns stress relief: when the sampler is overloaded it
// decides each new trace's spans at arrival instead of buffering them. It
// owns the mode, the state (active or not, and why) with its hysteresis,
// the load levels it is driven by, and the probability it keeps spans with,
// set from the budget and the measured arrival.
//
// It must not know spans, shards or the buffer: the glue measures what
// arrives and how full the buffer is, hands those figures in, and applies
// the decision it reads back.
package relief // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
