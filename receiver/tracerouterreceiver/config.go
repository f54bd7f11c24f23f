package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
)

// Config is the trace_router receiver's configuration.
type Config struct {
	// Protocols is otlp's shape; only grpc: OTLP/HTTP stays with the otlp
	// receiver beside this one.
	Protocols Protocols `mapstructure:"protocols"`
	// Exporter is the trace_router exporter that routes what this receiver
	// takes (its ring, connections and compression).
	Exporter component.ID `mapstructure:"exporter"`
	// MaxInflightBytes bounds what the receiver holds: requests taken and
	// their indexes, the parts encoded from them until sent, and parts
	// being handed to the pipeline (decoded). A request past it is refused
	// with a retryable error.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes"`
	// MaxRecordsPerRequest bounds a request's ResourceSpans, ScopeSpans
	// and spans, and with them its index; a request over it is refused as
	// invalid (the client must send smaller ones).
	MaxRecordsPerRequest int `mapstructure:"max_records_per_request"`
	// NumWorkers is how many sends each sampler has at once; its other
	// parts wait in its queue.
	NumWorkers int `mapstructure:"num_workers"`
	// SamplerQueueSize is how many parts wait per sampler; past it (a
	// slow sampler) a part goes down the pipeline to the exporter's queue
	// instead of waiting for it.
	SamplerQueueSize int `mapstructure:"sampler_queue_size"`
	// Batch merges the requests taken into rounds of sends: each sampler
	// gets one request per round, holding its parts of all of them.
	Batch BatchConfig `mapstructure:"batch"`
}

// BatchConfig says when a round of sends starts, as exporterhelper's
// batch does (sizer: items): once MinSize spans wait, or FlushTimeout after
// the round's first request was taken; a round holds at most MaxSize spans
// (a larger request makes a round alone).
type BatchConfig struct {
	FlushTimeout time.Duration `mapstructure:"flush_timeout"`
	MinSize      int           `mapstructure:"min_size"`
	MaxSize      int           `mapstructure:"max_size"`
	// MaxOpenRounds bounds the rounds being formed at once: one per
	// distinct client metadata (tenant); past it the oldest goes early.
	MaxOpenRounds int `mapstructure:"max_open_rounds"`
}

// Protocols are the servers the receiver runs.
type Protocols struct {
	GRPC configgrpc.ServerConfig `mapstructure:"grpc"`
	// HTTP is refused with a message: OTLP/HTTP goes to the otlp receiver.
	HTTP map[string]any `mapstructure:"http"`
}

// Validate reports every invalid field by name.
func (c *Config) Validate() error {
	var errs []error
	if c.Protocols.GRPC.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("protocols.grpc.endpoint: required"))
	}
	if c.Protocols.HTTP != nil {
		errs = append(errs, errors.New("protocols.http: not supported: receive OTLP/HTTP with the otlp receiver in the same pipeline (it reaches the trace_router exporter decoded)"))
	}
	if c.Exporter.Type().String() != "trace_router" {
		errs = append(errs, fmt.Errorf("exporter: must name a trace_router exporter (trace_router or trace_router/NAME), got %q", c.Exporter.String()))
	}
	if c.NumWorkers < 1 {
		errs = append(errs, fmt.Errorf("num_workers: must be ≥ 1, got %d", c.NumWorkers))
	}
	if c.Batch.FlushTimeout <= 0 {
		errs = append(errs, fmt.Errorf("batch.flush_timeout: must be > 0, got %v", c.Batch.FlushTimeout))
	}
	if c.Batch.MinSize < 1 {
		errs = append(errs, fmt.Errorf("batch.min_size: must be ≥ 1, got %d", c.Batch.MinSize))
	}
	if c.Batch.MaxSize < c.Batch.MinSize {
		errs = append(errs, fmt.Errorf("batch.max_size: must be ≥ batch.min_size (%d), got %d", c.Batch.MinSize, c.Batch.MaxSize))
	}
	if c.Batch.MaxOpenRounds < 1 {
		errs = append(errs, fmt.Errorf("batch.max_open_rounds: must be ≥ 1, got %d", c.Batch.MaxOpenRounds))
	}
	if c.SamplerQueueSize < 1 {
		errs = append(errs, fmt.Errorf("sampler_queue_size: must be ≥ 1, got %d", c.SamplerQueueSize))
	}
	if c.MaxRecordsPerRequest < 1 {
		errs = append(errs, fmt.Errorf("max_records_per_request: must be ≥ 1, got %d", c.MaxRecordsPerRequest))
	}
	// The largest request gRPC takes must fit, or it is refused forever.
	if largest := c.largestRequest(); c.MaxInflightBytes < largest {
		errs = append(errs, fmt.Errorf("max_inflight_bytes: must be ≥ the largest request protocols.grpc takes (max_recv_msg_size_mib) and its overhead, %d, got %d", largest, c.MaxInflightBytes))
	}
	return errors.Join(errs...)
}

// grpcDefaultMaxRecvMsgSize is gRPC's, when max_recv_msg_size_mib is 0.
const grpcDefaultMaxRecvMsgSize = 4 << 20

// largestRequest is what the largest request gRPC takes is charged.
func (c *Config) largestRequest() int64 {
	size := int64(grpcDefaultMaxRecvMsgSize)
	if mib := c.Protocols.GRPC.MaxRecvMsgSizeMiB; mib > 0 {
		size = int64(mib) << 20
	}
	return size + requestOverhead
}
