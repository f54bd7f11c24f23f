package shadow // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/shadow"

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// secondsPerDay turns a rate into a day's volume.
const secondsPerDay = 86400

// Observe reports the candidate's figures at now (Unix nanoseconds),
// labelled policy=shadow.
func (s *Shadow) Observe(t *metadata.Telemetry, o metric.Observer, now int64) {
	if s != nil {
		Observe(t, o, "shadow", s.Tally(), s.Policy(), s.Share(), s.cover, now)
	}
}

// Observe reports one policy's figures, labelled policy=name: what it
// keeps (tally), its utilization and its projected day (pol's utilization
// of share, this instance's part of its budget), and its rare-path
// coverage in the last whole interval (cover; nil with rare off).
func Observe(t *metadata.Telemetry, o metric.Observer, name string, tally Tally, pol *policy.Policy, share float64, cover *rare.Tracker, now int64) {
	label := attribute.String("policy", name)
	for d := range tally.Spans {
		decision := attribute.String("decision", traceinfo.DecisionNames[d])
		o.ObserveInt64(t.PolicySpans, tally.Spans[d], metric.WithAttributeSet(attribute.NewSet(label, decision)))
		for r, n := range tally.Traces[d] {
			if n > 0 {
				o.ObserveInt64(t.PolicyTraces, n, metric.WithAttributeSet(attribute.NewSet(label, decision,
					attribute.String("reason", traceinfo.ReasonNames[r]))))
			}
		}
	}
	set := metric.WithAttributeSet(attribute.NewSet(label))
	o.ObserveFloat64(t.PolicyUtilization, pol.Utilization(), set)
	o.ObserveFloat64(t.PolicyProjected, pol.Utilization()*share*secondsPerDay, set)
	if cover != nil {
		if c, ok := cover.Coverage(now); ok {
			o.ObserveFloat64(t.PolicyRareCover, c, set)
		}
	}
}
