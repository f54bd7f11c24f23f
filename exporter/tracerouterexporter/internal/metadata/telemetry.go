package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/internal/instruments"
)

// Instrument names (the Prometheus endpoint adds _total to counters).
const (
	prefix              = "otelcol_exporter_trace_router_"
	MetricSpans         = prefix + "spans"
	MetricBytes         = prefix + "bytes"
	MetricSendFailed    = prefix + "send_failed_spans"
	MetricRerouted      = prefix + "rerouted_spans"
	MetricRingChanges   = prefix + "ring_changes"
	MetricBackends      = prefix + "backends"
	MetricInvalidSpans  = prefix + "invalid_spans"
	MetricResolveFailed = prefix + "resolve_failures"
	MetricRejected      = prefix + "rejected_spans"
	MetricUndecodable   = prefix + "undecodable_spans"
)

// Telemetry holds the exporter's instruments.
type Telemetry struct {
	Spans         metric.Int64Counter
	Bytes         metric.Int64Counter
	SendFailed    metric.Int64Counter
	Rerouted      metric.Int64Counter
	RingChanges   metric.Int64Counter
	Backends      metric.Int64Gauge
	InvalidSpans  metric.Int64Counter
	ResolveFailed metric.Int64Counter
	Rejected      metric.Int64Counter
	Undecodable   metric.Int64Counter
}

// NewTelemetry creates the instruments on the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	b := instruments.New(set.MeterProvider.Meter(ScopeName))
	t := &Telemetry{
		Spans:         b.Int64Counter(MetricSpans, "Spans sent, by endpoint (a sampler).", "{span}"),
		Bytes:         b.Int64Counter(MetricBytes, "OTLP bytes sent, before gRPC compression, by endpoint.", "By"),
		SendFailed:    b.Int64Counter(MetricSendFailed, "Spans a sampler did not take (refused, unreachable or timed out), by endpoint; they go back to the exporter's queue.", "{span}"),
		Rerouted:      b.Int64Counter(MetricRerouted, "Spans handed back to the exporter's queue after a failed send, to be routed again on the ring as it is then.", "{span}"),
		RingChanges:   b.Int64Counter(MetricRingChanges, "Changes of the set of samplers the resolver found.", "{change}"),
		Backends:      b.Int64Gauge(MetricBackends, "Samplers in the ring.", "{backend}"),
		InvalidSpans:  b.Int64Counter(MetricInvalidSpans, "Spans not routed, by cause (zero_trace_id: no trace to route by, dropped, as the samplers would; no_backend: the ring was empty, returned to the queue).", "{span}"),
		ResolveFailed: b.Int64Counter(MetricResolveFailed, "DNS resolutions that failed (the last set of samplers stays).", "{resolution}"),
		Rejected:      b.Int64Counter(MetricRejected, "Spans a sampler took but reported rejected in its answer's partial success (not sent again, as OTLP asks), by endpoint.", "{span}"),
		Undecodable:   b.Int64Counter(MetricUndecodable, "Spans of a part a sampler did not take that could not be decoded to go back to the pipeline, and were dropped (the receiver's check should leave none).", "{span}"),
	}
	return t, b.Err()
}
