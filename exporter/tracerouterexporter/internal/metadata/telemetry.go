package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names, as metadata.yaml declares them (the Prometheus
// endpoint adds _total to counters).
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

// NewTelemetry creates the instruments (generated from metadata.yaml) on
// the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	tb, err := NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		Backends:      tb.ExporterTraceRouterBackends,
		Bytes:         tb.ExporterTraceRouterBytes,
		InvalidSpans:  tb.ExporterTraceRouterInvalidSpans,
		Rejected:      tb.ExporterTraceRouterRejectedSpans,
		Rerouted:      tb.ExporterTraceRouterReroutedSpans,
		ResolveFailed: tb.ExporterTraceRouterResolveFailures,
		RingChanges:   tb.ExporterTraceRouterRingChanges,
		SendFailed:    tb.ExporterTraceRouterSendFailedSpans,
		Spans:         tb.ExporterTraceRouterSpans,
		Undecodable:   tb.ExporterTraceRouterUndecodableSpans,
	}, nil
}
