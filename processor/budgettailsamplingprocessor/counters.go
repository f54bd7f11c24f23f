package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

// decision and reason index the counters.
type decision uint8

const (
	notSampled decision = iota
	sampled
)

var decisionNames = [...]string{"not_sampled", "sampled"}

type reason uint8

const (
	reasonError reason = iota
	reasonOutlier
	reasonBaseline
	reasonForced
	reasonSpanLimit
	reasonLateSpan
	reasonLateError
	reasonRule // decided by a rule; which one is in the rule metrics
	numReasons
)

var reasonNames = [...]string{"error", "outlier", "baseline", "forced", "span_limit", "late_span", "late_error", "rule"}

// priority classes, for the overflow counter.
const (
	classError = iota
	classOutlier
	classRule // keep rules past their max_share
	numClasses
)

var classNames = [...]string{"error", "outlier", "rule"}

type invalidCause uint8

const (
	invalidZeroTraceID invalidCause = iota
	invalidMissingServiceName
	invalidEndBeforeStart
	invalidUnparseableTracestate
	invalidInconsistentThreshold
	invalidTracestateTruncated
	invalidDuplicate
	numInvalidCauses
)

var invalidNames = [...]string{"zero_trace_id", "missing_service_name", "end_before_start",
	"unparseable_tracestate", "inconsistent_threshold", "tracestate_truncated", "duplicate"}

// counters are cumulative totals, kept per shard under its lock.
type counters struct {
	traces          [2][numReasons]int64
	spans           [2]int64
	bytes           [2]int64
	late            [2]int64
	invalid         [numInvalidCauses]int64
	droppedTooEarly int64
	overflow        [numClasses]int64
	rules           []ruleCounters // per rule
}

// ruleCounters are one rule's totals.
type ruleCounters struct {
	matched, kept, dropped, errors int64
}

// count records a decision, or a late fragment that followed one.
func (c *counters) count(d decision, r reason, spans int, bytes int64) {
	c.traces[d][r]++
	c.spans[d] += int64(spans)
	c.bytes[d] += bytes
}

// countLate records a late fragment that followed decision d.
func (c *counters) countLate(d decision, r reason, spans int, bytes int64) {
	c.late[d] += int64(spans)
	c.count(d, r, spans, bytes)
}

func (c *counters) add(o *counters) {
	for d := range c.traces {
		for r := range c.traces[d] {
			c.traces[d][r] += o.traces[d][r]
		}
		c.spans[d] += o.spans[d]
		c.bytes[d] += o.bytes[d]
		c.late[d] += o.late[d]
	}
	for i := range c.invalid {
		c.invalid[i] += o.invalid[i]
	}
	c.droppedTooEarly += o.droppedTooEarly
	for i := range c.overflow {
		c.overflow[i] += o.overflow[i]
	}
	if len(c.rules) < len(o.rules) {
		c.rules = append(c.rules, make([]ruleCounters, len(o.rules)-len(c.rules))...)
	}
	for i, r := range o.rules {
		c.rules[i].matched += r.matched
		c.rules[i].kept += r.kept
		c.rules[i].dropped += r.dropped
		c.rules[i].errors += r.errors
	}
}
