package spancostprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor/internal/metadata"
)

// NewFactory returns the span_cost processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, metadata.TracesStability),
	)
}

func createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := newSpanCost(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return createTracesWith(ctx, set, cfg, next, p)
}

func createTracesWith(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces, p *spanCost) (processor.Traces, error) {
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
}
