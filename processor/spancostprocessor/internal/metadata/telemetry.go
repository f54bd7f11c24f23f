package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/internal/instruments"
)

// Metric names, exactly as the collector's Prometheus endpoint shows them:
// the collector adds no type or unit suffix, so counters carry `_total` in
// their instrument name.
const (
	MetricSpans                = "otelcol_processor_span_cost_spans"
	MetricBytes                = "otelcol_processor_span_cost_bytes"
	MetricRepresentedSpans     = "otelcol_processor_span_cost_represented_spans"
	MetricCost                 = "otelcol_processor_span_cost_cost"
	MetricProjectedMonthlyCost = "otelcol_processor_span_cost_projected_monthly_cost"
	MetricBudgetUtilization    = "otelcol_processor_span_cost_budget_utilization"
	MetricMonthlyBudget        = "otelcol_processor_span_cost_monthly_budget"
	MetricSeriesOverflow       = "otelcol_processor_span_cost_series_overflow"
	MetricInvalidTracestate    = "otelcol_processor_span_cost_invalid_tracestate"
)

// Telemetry holds the processor's instruments. Per-series figures are
// observable: the hot path only adds to in-memory totals, and the totals are
// read when the collector's metric reader collects.
type Telemetry struct {
	Meter                metric.Meter
	Spans                metric.Int64ObservableCounter
	Bytes                metric.Int64ObservableCounter
	RepresentedSpans     metric.Float64ObservableCounter
	Cost                 metric.Float64ObservableCounter
	ProjectedMonthlyCost metric.Float64ObservableGauge
	BudgetUtilization    metric.Float64ObservableGauge
	MonthlyBudget        metric.Float64ObservableGauge
	SeriesOverflow       metric.Int64Counter
	InvalidTracestate    metric.Int64Counter
}

// NewTelemetry creates the instruments on the collector's meter provider.
func NewTelemetry(set component.TelemetrySettings, currency string) (*Telemetry, error) {
	m := set.MeterProvider.Meter(ScopeName)
	t := &Telemetry{Meter: m}
	b := instruments.New(m)
	t.Spans = b.Int64ObservableCounter(MetricSpans, "Spans metered, per stage and dimension set.", "{span}")
	t.Bytes = b.Int64ObservableCounter(MetricBytes, "OTLP protobuf bytes metered, including each span's share of its resource and scope.", "By")
	t.RepresentedSpans = b.Float64ObservableCounter(MetricRepresentedSpans, "Spans represented by the metered spans once sampling weights (OTEP 235 th, sampling.adjusted_count) are applied.", "{span}")
	t.Cost = b.Float64ObservableCounter(MetricCost, "Money the metered spans cost downstream, in "+currency+".", "{"+currency+"}")
	t.ProjectedMonthlyCost = b.Float64ObservableGauge(MetricProjectedMonthlyCost, "Monthly spend projected from the rate over the projection window, in "+currency+".", "{"+currency+"}")
	t.BudgetUtilization = b.Float64ObservableGauge(MetricBudgetUtilization, "Projected monthly spend of a service, summed over its series on this instance, divided by its monthly budget (services with a budget). A tier of N instances each sees about 1/N: compare the tier's sum (the shipped recording rules do).", "1")
	t.MonthlyBudget = b.Float64ObservableGauge(MetricMonthlyBudget, "A service's configured monthly budget, in "+currency+" (services with a budget).", "{"+currency+"}")
	t.SeriesOverflow = b.Int64Counter(MetricSeriesOverflow, "Spans attributed to the _other series because max_series distinct dimension sets were already tracked.", "{span}")
	t.InvalidTracestate = b.Int64Counter(MetricInvalidTracestate, "Spans whose tracestate could not be parsed; they are weighted 1.", "{span}")
	return t, b.Err()
}
