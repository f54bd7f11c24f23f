// Package tracerouterexporter is the gateway's router: a traces exporter
// that sends every span of a trace to the same sampler, on the ring of
// contrib's load_balancing exporter, without copying spans through pdata:
// it encodes each request once and splits the encoding by trace ID.
package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter/internal/metadata"
)

// NewFactory returns the trace_router exporter factory.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		exporter.WithTraces(createTraces, metadata.TracesStability))
}

func createDefaultConfig() *Config {
	client := configgrpc.NewDefaultClientConfig()
	return &Config{
		TimeoutSettings: exporterhelper.NewDefaultTimeoutConfig(),
		BackOffConfig:   configretry.NewDefaultBackOffConfig(),
		QueueSettings:   configoptional.Some(exporterhelper.NewDefaultQueueConfig()),
		Protocol:        Protocol{OTLP: OTLPConfig{Timeout: 5 * time.Second, MaxRequestBytes: defaultMaxRequestBytes, ClientConfig: client}},
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	r, err := newRouter(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return r.exporter(ctx)
}

// exporter wraps the router in exporterhelper: its queue, retries and
// timeout.
func (r *router) exporter(ctx context.Context) (exporter.Traces, error) {
	c := r.cfg
	return exporterhelper.NewTraces(ctx, r.set, c, r.push,
		exporterhelper.WithStart(r.start),
		exporterhelper.WithShutdown(r.shutdown),
		exporterhelper.WithCapabilities(r.capabilities()),
		exporterhelper.WithTimeout(c.TimeoutSettings),
		exporterhelper.WithRetry(c.BackOffConfig),
		exporterhelper.WithQueue(c.QueueSettings),
	)
}
