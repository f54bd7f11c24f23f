package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names, as metadata.yaml declares them.
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
	MetricBudgetsFileRejected  = "otelcol_processor_span_cost_budgets_file_rejected"
	MetricBudgetsFileReloads   = "otelcol_processor_span_cost_budgets_file_reloads"
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
	BudgetsFileRejected  metric.Int64ObservableGauge
	BudgetsFileReloads   metric.Int64ObservableCounter
}

// NewTelemetry creates the instruments (generated from metadata.yaml) on
// the collector's meter provider; money is in pricing.currency.
func NewTelemetry(set component.TelemetrySettings) (*Telemetry, error) {
	tb, err := NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		Meter:                Meter(set),
		BudgetUtilization:    tb.ProcessorSpanCostBudgetUtilization,
		BudgetsFileRejected:  tb.ProcessorSpanCostBudgetsFileRejected,
		BudgetsFileReloads:   tb.ProcessorSpanCostBudgetsFileReloads,
		Bytes:                tb.ProcessorSpanCostBytes,
		Cost:                 tb.ProcessorSpanCostCost,
		InvalidTracestate:    tb.ProcessorSpanCostInvalidTracestate,
		MonthlyBudget:        tb.ProcessorSpanCostMonthlyBudget,
		ProjectedMonthlyCost: tb.ProcessorSpanCostProjectedMonthlyCost,
		RepresentedSpans:     tb.ProcessorSpanCostRepresentedSpans,
		SeriesOverflow:       tb.ProcessorSpanCostSeriesOverflow,
		Spans:                tb.ProcessorSpanCostSpans,
	}, nil
}
