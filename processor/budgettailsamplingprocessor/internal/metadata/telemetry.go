package metadata

import (
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
	MetricDurableRecords    = prefix + "durable_corrupt_records"
	MetricDurableSyncFailed = prefix + "durable_sync_failures"
	MetricDurableRefused    = prefix + "durable_refused_requests"
	MetricForwardAbandoned  = prefix + "forward_abandoned_spans"
	MetricForwardPending    = prefix + "forward_pending_spans"
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
	MetricBudget            = prefix + "budget"
	MetricPolicyVersion     = prefix + "policy_version"
	MetricPolicyReloads     = prefix + "policy_reloads"
	MetricPolicyRejected    = prefix + "policy_file_rejected"
	MetricPolicySpans       = prefix + "policy_spans"
	MetricPolicyTraces      = prefix + "policy_traces"
	MetricPolicyProjected   = prefix + "policy_projected_daily"
	MetricPolicyUtilization = prefix + "policy_budget_utilization"
	MetricPolicyRareCover   = prefix + "policy_rare_coverage"
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
	DurableRecords  metric.Int64ObservableCounter
	DurableSyncFail metric.Int64ObservableCounter
	DurableRefused  metric.Int64ObservableCounter
	// ForwardAbandoned and ForwardPending follow what the next consumer
	// refused.
	ForwardAbandoned metric.Int64ObservableCounter
	ForwardPending   metric.Int64ObservableGauge
	DurableFailures  metric.Int64ObservableCounter
	DurableSegments  metric.Int64ObservableGauge
	DurableTraces    metric.Int64ObservableCounter
	DurableSkipped   metric.Int64ObservableCounter
	DurableSync      metric.Float64Histogram
	DecisionLatency  metric.Float64Histogram
	REDRequests      metric.Int64Counter
	REDErrors        metric.Int64Counter
	REDSpans         metric.Int64Counter
	REDDuration      metric.Float64Histogram
	// Represented, RareCoverage and RareProb say how well the kept traces
	// stand for the traffic.
	Represented  metric.Float64ObservableGauge
	RareCoverage metric.Float64ObservableGauge
	RareProb     metric.Float64ObservableGauge
	// Budget, PolicyVersion, PolicyReloads and PolicyRejected say which
	// policy runs (policy_file).
	Budget         metric.Float64ObservableGauge
	PolicyVersion  metric.Int64ObservableGauge
	PolicyReloads  metric.Int64ObservableCounter
	PolicyRejected metric.Int64ObservableGauge
	// Policy* are per policy (live, shadow).
	PolicySpans       metric.Int64ObservableCounter
	PolicyTraces      metric.Int64ObservableCounter
	PolicyProjected   metric.Float64ObservableGauge
	PolicyUtilization metric.Float64ObservableGauge
	PolicyRareCover   metric.Float64ObservableGauge
}

// Observables lists the instruments the processor's callback observes.
func (t *Telemetry) Observables() []metric.Observable {
	return []metric.Observable{t.Traces, t.Spans, t.Bytes, t.DroppedTooEarly, t.LateSpans, t.InvalidSpans,
		t.BufferedTraces, t.BufferedBytes, t.BufferedSpans, t.BudgetUtilization, t.EgressToBooked, t.BaselineProb, t.Peers, t.PriorityOverflow, t.ForwardFailed,
		t.RuleTraces, t.RuleErrors, t.ServiceBaseline,
		t.HandoffTraces, t.HandoffSpans, t.HandoffDecisions, t.HandoffProxied, t.HandoffFailed, t.RingMembers, t.RingChanges,
		t.ReliefActive, t.ReliefLevel, t.ReliefSpans, t.ReliefActivations, t.ReliefProb,
		t.ReliefRecalled, t.ReliefShed, t.ReliefRecallEvicted, t.ReliefRecallBytes, t.KeyFolds,
		t.DurableBytes, t.DurableReplayed, t.DurableCorrupt, t.DurableRecords, t.DurableSyncFail, t.DurableRefused, t.ForwardAbandoned, t.ForwardPending, t.DurableFailures, t.DurableSegments, t.DurableTraces, t.DurableSkipped,
		t.Represented, t.RareCoverage, t.RareProb, t.Budget, t.PolicyVersion, t.PolicyReloads, t.PolicyRejected,
		t.PolicySpans, t.PolicyTraces, t.PolicyProjected, t.PolicyUtilization, t.PolicyRareCover}
}

// NewTelemetry creates the instruments (generated from metadata.yaml) on
// the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	tb, err := NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		Meter:               Meter(set),
		KeyFolds:            tb.ProcessorBudgetTailSamplingBaselineKeyFolds,
		BaselineProb:        tb.ProcessorBudgetTailSamplingBaselineProbability,
		BudgetUtilization:   tb.ProcessorBudgetTailSamplingBudgetUtilization,
		Budget:              tb.ProcessorBudgetTailSamplingBudget,
		PolicyVersion:       tb.ProcessorBudgetTailSamplingPolicyVersion,
		PolicyReloads:       tb.ProcessorBudgetTailSamplingPolicyReloads,
		PolicyRejected:      tb.ProcessorBudgetTailSamplingPolicyFileRejected,
		PolicySpans:         tb.ProcessorBudgetTailSamplingPolicySpans,
		PolicyTraces:        tb.ProcessorBudgetTailSamplingPolicyTraces,
		PolicyProjected:     tb.ProcessorBudgetTailSamplingPolicyProjectedDaily,
		PolicyUtilization:   tb.ProcessorBudgetTailSamplingPolicyBudgetUtilization,
		PolicyRareCover:     tb.ProcessorBudgetTailSamplingPolicyRareCoverage,
		BufferedBytes:       tb.ProcessorBudgetTailSamplingBufferedBytes,
		BufferedSpans:       tb.ProcessorBudgetTailSamplingBufferedSpans,
		BufferedTraces:      tb.ProcessorBudgetTailSamplingBufferedTraces,
		Bytes:               tb.ProcessorBudgetTailSamplingBytes,
		DecisionLatency:     tb.ProcessorBudgetTailSamplingDecisionLatency,
		DurableCorrupt:      tb.ProcessorBudgetTailSamplingDurableCorruptSegments,
		DurableRecords:      tb.ProcessorBudgetTailSamplingDurableCorruptRecords,
		DurableSyncFail:     tb.ProcessorBudgetTailSamplingDurableSyncFailures,
		DurableRefused:      tb.ProcessorBudgetTailSamplingDurableRefusedRequests,
		ForwardAbandoned:    tb.ProcessorBudgetTailSamplingForwardAbandonedSpans,
		ForwardPending:      tb.ProcessorBudgetTailSamplingForwardPendingSpans,
		DurableBytes:        tb.ProcessorBudgetTailSamplingDurableLogBytes,
		DurableReplayed:     tb.ProcessorBudgetTailSamplingDurableReplayedSpans,
		DurableTraces:       tb.ProcessorBudgetTailSamplingDurableReplayedTraces,
		DurableSegments:     tb.ProcessorBudgetTailSamplingDurableSegments,
		DurableSkipped:      tb.ProcessorBudgetTailSamplingDurableSkippedBytes,
		DurableSync:         tb.ProcessorBudgetTailSamplingDurableSyncDuration,
		DurableFailures:     tb.ProcessorBudgetTailSamplingDurableWriteFailures,
		EgressToBooked:      tb.ProcessorBudgetTailSamplingEgressToBooked,
		ForwardFailed:       tb.ProcessorBudgetTailSamplingForwardFailedSpans,
		HandoffDecisions:    tb.ProcessorBudgetTailSamplingHandoffDecisions,
		HandoffFailed:       tb.ProcessorBudgetTailSamplingHandoffFailedSpans,
		HandoffProxied:      tb.ProcessorBudgetTailSamplingHandoffProxiedSpans,
		HandoffSpans:        tb.ProcessorBudgetTailSamplingHandoffSpans,
		HandoffTraces:       tb.ProcessorBudgetTailSamplingHandoffTraces,
		InvalidSpans:        tb.ProcessorBudgetTailSamplingInvalidSpans,
		LateSpans:           tb.ProcessorBudgetTailSamplingLateSpans,
		Peers:               tb.ProcessorBudgetTailSamplingPeers,
		PriorityOverflow:    tb.ProcessorBudgetTailSamplingPriorityOverflow,
		RareCoverage:        tb.ProcessorBudgetTailSamplingRareCoverage,
		RareProb:            tb.ProcessorBudgetTailSamplingRareProbability,
		REDDuration:         tb.ProcessorBudgetTailSamplingRedDuration,
		REDErrors:           tb.ProcessorBudgetTailSamplingRedErrors,
		REDRequests:         tb.ProcessorBudgetTailSamplingRedRequests,
		REDSpans:            tb.ProcessorBudgetTailSamplingRedSpans,
		Represented:         tb.ProcessorBudgetTailSamplingRepresented,
		RingChanges:         tb.ProcessorBudgetTailSamplingRingChanges,
		RingMembers:         tb.ProcessorBudgetTailSamplingRingMembers,
		RuleErrors:          tb.ProcessorBudgetTailSamplingRuleErrors,
		RuleTraces:          tb.ProcessorBudgetTailSamplingRuleTraces,
		ServiceBaseline:     tb.ProcessorBudgetTailSamplingServiceBaselineProbability,
		Spans:               tb.ProcessorBudgetTailSamplingSpans,
		ReliefActivations:   tb.ProcessorBudgetTailSamplingStressReliefActivations,
		ReliefActive:        tb.ProcessorBudgetTailSamplingStressReliefActive,
		ReliefLevel:         tb.ProcessorBudgetTailSamplingStressReliefLevel,
		ReliefProb:          tb.ProcessorBudgetTailSamplingStressReliefProbability,
		ReliefRecallBytes:   tb.ProcessorBudgetTailSamplingStressReliefRecallBytes,
		ReliefRecallEvicted: tb.ProcessorBudgetTailSamplingStressReliefRecallEvictedSpans,
		ReliefRecalled:      tb.ProcessorBudgetTailSamplingStressReliefRecalledSpans,
		ReliefShed:          tb.ProcessorBudgetTailSamplingStressReliefShedSpans,
		ReliefSpans:         tb.ProcessorBudgetTailSamplingStressReliefSpans,
		DroppedTooEarly:     tb.ProcessorBudgetTailSamplingTraceDroppedTooEarly,
		Traces:              tb.ProcessorBudgetTailSamplingTraces,
	}, nil
}
