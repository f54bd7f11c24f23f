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
	// MaxInflightBytes bounds the bytes held for requests taken and not yet
	// sent or handed on (each counts its size and requestOverhead); a
	// request past it is refused with a retryable error.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes"`
	// NumWorkers is how many requests' parts are sent at once; the others
	// wait, held in max_inflight_bytes.
	NumWorkers int `mapstructure:"num_workers"`
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
	if c.MaxInflightBytes < 1 {
		errs = append(errs, fmt.Errorf("max_inflight_bytes: must be ≥ 1, got %d", c.MaxInflightBytes))
	}
	return errors.Join(errs...)
}
