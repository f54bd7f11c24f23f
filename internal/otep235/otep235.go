// Package otep235 reads and writes the OpenTelemetry sampling fields of the
// W3C tracestate (OTEP 235: th = threshold, rv = randomness) on pdata spans.
// The `ot` member's value is parsed and written by contrib's pkg/sampling;
// the W3C list around it is handled here, so that tracestates at the W3C
// limits (32 members of up to 256 characters, longer than pkg/sampling's
// 1,024-character cap) keep their other members.
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

// maxMembers is the W3C limit on tracestate list members; maxOTelValue the
// OpenTelemetry limit on the ot member's value.
const (
	maxMembers   = 32
	maxOTelValue = 256
)

// Problem is what was wrong with a tracestate.
type Problem uint8

const (
	// OK: nothing.
	OK Problem = iota
	// Unparseable: the list or the ot member is malformed; it is ignored.
	Unparseable
	// Inconsistent: th rejects the trace's own randomness (rv, else the trace
	// ID), so the span cannot have been sampled at th; th is erased, as the
	// OpenTelemetry specification says.
	Inconsistent
	// Truncated: writing th made a 33rd member; the rightmost was dropped.
	Truncated
)

// Sampling is what a tracestate says about how a span was sampled.
type Sampling struct {
	Threshold     sampling.Threshold
	HasThreshold  bool
	Randomness    sampling.Randomness
	HasRandomness bool
}

// Parse reads ts's ot member. It does not check th against the randomness:
// Consistent does, per trace.
func Parse(ts string) (Sampling, Problem) {
	var s Sampling
	if ts == "" {
		return s, OK
	}
	ot, _, ok := splitMembers(ts)
	if !ok {
		return s, Unparseable
	}
	if ot == "" {
		return s, OK
	}
	otts, err := sampling.NewOpenTelemetryTraceState(ot)
	if err != nil {
		return s, Unparseable
	}
	s.Threshold, s.HasThreshold = otts.TValueThreshold()
	s.Randomness, s.HasRandomness = otts.RValueRandomness()
	return s, OK
}

// Consistent checks s's threshold against the trace's randomness; an
// inconsistent threshold is erased.
func (s Sampling) Consistent(id pcommon.TraceID) (Sampling, Problem) {
	if !s.HasThreshold {
		return s, OK
	}
	if !s.Threshold.ShouldSample(s.TraceRandomness(id)) {
		s.HasThreshold = false
		s.Threshold = sampling.AlwaysSampleThreshold
		return s, Inconsistent
	}
	return s, OK
}

// TraceRandomness is the trace's randomness: rv when present, else the trace
// ID's low 56 bits.
func (s Sampling) TraceRandomness(id pcommon.TraceID) sampling.Randomness {
	if s.HasRandomness {
		return s.Randomness
	}
	return sampling.TraceIDToRandomness(id)
}

// Downstream is the threshold of a proportional downstream sampler (OTEP 235):
// keeping an item that arrived sampled at tIn with conditional probability p
// gives T_out = P2T(p · T2P(T_in)). It is never below tIn.
func Downstream(tIn sampling.Threshold, p float64, precision int) sampling.Threshold {
	if !(p < 1) {
		return tIn
	}
	abs := max(p*tIn.Probability(), sampling.MinSamplingProbability)
	out, err := sampling.ProbabilityToThresholdWithPrecision(abs, precision)
	if err != nil || sampling.ThresholdLessThan(out, tIn) {
		return tIn
	}
	return out
}

// splitMembers finds the ot member's value and the other members of a W3C
// tracestate; ok is false when the list is malformed.
func splitMembers(ts string) (ot string, others []string, ok bool) {
	for rest := ts; rest != ""; {
		var m string
		if i := strings.IndexByte(rest, ','); i >= 0 {
			m, rest = rest[:i], rest[i+1:]
		} else {
			m, rest = rest, ""
		}
		m = strings.Trim(m, " \t")
		if m == "" {
			continue // W3C allows empty list members
		}
		eq := strings.IndexByte(m, '=')
		if eq <= 0 || !validKey(m[:eq]) || !validValue(m[eq+1:]) {
			return "", nil, false
		}
		if m[:eq] == "ot" {
			ot = m[eq+1:]
			continue
		}
		others = append(others, m)
	}
	return ot, others, true
}

func validKey(k string) bool {
	if len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/' || c == '@') {
			return false
		}
	}
	return true
}

func validValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// WithThreshold returns ts with th written into its ot member, which moves to
// the front (the W3C rule for a modified member), every other member kept.
// An existing stricter threshold is kept (sampling never raises a span's
// probability) unless it is inconsistent with the trace's randomness (rv,
// else traceRnd): such a th is erased. A malformed list is replaced by ot=th alone and a malformed ot
// member by a fresh one (Unparseable); a 33rd member is dropped (Truncated).
func WithThreshold(ts string, th sampling.Threshold, traceRnd sampling.Randomness) (string, Problem) {
	fresh := "ot=th:" + th.TValue()
	if ts == "" {
		return fresh, OK
	}
	ot, others, ok := splitMembers(ts)
	if !ok {
		return fresh, Unparseable
	}
	problem := OK
	head := fresh
	if ot != "" {
		otts, err := sampling.NewOpenTelemetryTraceState(ot)
		if err != nil {
			problem = Unparseable
		} else {
			rnd := traceRnd
			if r, ok := otts.RValueRandomness(); ok {
				rnd = r
			}
			cur, has := otts.TValueThreshold()
			if has && !cur.ShouldSample(rnd) {
				otts.ClearTValue()
				has = false
			}
			if !has || !sampling.ThresholdGreater(cur, th) {
				_ = otts.UpdateTValueWithSampling(th) // cannot fail: th is not below cur
			}
			var sb strings.Builder
			sb.WriteString("ot=")
			if err := otts.Serialize(&sb); err == nil {
				head = sb.String()
			}
			if len(head)-len("ot=") > maxOTelValue {
				// Other ot fields leave no room for th: keep rv and th.
				head = fresh
				if rv := otts.RValue(); rv != "" {
					head = "ot=rv:" + rv + ";th:" + th.TValue()
				}
				problem = max(problem, Truncated)
			}
		}
	}
	if len(others) >= maxMembers {
		others = others[:maxMembers-1]
		problem = max(problem, Truncated)
	}
	if len(others) == 0 {
		return head, problem
	}
	return head + "," + strings.Join(others, ","), problem
}

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
	s, problem := Parse(ts)
	if problem != OK {
		return 1, false, true
	}
	if !s.HasThreshold {
		return 1, false, false
	}
	return s.Threshold.AdjustedCount(), true, false
}
