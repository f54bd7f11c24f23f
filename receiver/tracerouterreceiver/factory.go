// Package tracerouterreceiver is the gateway's OTLP/gRPC front door when it
// routes with the trace_router exporter: it hands each request's encoding,
// as received, to that exporter's router, which splits it by trace ID; the
// request is answered then, and its parts are sent to their samplers in
// the background, so no span is decoded on the way and no sampler's
// latency reaches the senders. What the router cannot send (a sampler
// refused its part, no sampler is known yet, a request the wire split
// does not read) is decoded and goes down the pipeline (memory_limiter,
// then the exporter's queue and retries), as every span goes behind the
// otlp receiver.
package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver/internal/metadata"
)

// NewFactory returns the trace_router receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		receiver.WithTraces(createTraces, metadata.TracesStability))
}

const (
	// defaultMaxInflightBytes holds a few hundred typical requests.
	defaultMaxInflightBytes = 64 << 20
	// defaultNumWorkers: a sampler sees at most this many requests at
	// once from a gateway's rounds.
	defaultNumWorkers = 4
	// defaultSamplerQueueSize parts (a round's, at most 8,192 spans each)
	// wait per sampler, about half a second of a sampler's share at the
	// rates of figure 14; beyond it (and queueWait) a slow sampler's parts
	// go to the exporter's queue instead. 16 spilled 3% of the spans at
	// 570k spans/s, and the pipeline's path (decode, encode) then held the
	// rate under 400k.
	defaultSamplerQueueSize = 64
	// defaultMaxRecordsPerRequest: 8× the largest batch the collector's
	// exporters send by default (8,192 spans), with their resources and
	// scopes.
	defaultMaxRecordsPerRequest = 65536
)

// defaultBatch is the gateway exporter queue's batch (configs/gateway.yaml):
// the samplers get requests of the same size and pace from either path.
// Unmerged, or merged only from what happened to be waiting, a sampler got
// tens of small requests a second, and its memory grew past memory_limiter's
// soft limit in the overload tests while the exporter path's stayed under
// it (docs/BENCHMARKS.md figure 14).
var defaultBatch = BatchConfig{FlushTimeout: 200 * time.Millisecond, MinSize: 4096, MaxSize: 8192, MaxOpenRounds: 64}

func createDefaultConfig() *Config {
	grpc := configgrpc.NewDefaultServerConfig()
	grpc.NetAddr.Endpoint = "localhost:4317"
	return &Config{
		Protocols:            Protocols{GRPC: grpc},
		Exporter:             component.NewID(metadata.Type),
		MaxInflightBytes:     defaultMaxInflightBytes,
		MaxRecordsPerRequest: defaultMaxRecordsPerRequest,
		NumWorkers:           defaultNumWorkers,
		SamplerQueueSize:     defaultSamplerQueueSize,
		Batch:                defaultBatch,
	}
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return newReceiver(set, cfg.(*Config), next)
}
