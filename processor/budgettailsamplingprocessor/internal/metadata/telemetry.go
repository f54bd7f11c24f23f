package metadata

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names, per OpenTelemetry's conventions: no type or unit suffix.
// The collector's Prometheus endpoint (configured with type and unit
// suffixes, pinned in every shipped config) adds them: a counter gets
// _total, the histogram _seconds, a ratio (unit 1) _ratio.
const (
	prefix                  = "otelcol_processor_budget_tail_sampling_"
	MetricTraces            = prefix + "traces"
	MetricSpans             = prefix + "spans"
	MetricBytes             = prefix + "bytes"
	MetricDroppedTooEarly   = prefix + "trace_dropped_too_early"
	MetricLateSpans         = prefix + "late_spans"
	MetricInvalidSpans      = prefix + "invalid_spans"
	MetricBufferedTraces    = prefix + "buffered_traces"
	MetricBufferedBytes     = prefix + "buffered_bytes"
	MetricBufferedSpans     = prefix + "buffered_spans"
	MetricBudgetUtilization = prefix + "budget_utilization"
	MetricEgressToBooked    = prefix + "egress_to_booked"
	MetricBaselineProb      = prefix + "baseline_probability"
	MetricPeers             = prefix + "peers"
	MetricPriorityOverflow  = prefix + "priority_overflow"
	MetricDecisionLatency   = prefix + "decision_latency"
	MetricForwardFailed     = prefix + "forward_failed_spans"
	MetricRuleTraces        = prefix + "rule_traces"
	MetricServiceBaseline   = prefix + "service_baseline_probability"
	MetricRuleErrors        = prefix + "rule_errors"
	MetricHandoffTraces     = prefix + "handoff_traces"
	MetricHandoffSpans      = prefix + "handoff_spans"
	MetricHandoffDecisions  = prefix + "handoff_decisions"
	MetricHandoffProxied    = prefix + "handoff_proxied_spans"
	MetricHandoffFailed     = prefix + "handoff_failed_spans"
	MetricRingMembers       = prefix + "ring_members"
	MetricRingChanges       = prefix + "ring_changes"
)

// Telemetry holds the processor's instruments. Counters are observable: the
// hot path adds to per-shard totals under the shard's lock, and the totals
// are read when the collector collects.
type Telemetry struct {
	Meter             metric.Meter
	Traces            metric.Int64ObservableCounter
	Spans             metric.Int64ObservableCounter
	Bytes             metric.Int64ObservableCounter
	DroppedTooEarly   metric.Int64ObservableCounter
	LateSpans         metric.Int64ObservableCounter
	InvalidSpans      metric.Int64ObservableCounter
	BufferedTraces    metric.Int64ObservableGauge
	BufferedBytes     metric.Int64ObservableGauge
	BufferedSpans     metric.Int64ObservableGauge
	BudgetUtilization metric.Float64ObservableGauge
	EgressToBooked    metric.Float64ObservableGauge
	BaselineProb      metric.Float64ObservableGauge
	Peers             metric.Int64ObservableGauge
	PriorityOverflow  metric.Int64ObservableCounter
	ForwardFailed     metric.Int64ObservableCounter
	RuleTraces        metric.Int64ObservableCounter
	ServiceBaseline   metric.Float64ObservableGauge
	RuleErrors        metric.Int64ObservableCounter
	HandoffTraces     metric.Int64ObservableCounter
	HandoffSpans      metric.Int64ObservableCounter
	HandoffDecisions  metric.Int64ObservableCounter
	HandoffProxied    metric.Int64ObservableCounter
	HandoffFailed     metric.Int64ObservableCounter
	RingMembers       metric.Int64ObservableGauge
	RingChanges       metric.Int64ObservableCounter
	DecisionLatency   metric.Float64Histogram
}

// Observables lists the instruments the processor's callback observes.
func (t *Telemetry) Observables() []metric.Observable {
	return []metric.Observable{t.Traces, t.Spans, t.Bytes, t.DroppedTooEarly, t.LateSpans, t.InvalidSpans,
		t.BufferedTraces, t.BufferedBytes, t.BufferedSpans, t.BudgetUtilization, t.EgressToBooked, t.BaselineProb, t.Peers, t.PriorityOverflow, t.ForwardFailed,
		t.RuleTraces, t.RuleErrors, t.ServiceBaseline,
		t.HandoffTraces, t.HandoffSpans, t.HandoffDecisions, t.HandoffProxied, t.HandoffFailed, t.RingMembers, t.RingChanges}
}

// NewTelemetry creates the instruments on the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	m := set.MeterProvider.Meter(ScopeName)
	t := &Telemetry{Meter: m}
	var errs, err error
	counter := func(name, desc, unit string) metric.Int64ObservableCounter {
		c, e := m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = errors.Join(errs, e)
		return c
	}
	t.Traces = counter(MetricTraces, "Traces decided, by decision (sampled, not_sampled) and reason (error, outlier, baseline, forced, span_limit, late_span, late_error).", "{trace}")
	t.Spans = counter(MetricSpans, "Spans decided, by decision.", "{span}")
	t.Bytes = counter(MetricBytes, "OTLP bytes decided, by decision.", "By")
	t.DroppedTooEarly = counter(MetricDroppedTooEarly, "Traces released without a policy decision (only when shutdown runs out of time).", "{trace}")
	t.LateSpans = counter(MetricLateSpans, "Spans that arrived after their trace was decided, by the decision they followed.", "{span}")
	t.InvalidSpans = counter(MetricInvalidSpans, "Invalid spans, by cause (zero_trace_id: dropped; missing_service_name, end_before_start, unparseable_tracestate, inconsistent_threshold, tracestate_truncated: processed; duplicate: a fragment delivered again, dropped).", "{span}")
	t.PriorityOverflow = counter(MetricPriorityOverflow, "Error and outlier traces not kept because priority traffic exceeded max_priority_share of the budget, by class (error, outlier).", "{trace}")
	t.ForwardFailed = counter(MetricForwardFailed, "Spans of kept traces the next consumer refused.", "{span}")
	t.RuleTraces = counter(MetricRuleTraces, "Traces decided by a rule, by rule and outcome (matched, kept, dropped).", "{trace}")
	t.RuleErrors = counter(MetricRuleErrors, "Rule conditions that failed to evaluate on a span, by rule (the condition counts as not matched).", "{span}")
	t.HandoffTraces = counter(MetricHandoffTraces, "Buffered traces handed over on a ring change or at shutdown, by direction (sent, received).", "{trace}")
	t.HandoffSpans = counter(MetricHandoffSpans, "Spans handed over (buffered traces and proxied fragments), by direction (sent, received).", "{span}")
	t.HandoffDecisions = counter(MetricHandoffDecisions, "Recent decisions sent to, or received from, a trace's new owner, by direction.", "{decision}")
	t.HandoffProxied = counter(MetricHandoffProxied, "Spans of traces this sampler does not own that it passed on to their owner.", "{span}")
	t.HandoffFailed = counter(MetricHandoffFailed, "Spans meant for a peer that stayed here, by cause (send: refused or timed out after retries; queue_full; peer_down: it failed a send in the last 2 s; malformed: received without readable handoff metadata). They are decided here, as without handoff.", "{span}")
	t.RingChanges = counter(MetricRingChanges, "Changes of the sampler ring (the gateways' routing) this sampler saw.", "{change}")
	t.RingMembers, err = m.Int64ObservableGauge(MetricRingMembers, metric.WithDescription("Samplers in the ring this sampler computes from peers_dns (with handoff only)."), metric.WithUnit("{instance}"))
	errs = errors.Join(errs, err)
	t.BufferedTraces, err = m.Int64ObservableGauge(MetricBufferedTraces, metric.WithDescription("Traces buffered awaiting a decision."), metric.WithUnit("{trace}"))
	errs = errors.Join(errs, err)
	t.BufferedSpans, err = m.Int64ObservableGauge(MetricBufferedSpans, metric.WithDescription("Spans buffered awaiting a decision."), metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	t.BufferedBytes, err = m.Int64ObservableGauge(MetricBufferedBytes, metric.WithDescription("Bytes the buffer holds awaiting a decision (OTLP, S2-compressed with buffer_compression: s2)."), metric.WithUnit("By"))
	errs = errors.Join(errs, err)
	t.BudgetUtilization, err = m.Float64ObservableGauge(MetricBudgetUtilization, metric.WithDescription("Kept volume over this instance's share of the budget, over the last adjust interval."), metric.WithUnit("1"))
	errs = errors.Join(errs, err)
	t.EgressToBooked, err = m.Float64ObservableGauge(MetricEgressToBooked, metric.WithDescription("OTLP bytes of kept traces as they leave (merged per resource and scope) over what their decisions booked (fragments as buffered), smoothed; 1 with a spans budget. Bytes and money budgets are held on what leaves."), metric.WithUnit("1"))
	errs = errors.Join(errs, err)
	t.BaselineProb, err = m.Float64ObservableGauge(MetricBaselineProb, metric.WithDescription("Baseline sampling probability, volume-weighted over services."), metric.WithUnit("1"))
	errs = errors.Join(errs, err)
	t.Peers, err = m.Int64ObservableGauge(MetricPeers, metric.WithDescription("Sampler instances the budget is divided among."), metric.WithUnit("{instance}"))
	errs = errors.Join(errs, err)
	t.ServiceBaseline, err = m.Float64ObservableGauge(MetricServiceBaseline, metric.WithDescription("Baseline sampling probability of each service the policy tracks (at most max_services, the rest as _other), conditional on what arrives."), metric.WithUnit("1"))
	errs = errors.Join(errs, err)
	t.DecisionLatency, err = m.Float64Histogram(MetricDecisionLatency, metric.WithDescription("Time from a trace's first span to its decision."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 15, 20, 30, 60))
	errs = errors.Join(errs, err)
	return t, errs
}
