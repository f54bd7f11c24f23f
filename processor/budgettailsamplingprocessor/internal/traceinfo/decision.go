package traceinfo // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"

import "github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"

// Decision is what became of a trace.
type Decision uint8

const (
	NotSampled Decision = iota
	Sampled
)

// DecisionNames are the decision metric attribute's values.
var DecisionNames = [...]string{"not_sampled", "sampled"}

// Reason is why a trace was decided as it was; a decided trace's class (the
// volume it is booked to) is one of Error, Outlier, Baseline, Rule and Rare.
type Reason uint8

const (
	ReasonError Reason = iota
	ReasonOutlier
	ReasonBaseline
	ReasonForced
	ReasonSpanLimit
	ReasonLateSpan
	ReasonLateError
	ReasonRule // decided by a rule; which one is in the rule metrics
	// ReasonRelief: decided at arrival by stress relief's threshold.
	ReasonRelief
	// ReasonRare: the first trace of its fairness key in rare.interval.
	ReasonRare
	NumReasons
)

// ReasonNames are the reason metric attribute's values.
var ReasonNames = [...]string{"error", "outlier", "baseline", "forced", "span_limit", "late_span", "late_error", "rule", "stress_relief", "rare"}

// Priority classes, for the overflow counter.
const (
	ClassError = iota
	ClassOutlier
	ClassRule // keep rules past their max_share
	NumClasses
)

// ClassNames are the overflow metric's class values.
var ClassNames = [...]string{"error", "outlier", "rule"}

// Decided is what the decision caches remember of a trace, so that its late
// spans follow the decision, are booked to the class and service the trace
// was decided in, and a late error can still be kept.
type Decided struct {
	Th      sampling.Threshold
	Service string // the key its volume is booked under
	Class   Reason // the volume class: error, outlier, baseline, rule or rare
	Rule    int16  // the slot of the rule that decided it, -1, or RuleDropped
	At      int64  // when, in Unix nanoseconds: recent decisions travel on handoff
	// Recent fingerprints the trace's last fragments, so that one delivered
	// again after the decision is dropped rather than followed twice.
	Recent [2]uint64
}

// RuleDropped is the Rule of a decision a peer's drop rule made: rule
// slots are each sampler's own (they follow its history of policy
// changes), so a decision handed over says only whether a drop rule made
// it, which its late spans must follow.
const RuleDropped int16 = -2

// Seen reports whether a late fragment with this fingerprint arrived
// before, and remembers it otherwise.
func (d *Decided) Seen(fp uint64) bool { return SeenBefore(d.Recent[:], fp) }

// InvalidCause is why a span was counted as invalid input.
type InvalidCause uint8

const (
	InvalidZeroTraceID InvalidCause = iota
	InvalidMissingServiceName
	InvalidEndBeforeStart
	InvalidUnparseableTracestate
	InvalidInconsistentThreshold
	InvalidTracestateTruncated
	InvalidDuplicate
	NumInvalidCauses
)

// InvalidNames are the invalid-spans metric's cause values.
var InvalidNames = [...]string{"zero_trace_id", "missing_service_name", "end_before_start",
	"unparseable_tracestate", "inconsistent_threshold", "tracestate_truncated", "duplicate"}
