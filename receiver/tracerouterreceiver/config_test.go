package tracerouterreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-cost/otelcol-cost/internal/configtest"
)

func loadConfig(t *testing.T, name string) *Config {
	return configtest.Load[*Config](t, NewFactory(), name)
}

func TestLoadConfig(t *testing.T) {
	def := loadConfig(t, "")
	require.NoError(t, confmap.Validate(def))
	assert.Equal(t, "0.0.0.0:4317", def.Protocols.GRPC.NetAddr.Endpoint)
	assert.Equal(t, component.MustNewID("trace_router"), def.Exporter, "routes through the exporter of the same name by default")
	assert.Equal(t, int64(defaultMaxInflightBytes), def.MaxInflightBytes)
	assert.Equal(t, defaultNumWorkers, def.NumWorkers)
	assert.Equal(t, defaultBatch, def.Batch)

	named := loadConfig(t, "named")
	require.NoError(t, confmap.Validate(named))
	assert.Equal(t, component.MustNewIDWithName("trace_router", "samplers"), named.Exporter)
	assert.Equal(t, int64(32<<20), named.MaxInflightBytes)
	assert.Equal(t, 10000, named.MaxRecordsPerRequest)
	assert.Equal(t, 2, named.NumWorkers)
	assert.Equal(t, 4, named.SamplerQueueSize)
	assert.Equal(t, BatchConfig{FlushTimeout: 50 * time.Millisecond, MinSize: 1000, MaxSize: 2000, MaxOpenRounds: 8}, named.Batch)
	assert.Equal(t, 16, named.Protocols.GRPC.MaxRecvMsgSizeMiB)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	for _, want := range []string{
		"protocols.grpc.endpoint: required",
		"protocols.http: not supported",
		`exporter: must name a trace_router exporter (trace_router or trace_router/NAME), got "otlp"`,
		"max_inflight_bytes: must be ≥ the largest request protocols.grpc takes (max_recv_msg_size_mib) and its overhead, 4198400, got 0",
		"max_records_per_request: must be ≥ 1, got 0",
		"sampler_queue_size: must be ≥ 1, got 0",
		"batch.max_open_rounds: must be ≥ 1, got 0",
		"num_workers: must be ≥ 1, got 0",
		"batch.flush_timeout: must be > 0, got 0s",
		"batch.min_size: must be ≥ 1, got 0",
		"batch.max_size: must be ≥ batch.min_size (0), got -1",
	} {
		assert.Contains(t, err.Error(), want)
	}
	// A max_inflight_bytes below the largest request gRPC takes refused
	// such a request forever, with a retryable code.
	err = confmap.Validate(loadConfig(t, "inflight_below_max_recv"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_inflight_bytes: must be ≥ the largest request protocols.grpc takes (max_recv_msg_size_mib) and its overhead, 16781312, got 8388608")
}
