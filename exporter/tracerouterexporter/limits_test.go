package tracerouterexporter

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"

	"github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/internal/otlptest"
	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/internal/traceroute"
)

func counterTotal(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		n += dp.Value
	}
	return n
}

// startUnqueued starts the exporter of cfg without its queue: what a
// sampler does not take is the caller's error.
func startUnqueued(t *testing.T, cfg *Config) (exporter.Traces, *componenttest.Telemetry) {
	t.Helper()
	cfg.QueueSettings = configoptional.None[exporterhelper.QueueBatchConfig]()
	require.NoError(t, cfg.Validate())
	set, tel := telemetrySettings(t)
	exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return exp, tel
}

// A request larger than the samplers take is cut: every request a sampler
// receives is at most max_request_bytes, and every span arrives. Uncut,
// the samplers (whose gRPC limit is that size) refused it whole.
func TestPartsAreCutAtMaxRequestBytes(t *testing.T) {
	const limit = 64 << 10
	var sinks []*otlptest.Recorder
	var addrs []string
	for range 2 {
		s := otlptest.Start(t, "127.0.0.1:0", grpc.MaxRecvMsgSize(limit))
		sinks = append(sinks, s)
		addrs = append(addrs, s.Addr)
	}
	cfg := testConfig(addrs, configcompression.TypeZstd)
	cfg.Protocol.OTLP.MaxRequestBytes = limit
	cfg.BackOffConfig.Enabled = false
	exp, _ := startUnqueued(t, cfg)

	// One resource, many traces: about 600 KiB, each sampler's share
	// several times the limit.
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "big")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	rnd := rand.New(rand.NewPCG(1, 1))
	for i := range 3000 {
		sp := spans.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{byte(rnd.IntN(256)), byte(rnd.IntN(256)), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		sp.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 1, 1, 1, 1, 1, 1})
		sp.SetName("a span with some weight")
		sp.Attributes().PutStr("payload", string(make([]byte, 150)))
	}
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	total := 0
	for _, s := range sinks {
		total += s.Count()
		require.NotEmpty(t, s.Requests())
		for _, r := range s.Requests() {
			assert.LessOrEqual(t, r.Bytes, limit)
		}
		assert.Greater(t, len(s.Requests()), 2, "cut into several requests")
	}
	assert.Equal(t, 3000, total)
}

// A sampler's partial success is read: the spans it reports rejected are
// counted as rejected, not as sent, and not sent again (OTLP says so).
func TestPartialSuccessIsCounted(t *testing.T) {
	sinks, addrs := otlptest.StartN(t, 1)
	sinks[0].Reject.Store(2)
	cfg := testConfig(addrs, configcompression.TypeZstd)
	exp, tel := startUnqueued(t, cfg)
	sent := sendUnique(t, exp, rand.New(rand.NewPCG(5, 6)), 10)
	calls := sinks[0].Calls()
	assert.Equal(t, 2*calls, counterTotal(t, tel, metadata.MetricRejected))
	assert.Equal(t, int64(sent)-2*calls, counterTotal(t, tel, metadata.MetricSpans))
	assert.Equal(t, int64(10), calls, "nothing sent again")
}

// A part that does not decode whole goes back per original request: the
// good requests' spans come back, the bad one's are counted lost. Before,
// the whole part was dropped uncounted.
func TestAPartThatDoesNotDecodeLosesOnlyItsBadRequest(t *testing.T) {
	set, tel := telemetrySettings(t)
	cfg := testConfig([]string{"127.0.0.1:1"}, configcompression.TypeZstd)
	r, err := newRouter(set, cfg)
	require.NoError(t, err)
	var m ptrace.ProtoMarshaler
	good := func(n int) []byte {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for range n {
			spans.AppendEmpty().SetTraceID(pcommon.TraceID{1})
		}
		b, _ := m.MarshalTraces(td)
		return b
	}
	// Two spans whose name has the wrong wire type.
	bad := []byte{0x0a, 0x0e, 0x12, 0x0c, 0x12, 0x04, 0x28, 0x01, 0x28, 0x01, 0x12, 0x04, 0x28, 0x01, 0x28, 0x01}
	var idx otlpwire.Index
	require.NoError(t, idx.Parse(bad))
	require.Equal(t, 2, idx.NumSpans())
	p := &traceroute.Part{}
	for _, seg := range [][]byte{good(3), bad, good(4)} {
		p.Bytes = append(p.Bytes, seg...)
		p.Ends = append(p.Ends, len(p.Bytes))
	}
	td, lost := r.GiveBack(p)
	assert.Equal(t, 7, td.SpanCount(), "the good requests' spans")
	assert.Equal(t, 2, lost)
	assert.Equal(t, int64(2), counterTotal(t, tel, metadata.MetricUndecodable))
}

// A send to a sampler that never answers ends at protocol.otlp.timeout.
func TestASendEndsAtItsTimeout(t *testing.T) {
	sinks, addrs := otlptest.StartN(t, 1)
	sinks[0].Delay.Store(int64(time.Minute))
	cfg := testConfig(addrs, configcompression.TypeZstd)
	cfg.Protocol.OTLP.Timeout = 300 * time.Millisecond
	cfg.BackOffConfig.Enabled = false
	exp, _ := startUnqueued(t, cfg)
	var n uint64
	start := time.Now()
	err := exp.ConsumeTraces(context.Background(), uniqueRequest(rand.New(rand.NewPCG(1, 1)), &n))
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
}
