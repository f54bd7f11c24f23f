// Package otep235 reads and writes the OpenTelemetry sampling fields of the
// W3C tracestate (OTEP 235: th = threshold, rv = randomness) on pdata spans,
// on top of contrib's pkg/sampling.
package otep235

import (
	"strings"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// AdjustedCountAttribute is the span attribute older samplers record the
// weight in.
const AdjustedCountAttribute = "sampling.adjusted_count"

// WeightReader gives a span's sampling weight: how many spans it stands for.
// It remembers the last tracestate it parsed, because the spans of a trace
// share one. Not safe for concurrent use.
type WeightReader struct {
	lastTS      string
	lastWeight  float64
	lastInvalid bool
	lastHasTh   bool
}

// Weight is 1/p from the span's th, else its sampling.adjusted_count
// attribute, else 1. invalid reports a tracestate that could not be parsed
// (the weight then ignores it).
func (r *WeightReader) Weight(span ptrace.Span) (weight float64, invalid bool) {
	ts := span.TraceState().AsRaw()
	if ts != "" {
		if ts != r.lastTS {
			r.lastTS = ts
			r.lastWeight, r.lastHasTh, r.lastInvalid = parseWeight(ts)
		}
		if r.lastHasTh {
			return r.lastWeight, false
		}
		invalid = r.lastInvalid
	}
	if v, ok := span.Attributes().Get(AdjustedCountAttribute); ok {
		switch v.Type() {
		case pcommon.ValueTypeDouble:
			if w := v.Double(); w >= 1 {
				return w, invalid
			}
		case pcommon.ValueTypeInt:
			if w := v.Int(); w >= 1 {
				return float64(w), invalid
			}
		}
	}
	return 1, invalid
}

func parseWeight(ts string) (weight float64, hasTh, invalid bool) {
	w3c, err := sampling.NewW3CTraceState(ts)
	if err != nil {
		return 1, false, true
	}
	th, ok := w3c.OTelValue().TValueThreshold()
	if !ok {
		return 1, false, false
	}
	return th.AdjustedCount(), true, false
}

// Randomness is the trace's OTEP 235 randomness: an explicit rv in ts, else
// the trace ID's low 56 bits.
func Randomness(id pcommon.TraceID, ts string) sampling.Randomness {
	if strings.Contains(ts, "rv:") {
		if w3c, err := sampling.NewW3CTraceState(ts); err == nil {
			if rnd, ok := w3c.OTelValue().RValueRandomness(); ok {
				return rnd
			}
		}
	}
	return sampling.TraceIDToRandomness(id)
}

// WithThreshold returns ts with th set to th, keeping every other member.
// An existing stricter threshold is kept: sampling never raises a span's
// probability. A tracestate that cannot be parsed is replaced by ot=th only
// when it is empty; otherwise it is returned unchanged with ok=false.
func WithThreshold(ts string, th sampling.Threshold) (string, bool) {
	if ts == "" {
		return "ot=th:" + th.TValue(), true
	}
	w3c, err := sampling.NewW3CTraceState(ts)
	if err != nil {
		return ts, false
	}
	ot := w3c.OTelValue()
	if cur, ok := ot.TValueThreshold(); ok && sampling.ThresholdGreater(cur, th) {
		return ts, true
	}
	if err := ot.UpdateTValueWithSampling(th); err != nil {
		return ts, false
	}
	var sb strings.Builder
	if err := w3c.Serialize(&sb); err != nil {
		return ts, false
	}
	return sb.String(), true
}
