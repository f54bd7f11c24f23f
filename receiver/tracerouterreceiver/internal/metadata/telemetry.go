package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names, as metadata.yaml declares them (the Prometheus
// endpoint adds _total to counters).
const (
	prefix           = "otelcol_receiver_trace_router_"
	MetricRouted     = prefix + "routed_spans"
	MetricToPipeline = prefix + "pipeline_spans"
	MetricRefused    = prefix + "refused_requests"
	MetricLost       = prefix + "dropped_spans"
)

// Telemetry holds the receiver's instruments.
type Telemetry struct {
	Routed     metric.Int64Counter
	ToPipeline metric.Int64Counter
	Refused    metric.Int64Counter
	Lost       metric.Int64Counter
}

// NewTelemetry creates the instruments (generated from metadata.yaml) on
// the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	tb, err := NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		Lost:       tb.ReceiverTraceRouterDroppedSpans,
		ToPipeline: tb.ReceiverTraceRouterPipelineSpans,
		Refused:    tb.ReceiverTraceRouterRefusedRequests,
		Routed:     tb.ReceiverTraceRouterRoutedSpans,
	}, nil
}
