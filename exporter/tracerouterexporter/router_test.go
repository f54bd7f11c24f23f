package tracerouterexporter

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/internal/otlptest"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// telemetrySettings are the exporter's settings with telemetry the test
// reads back.
func telemetrySettings(t *testing.T) (exporter.Settings, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	return set, tel
}

// sendUnique sends requests of spans with distinct span IDs (uniqueRequest)
// and returns the spans sent.
func sendUnique(t *testing.T, exp consumer.Traces, rnd *rand.Rand, requests int) int {
	t.Helper()
	var n uint64
	sent := 0
	for range requests {
		td := uniqueRequest(rnd, &n)
		sent += td.SpanCount()
		require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	}
	return sent
}

// uniqueRequest is a request whose spans all have distinct span IDs, so
// that a span received twice is visible.
func uniqueRequest(rnd *rand.Rand, n *uint64) ptrace.Traces {
	td := mixedRequest(rnd, 1+rnd.IntN(8))
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			spans := rss.At(i).ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				*n++
				var id pcommon.SpanID
				for b := range 8 {
					id[b] = byte(*n >> (8 * b))
				}
				spans.At(k).SetSpanID(id)
				if spans.At(k).TraceID().IsEmpty() {
					spans.At(k).SetTraceID(pcommon.TraceID{1, byte(*n)})
				}
			}
		}
	}
	return td
}

func testConfig(hostnames []string, compression configcompression.Type) *Config {
	cfg := createDefaultConfig()
	cfg.Resolver.Static = configoptional.Some(StaticResolver{Hostnames: hostnames})
	cfg.Protocol.OTLP.ClientConfig.TLS.Insecure = true
	cfg.Protocol.OTLP.ClientConfig.Compression = compression
	cfg.BackOffConfig.InitialInterval = 50 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 200 * time.Millisecond
	return cfg
}

// Every shipped compression: each trace reaches the sampler the ring gives
// it to, whole, and every span once.
func TestRouterSendsEveryTraceToItsSamplerWithEachCompression(t *testing.T) {
	for _, comp := range []configcompression.Type{configcompression.TypeGzip, configcompression.TypeZstd, configcompression.TypeSnappy, configcompression.Type("none")} {
		t.Run(string(comp), func(t *testing.T) {
			sinks, addrs := otlptest.StartN(t, 3)
			cfg := testConfig(addrs, comp)
			require.NoError(t, cfg.Validate())
			set, tel := telemetrySettings(t)
			exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
			sent := sendUnique(t, exp, rand.New(rand.NewPCG(1, 2)), 200)
			require.Eventually(t, func() bool {
				got := 0
				for _, s := range sinks {
					got += s.Count()
				}
				return got == sent
			}, 10*time.Second, 20*time.Millisecond)
			require.NoError(t, exp.Shutdown(context.Background()))
			rg := ring.New(addrs)
			for _, s := range sinks {
				assert.NotEmpty(t, s.TraceIDs())
				for _, id := range s.TraceIDs() {
					assert.Equal(t, s.Addr, rg.Owner(id), "trace %v at the wrong sampler", id)
				}
				assert.Empty(t, s.Twice(), "spans received twice")
			}
			m, err := tel.GetMetric(metadata.MetricSpans)
			require.NoError(t, err)
			assert.NotNil(t, m)
		})
	}
}

// A sampler that refuses: its part, and only its part, goes back to the
// queue; when the resolver drops that sampler, the retry routes the part
// on the new ring. Nothing is lost, nothing received twice.
func TestRouterReroutesWhatASamplerRefused(t *testing.T) {
	// Three samplers on one port, three loopback addresses, as a headless
	// Service resolves.
	var sinks []*otlptest.Recorder
	for attempt := 0; ; attempt++ {
		sinks = sinks[:0]
		first := otlptest.Start(t, "127.0.0.1:0")
		_, port, _ := net.SplitHostPort(first.Addr)
		sinks = append(sinks, first)
		ok := true
		for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				ok = false
				break
			}
			_ = ln.Close()
			sinks = append(sinks, otlptest.Start(t, net.JoinHostPort(ip, port)))
		}
		if ok {
			break
		}
		require.Less(t, attempt, 5, "no port free on three loopback addresses")
	}
	_, port, _ := net.SplitHostPort(sinks[0].Addr)
	sinks[1].Refuse.Store(true)
	var mu sync.Mutex
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	lookup := func(context.Context, string) ([]net.IPAddr, error) {
		mu.Lock()
		defer mu.Unlock()
		var out []net.IPAddr
		for _, ip := range ips {
			out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
		}
		return out, nil
	}
	cfg := testConfig(nil, configcompression.TypeSnappy)
	cfg.Resolver.Static = configoptional.None[StaticResolver]()
	cfg.Resolver.DNS = configoptional.Some(DNSResolver{Hostname: "samplers", Port: port, Interval: 100 * time.Millisecond})
	cfg.QueueSettings = configoptional.Some(exporterhelper.NewDefaultQueueConfig())
	require.NoError(t, cfg.Validate())
	set, tel := telemetrySettings(t)
	r, err := newRouter(set, cfg)
	require.NoError(t, err)
	r.res.(*dnsResolver).lookup = lookup
	exp, err := r.exporter(context.Background())
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	sent := sendUnique(t, exp, rand.New(rand.NewPCG(3, 4)), 100)
	time.Sleep(300 * time.Millisecond) // some retries fail against the refusing sampler
	mu.Lock()
	ips = []string{"127.0.0.1", "127.0.0.3"} // it leaves the Service
	mu.Unlock()
	require.Eventually(t, func() bool { return sinks[0].Count()+sinks[2].Count() == sent }, 15*time.Second, 20*time.Millisecond,
		"every span at the two samplers that stay")
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Zero(t, sinks[1].Count())
	for _, s := range []*otlptest.Recorder{sinks[0], sinks[2]} {
		require.Empty(t, s.Twice(), "spans received twice")
	}
	rerouted, err := tel.GetMetric(metadata.MetricRerouted)
	require.NoError(t, err)
	assert.NotNil(t, rerouted)
	changes, err := tel.GetMetric(metadata.MetricRingChanges)
	require.NoError(t, err)
	assert.NotNil(t, changes)
}
