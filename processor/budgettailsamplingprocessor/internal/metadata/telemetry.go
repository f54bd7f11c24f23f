package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/internal/instruments"
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
	MetricReliefActive      = prefix + "stress_relief_active"
	MetricReliefLevel       = prefix + "stress_relief_level"
	MetricReliefSpans       = prefix + "stress_relief_spans"
	MetricReliefActivations = prefix + "stress_relief_activations"
	MetricReliefProbability = prefix + "stress_relief_probability"
	MetricReliefRecalled    = prefix + "stress_relief_recalled_spans"
	MetricReliefShed        = prefix + "stress_relief_shed_spans"
	MetricReliefEvicted     = prefix + "stress_relief_recall_evicted_spans"
	MetricReliefRecallBytes = prefix + "stress_relief_recall_bytes"
	MetricKeyFolds          = prefix + "baseline_key_folds"
	MetricDurableBytes      = prefix + "durable_log_bytes"
	MetricDurableReplayed   = prefix + "durable_replayed_spans"
	MetricDurableCorrupt    = prefix + "durable_corrupt_segments"
	MetricDurableFailures   = prefix + "durable_write_failures"
	MetricDurableSegments   = prefix + "durable_segments"
	MetricDurableTraces     = prefix + "durable_replayed_traces"
	MetricDurableSkipped    = prefix + "durable_skipped_bytes"
	MetricDurableSync       = prefix + "durable_sync_duration"
	MetricREDRequests       = prefix + "red_requests"
	MetricREDErrors         = prefix + "red_errors"
	MetricREDSpans          = prefix + "red_spans"
	MetricREDDuration       = prefix + "red_duration"
	MetricRepresented       = prefix + "represented"
	MetricRareCoverage      = prefix + "rare_coverage"
	MetricRareProbability   = prefix + "rare_probability"
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
	ReliefActive      metric.Int64ObservableGauge
	ReliefLevel       metric.Float64ObservableGauge
	ReliefSpans       metric.Int64ObservableCounter
	ReliefActivations metric.Int64ObservableCounter
	ReliefProb        metric.Float64ObservableGauge
	// ReliefRecalled, ReliefRecallEvicted and ReliefRecallBytes are
	// stress_relief.recall's.
	ReliefRecalled metric.Int64ObservableCounter
	// ReliefShed counts spans of buffered traces decided early on memory.
	ReliefShed          metric.Int64ObservableCounter
	ReliefRecallEvicted metric.Int64ObservableCounter
	ReliefRecallBytes   metric.Int64ObservableGauge
	KeyFolds            metric.Int64ObservableCounter
	// Durable* are the write-ahead log's (durable).
	DurableBytes    metric.Int64ObservableGauge
	DurableReplayed metric.Int64ObservableCounter
	DurableCorrupt  metric.Int64ObservableCounter
	DurableFailures metric.Int64ObservableCounter
	DurableSegments metric.Int64ObservableGauge
	DurableTraces   metric.Int64ObservableCounter
	DurableSkipped  metric.Int64ObservableCounter
	DurableSync     metric.Float64Histogram
	DecisionLatency metric.Float64Histogram
	REDRequests     metric.Int64Counter
	REDErrors       metric.Int64Counter
	REDSpans        metric.Int64Counter
	REDDuration     metric.Float64Histogram
	// Represented, RareCoverage and RareProb say how well the kept traces
	// stand for the traffic.
	Represented  metric.Float64ObservableGauge
	RareCoverage metric.Float64ObservableGauge
	RareProb     metric.Float64ObservableGauge
}

// Observables lists the instruments the processor's callback observes.
func (t *Telemetry) Observables() []metric.Observable {
	return []metric.Observable{t.Traces, t.Spans, t.Bytes, t.DroppedTooEarly, t.LateSpans, t.InvalidSpans,
		t.BufferedTraces, t.BufferedBytes, t.BufferedSpans, t.BudgetUtilization, t.EgressToBooked, t.BaselineProb, t.Peers, t.PriorityOverflow, t.ForwardFailed,
		t.RuleTraces, t.RuleErrors, t.ServiceBaseline,
		t.HandoffTraces, t.HandoffSpans, t.HandoffDecisions, t.HandoffProxied, t.HandoffFailed, t.RingMembers, t.RingChanges,
		t.ReliefActive, t.ReliefLevel, t.ReliefSpans, t.ReliefActivations, t.ReliefProb,
		t.ReliefRecalled, t.ReliefShed, t.ReliefRecallEvicted, t.ReliefRecallBytes, t.KeyFolds,
		t.DurableBytes, t.DurableReplayed, t.DurableCorrupt, t.DurableFailures, t.DurableSegments, t.DurableTraces, t.DurableSkipped,
		t.Represented, t.RareCoverage, t.RareProb}
}

// NewTelemetry creates the instruments on the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	m := set.MeterProvider.Meter(ScopeName)
	t := &Telemetry{Meter: m}
	b := instruments.New(m)
	t.Traces = b.Int64ObservableCounter(MetricTraces, "Traces decided, by decision (sampled, not_sampled) and reason (error, outlier, baseline, forced, span_limit, late_span, late_error, rule, stress_relief, rare).", "{trace}")
	t.Spans = b.Int64ObservableCounter(MetricSpans, "Spans decided, by decision.", "{span}")
	t.Bytes = b.Int64ObservableCounter(MetricBytes, "OTLP bytes decided, by decision.", "By")
	t.DroppedTooEarly = b.Int64ObservableCounter(MetricDroppedTooEarly, "Traces released without a policy decision (only when shutdown runs out of time).", "{trace}")
	t.LateSpans = b.Int64ObservableCounter(MetricLateSpans, "Spans that arrived after their trace was decided, by the decision they followed.", "{span}")
	t.InvalidSpans = b.Int64ObservableCounter(MetricInvalidSpans, "Invalid spans, by cause (zero_trace_id: dropped; missing_service_name, end_before_start, unparseable_tracestate, inconsistent_threshold, tracestate_truncated: processed; duplicate: a fragment delivered again, dropped).", "{span}")
	t.PriorityOverflow = b.Int64ObservableCounter(MetricPriorityOverflow, "Error and outlier traces not kept because priority traffic exceeded max_priority_share of the budget, by class (error, outlier).", "{trace}")
	t.ForwardFailed = b.Int64ObservableCounter(MetricForwardFailed, "Spans of kept traces the next consumer refused.", "{span}")
	t.RuleTraces = b.Int64ObservableCounter(MetricRuleTraces, "Traces decided by a rule, by rule and outcome (matched, kept, dropped).", "{trace}")
	t.RuleErrors = b.Int64ObservableCounter(MetricRuleErrors, "Rule conditions that failed to evaluate on a span, by rule (the condition counts as not matched).", "{span}")
	t.HandoffTraces = b.Int64ObservableCounter(MetricHandoffTraces, "Buffered traces handed over on a ring change or at shutdown, by direction (sent, received).", "{trace}")
	t.HandoffSpans = b.Int64ObservableCounter(MetricHandoffSpans, "Spans handed over (buffered traces and proxied fragments), by direction (sent, received).", "{span}")
	t.HandoffDecisions = b.Int64ObservableCounter(MetricHandoffDecisions, "Recent decisions sent to, or received from, a trace's new owner, by direction.", "{decision}")
	t.HandoffProxied = b.Int64ObservableCounter(MetricHandoffProxied, "Spans of traces this sampler does not own that it passed on to their owner.", "{span}")
	t.HandoffFailed = b.Int64ObservableCounter(MetricHandoffFailed, "Spans meant for a peer that stayed here, by cause (send: refused or timed out after retries; queue_full; peer_down: it failed a send in the last 2 s; malformed: received without readable handoff metadata). They are decided here, as without handoff.", "{span}")
	t.RingChanges = b.Int64ObservableCounter(MetricRingChanges, "Changes of the sampler ring (the gateways' routing) this sampler saw.", "{change}")
	t.RingMembers = b.Int64ObservableGauge(MetricRingMembers, "Samplers in the ring this sampler computes from peers_dns (with handoff only).", "{instance}")
	t.BufferedTraces = b.Int64ObservableGauge(MetricBufferedTraces, "Traces buffered awaiting a decision.", "{trace}")
	t.BufferedSpans = b.Int64ObservableGauge(MetricBufferedSpans, "Spans buffered awaiting a decision.", "{span}")
	t.BufferedBytes = b.Int64ObservableGauge(MetricBufferedBytes, "Bytes the buffer holds awaiting a decision (OTLP, S2-compressed with buffer_compression: s2).", "By")
	t.BudgetUtilization = b.Float64ObservableGauge(MetricBudgetUtilization, "Kept volume over this instance's share of the budget, over the last adjust interval.", "1")
	t.EgressToBooked = b.Float64ObservableGauge(MetricEgressToBooked, "OTLP bytes of kept traces as they leave (merged per resource and scope) over what their decisions booked (fragments as buffered), smoothed; 1 with a spans budget. Bytes and money budgets are held on what leaves.", "1")
	t.BaselineProb = b.Float64ObservableGauge(MetricBaselineProb, "Baseline sampling probability, volume-weighted over services.", "1")
	t.Peers = b.Int64ObservableGauge(MetricPeers, "Sampler instances the budget is divided among.", "{instance}")
	t.ServiceBaseline = b.Float64ObservableGauge(MetricServiceBaseline, "Baseline sampling probability of each fairness key the policy tracks (label service_name: the service name, or the baseline.keys values joined by |; at most baseline.max_keys, the rest as _other), conditional on what arrives.", "1")
	t.KeyFolds = b.Int64ObservableCounter(MetricKeyFolds, "Traces whose fairness key was booked under _other because baseline.max_keys keys were tracked already (by the policy, an interval's volumes, rare's table or red_metrics' table, whose bound is red_metrics.max_keys).", "{trace}")
	t.ReliefActive = b.Int64ObservableGauge(MetricReliefActive, "1 while stress relief decides new traces at arrival, with the reason (buffer_traces, buffer_bytes, arrival_rate, memory: the highest load level; always: mode always); 0 with reason none otherwise.", "")
	t.ReliefLevel = b.Float64ObservableGauge(MetricReliefLevel, "Load levels stress relief watches, as fractions of their bounds, by signal (buffer_traces, buffer_bytes, arrival_rate: the buffer the arrival rate would fill, memory: the live Go heap over 85% of memory_limit_mib).", "1")
	t.ReliefSpans = b.Int64ObservableCounter(MetricReliefSpans, "Spans of new traces decided at arrival by stress relief, by decision (sampled, not_sampled); later spans of those traces are late_spans.", "{span}")
	t.ReliefActivations = b.Int64ObservableCounter(MetricReliefActivations, "Times stress relief started.", "{activation}")
	t.ReliefRecalled = b.Int64ObservableCounter(MetricReliefRecalled, "Spans stress relief dropped at arrival and held (stress_relief.recall) that a later error of their trace recalled: sent on with the error, so the error trace leaves whole.", "{span}")
	t.ReliefShed = b.Int64ObservableCounter(MetricReliefShed, "Spans of buffered traces stress relief decided early (reason forced) because the heap was past its activation level of stress_relief.memory_limit_mib: the buffer is cut towards deactivation_level, oldest traces first.", "{span}")
	t.ReliefRecallEvicted = b.Int64ObservableCounter(MetricReliefEvicted, "Spans stress relief dropped and held that were let go unrecalled (older than stress_relief.recall.window, or no room in recall.max_bytes).", "{span}")
	t.ReliefRecallBytes = b.Int64ObservableGauge(MetricReliefRecallBytes, "Bytes of dropped fragments stress relief holds for a late error to recall.", "By")
	t.ReliefProb = b.Float64ObservableGauge(MetricReliefProbability, "Probability stress relief keeps a new trace's spans with (conditional on what arrived), from the budget share and the measured arrivals; errors are kept whatever it is.", "1")
	t.DurableBytes = b.Int64ObservableGauge(MetricDurableBytes, "Bytes of the buffer's write-ahead log on disk (durable.enabled).", "By")
	t.DurableReplayed = b.Int64ObservableCounter(MetricDurableReplayed, "Spans read back from the write-ahead log at start (buffered and undecided when the sampler stopped) and buffered again.", "{span}")
	t.DurableCorrupt = b.Int64ObservableCounter(MetricDurableCorrupt, "Log segments whose tail was torn or corrupt at start: the rest of the segment is skipped.", "{segment}")
	t.DurableFailures = b.Int64ObservableCounter(MetricDurableFailures, "Requests whose fragments could not be written to the log (disk full, I/O error, or the log at durable.max_bytes): their traces are decided at once, as a full buffer's are, before the request is acknowledged.", "{request}")
	t.DurableSegments = b.Int64ObservableGauge(MetricDurableSegments, "Segment files of the write-ahead log, the one being written included.", "{segment}")
	t.DurableTraces = b.Int64ObservableCounter(MetricDurableTraces, "Traces read back from the write-ahead log at start and buffered again.", "{trace}")
	t.DurableSkipped = b.Int64ObservableCounter(MetricDurableSkipped, "Bytes of torn or corrupt segment tails skipped at start.", "By")
	t.DurableSync = b.Float64Histogram(MetricDurableSync, "Time one flush of the write-ahead log to the device took (durable.sync interval or always).", "s",
		0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)
	t.DecisionLatency = b.Float64Histogram(MetricDecisionLatency, "Time from a trace's first span to its decision.", "s",
		0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 15, 20, 30, 60)
	t.REDRequests = b.Int64Counter(MetricREDRequests, "Traces decided (kept or not), by key (the fairness key; _other past red_metrics.max_keys): requests, from 100% of the traffic.", "{request}")
	t.REDErrors = b.Int64Counter(MetricREDErrors, "Traces decided with an error on any span, by key.", "{request}")
	t.REDSpans = b.Int64Counter(MetricREDSpans, "Spans of the traces decided and spans that followed a decision, by key: every span the tier received once.", "{span}")
	t.REDDuration = b.Float64Histogram(MetricREDDuration, "Duration of the traces decided (the root span's, else the longest span's), by key.", "s",
		0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
	t.Represented = b.Float64ObservableGauge(MetricRepresented, "Kept spans weighted by the th written on them (1/p) over the spans decided weighted by the th they arrived with, smoothed over about 10 minutes; by key (the fairness key, as red_metrics records it) and overall (no key). About 1 while the kept spans' th stands for the traffic; traces dropped by drop rules are left out of both. Needs red_metrics.enabled.", "1")
	t.RareCoverage = b.Float64ObservableGauge(MetricRareCoverage, "Share of the fairness keys decided in the last whole rare.interval (clock-aligned) that had a trace kept in it (with rare.interval set).", "1")
	t.RareProb = b.Float64ObservableGauge(MetricRareProbability, "Probability a key's first trace in rare.interval is kept with: 1 unless the rare traces need more of the budget than errors, keep rules and baseline.min_share leave them (with rare.interval set).", "1")
	return t, b.Err()
}
