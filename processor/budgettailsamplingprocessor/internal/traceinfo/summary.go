package traceinfo // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"

import (
	"slices"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Summary is what the policy decides a trace on, gathered as spans arrive:
// per fragment while a request is split, then merged into the trace. It
// holds no pointer: a sampler buffers hundreds of thousands of them.
type Summary struct {
	Spans int
	// Dur is the root span's own duration, or, while no root has arrived,
	// the longest span's: one host's clock, so skew between hosts cannot
	// make a trace look slow. The trace's Names go with Dur.
	Dur time.Duration
	// TIn is the largest consistent th among the spans: the probability the
	// trace arrived with (head sampling); HasTIn false means 1.
	TIn sampling.Threshold
	// Rnd is an explicit rv, when a span carried one (HasRnd).
	Rnd sampling.Randomness
	// StampBytes estimates what writing th will add to the spans.
	StampBytes int64
	// Rules has a bit per rule some span of the trace matched.
	Rules uint64
	// FP fingerprints a fragment's spans (order-independent), so that the
	// same fragment delivered twice is recognised.
	FP uint64
	// The flags last, together.
	HasError bool
	HasRoot  bool
	HasTIn   bool
	HasRnd   bool
}

// Merge folds a fragment's summary in; it reports whether o brought the
// trace's root span, and whether the trace now takes o's names.
func (s *Summary) Merge(o *Summary) (rootArrived, takeNames bool) {
	first := s.Spans == 0
	s.Spans += o.Spans
	s.HasError = s.HasError || o.HasError
	s.StampBytes += o.StampBytes
	s.Rules |= o.Rules
	if o.HasTIn && (!s.HasTIn || sampling.ThresholdGreater(o.TIn, s.TIn)) {
		s.TIn, s.HasTIn = o.TIn, true
	}
	if o.HasRnd && !s.HasRnd {
		s.Rnd, s.HasRnd = o.Rnd, true
	}
	switch {
	case o.HasRoot && !s.HasRoot:
		s.HasRoot = true
		s.Dur = o.Dur
		return true, true
	case !s.HasRoot && (first || o.Dur > s.Dur):
		s.Dur = o.Dur
		return false, true
	}
	return false, false
}

// Randomness is the trace's OTEP 235 randomness: rv, else the trace ID's.
func (s *Summary) Randomness(id pcommon.TraceID) sampling.Randomness {
	if s.HasRnd {
		return s.Rnd
	}
	return sampling.TraceIDToRandomness(id)
}

// InThreshold is the threshold the trace arrived with.
func (s *Summary) InThreshold() sampling.Threshold {
	if s.HasTIn {
		return s.TIn
	}
	return sampling.AlwaysSampleThreshold
}

// Names are what the policy books a trace under: the root span's fairness
// key (baseline.keys; its service name by default) and outlier group, else
// the longest span's (the top-most one present when a proxy never exports
// the root). Interned: many traces share them.
type Names struct {
	Key   string
	Group string
}

// SeenBefore reports whether fp is among the recent fingerprints, newest
// first; if not, it becomes the newest and the oldest goes.
func SeenBefore(recent []uint64, fp uint64) bool {
	if slices.Contains(recent, fp) {
		return true
	}
	copy(recent[1:], recent[:len(recent)-1])
	recent[0] = fp
	return false
}
