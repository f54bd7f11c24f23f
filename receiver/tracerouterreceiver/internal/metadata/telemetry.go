package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/internal/instruments"
)

// Instrument names (the Prometheus endpoint adds _total to counters).
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

// NewTelemetry creates the instruments on the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	b := instruments.New(set.MeterProvider.Meter(ScopeName))
	t := &Telemetry{
		Routed:     b.Int64Counter(MetricRouted, "Spans routed to the samplers from the request's encoding as received, never decoded.", "{span}"),
		ToPipeline: b.Int64Counter(MetricToPipeline, "Spans decoded and handed to the pipeline (memory_limiter, then the trace_router exporter's queue), by cause (send_failed: their sampler did not take them; held_off: their sampler is held off after failed sends; queue_full: their sampler's queue was full; not_indexed: a request the wire split does not read; no_route: no sampler known yet). Retried while the pipeline refuses.", "{span}"),
		Refused:    b.Int64Counter(MetricRefused, "Requests refused before routing, by cause (inflight: over max_inflight_bytes, retryable; malformed: not an OTLP trace request; too_large: over max_records_per_request, a span larger than a request to a sampler, or a request larger than max_inflight_bytes; empty: no span). All but inflight are answered InvalidArgument, not to be retried.", "{request}"),
		Lost:       b.Int64Counter(MetricLost, "Spans of accepted requests dropped: a sampler did not take them and the pipeline refused them permanently, or still refused them when shutdown's time was up, or they could not be decoded to go back to the pipeline.", "{span}"),
	}
	return t, b.Err()
}
