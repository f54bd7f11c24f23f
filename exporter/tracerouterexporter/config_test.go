package tracerouterexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-cost/otelcol-cost/internal/configtest"
)

func loadConfig(t *testing.T, name string) *Config {
	return configtest.Load[*Config](t, NewFactory(), name)
}

func TestLoadConfig(t *testing.T) {
	static := loadConfig(t, "")
	require.NoError(t, confmap.Validate(static))
	assert.Equal(t, []string{"sampler-0:4317", "sampler-1:4317"}, static.Resolver.Static.Get().Hostnames)
	assert.True(t, static.QueueSettings.HasValue(), "the queue is on by default: failed sends go back to it")

	dns := loadConfig(t, "dns")
	require.NoError(t, confmap.Validate(dns))
	d := dns.Resolver.DNS.Get()
	assert.Equal(t, "samplers.observability.svc.cluster.local", d.Hostname)
	assert.Equal(t, "4317", d.Port)
	assert.Equal(t, 5*time.Second, d.Interval)
	assert.Equal(t, "zstd", string(dns.Protocol.OTLP.ClientConfig.Compression))
	assert.Equal(t, 5*time.Second, dns.Protocol.OTLP.Timeout)
	assert.Equal(t, 8<<20, dns.Protocol.OTLP.MaxRequestBytes)
	assert.Equal(t, 4<<20, static.Protocol.OTLP.MaxRequestBytes, "gRPC's default max_recv_msg_size_mib")
}

func TestConfigErrorsNameTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "no_resolver"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resolver: exactly one of static and dns must be set")
	err = confmap.Validate(loadConfig(t, "two_resolvers"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resolver: exactly one of static and dns must be set")
	err = confmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	for _, want := range []string{
		`routing_key: only "traceID" is supported`,
		"resolver.dns.hostname: required",
		"resolver.dns.interval: must be ≥ 0",
		"protocol.otlp.sending_queue: not supported",
		"protocol.otlp.retry_on_failure: not supported",
		"protocol.otlp.endpoint: must be empty",
		"protocol.otlp.timeout: must be > 0",
	} {
		assert.Contains(t, err.Error(), want)
	}
	// A timeout of 0 let a sampler that never answers hold its sends
	// forever.
	err = confmap.Validate(loadConfig(t, "zero_timeout"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "protocol.otlp.timeout: must be > 0")
	assert.Contains(t, err.Error(), "protocol.otlp.max_request_bytes: must be ≥ 65536, got 1000")
}
