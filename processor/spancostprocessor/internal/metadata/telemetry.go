package metadata

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
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
	var errs, err error
	t.Spans, err = m.Int64ObservableCounter(MetricSpans, metric.WithDescription("Spans metered, per stage and dimension set."), metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	t.Bytes, err = m.Int64ObservableCounter(MetricBytes, metric.WithDescription("OTLP protobuf bytes metered, including each span's share of its resource and scope."), metric.WithUnit("By"))
	errs = errors.Join(errs, err)
	t.RepresentedSpans, err = m.Float64ObservableCounter(MetricRepresentedSpans, metric.WithDescription("Spans represented by the metered spans once sampling weights (OTEP 235 th, sampling.adjusted_count) are applied."), metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	t.Cost, err = m.Float64ObservableCounter(MetricCost, metric.WithDescription("Money the metered spans cost downstream, in "+currency+"."), metric.WithUnit("{"+currency+"}"))
	errs = errors.Join(errs, err)
	t.ProjectedMonthlyCost, err = m.Float64ObservableGauge(MetricProjectedMonthlyCost, metric.WithDescription("Monthly spend projected from the rate over the projection window, in "+currency+"."), metric.WithUnit("{"+currency+"}"))
	errs = errors.Join(errs, err)
	t.BudgetUtilization, err = m.Float64ObservableGauge(MetricBudgetUtilization, metric.WithDescription("Projected monthly spend of a service, summed over its series on this instance, divided by its monthly budget (services with a budget). A tier of N instances each sees about 1/N: compare the tier's sum (the shipped recording rules do)."), metric.WithUnit("1"))
	errs = errors.Join(errs, err)
	t.MonthlyBudget, err = m.Float64ObservableGauge(MetricMonthlyBudget, metric.WithDescription("A service's configured monthly budget, in "+currency+" (services with a budget)."), metric.WithUnit("{"+currency+"}"))
	errs = errors.Join(errs, err)
	t.SeriesOverflow, err = m.Int64Counter(MetricSeriesOverflow, metric.WithDescription("Spans attributed to the _other series because max_series distinct dimension sets were already tracked."), metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	t.InvalidTracestate, err = m.Int64Counter(MetricInvalidTracestate, metric.WithDescription("Spans whose tracestate could not be parsed; they are weighted 1."), metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	return t, errs
}
