package budgettailsamplingprocessor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

type testSampler struct {
	t    testing.TB
	p    *budgetTailSampler
	sink *consumertest.TracesSink
	tel  *componenttest.Telemetry
	now  time.Time
}

// testConfig waits 10 s for a trace, 2 s after its root: shorter than the
// defaults (which cover SDK export delays), so tests of other behaviour run
// on short fake-clock timelines.
func testConfig() *Config {
	cfg := createDefaultConfig()
	cfg.DecisionWait = 10 * time.Second
	cfg.DecisionWaitAfterRoot = 2 * time.Second
	cfg.Budget.SpansPerSecond = 1000
	cfg.NumShards = 4
	if spanmem.CanMap {
		// The tests check the arena's discipline (arena_test.go).
		cfg.BufferMemory = bufferMemoryMapped
	}
	return cfg
}

// newTestSampler builds a sampler on a fake clock; nothing runs by itself:
// tests advance the clock and call decideExpired and adjust.
func newTestSampler(t testing.TB, cfg *Config) *testSampler {
	t.Helper()
	return newTestSamplerTo(t, cfg, nil)
}

// newTestSamplerTo is newTestSampler handing kept traces to next, which
// hands what it takes on to the sink (nil: straight to the sink).
func newTestSamplerTo(t testing.TB, cfg *Config, next func(sink consumer.Traces) consumer.Traces) *testSampler {
	t.Helper()
	require.NoError(t, cfg.Validate())
	ts := &testSampler{t: t, sink: new(consumertest.TracesSink), tel: componenttest.NewTelemetry(), now: time.Unix(1_700_000_000, 0)}
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = ts.tel.NewTelemetrySettings()
	var to consumer.Traces = ts.sink
	if next != nil {
		to = next(ts.sink)
	}
	p, err := newBudgetTailSampler(set, cfg, to)
	require.NoError(t, err)
	p.now = func() time.Time { return ts.now }
	p.adj.Start(ts.now)
	p.reliefMeasured = ts.now
	ts.p = p
	t.Cleanup(func() {
		_ = ts.tel.Shutdown(context.Background())
		assertStoresHoldTheBuffer(t, p)
	})
	return ts
}

// assertStoresHoldTheBuffer checks that every shard's store has a slot in
// use for each buffered trace and no other: a trace that left without its
// slot released leaks it, one released twice frees a live trace's slot.
func assertStoresHoldTheBuffer(t testing.TB, p *budgetTailSampler) {
	t.Helper()
	for i, sh := range p.shards {
		sh.mu.Lock()
		live, buffered := sh.Live(), sh.Len()
		sh.mu.Unlock()
		assert.Equal(t, buffered, live, "shard %d: slots in use vs buffered traces", i)
	}
}

func (ts *testSampler) send(td ptrace.Traces) {
	ts.t.Helper()
	require.NoError(ts.t, ts.p.ConsumeTraces(context.Background(), td))
}

// kill leaves the sampler's log as a SIGKILL would (its lock let go,
// nothing more written), so that another sampler in this process can start
// on it.
func (ts *testSampler) kill() { ts.p.wal.log.Kill() }

func (ts *testSampler) advance(d time.Duration) {
	ts.now = ts.now.Add(d)
	ts.p.decideExpired(context.Background())
}

// keptSpans returns the spans at the sink by trace ID.
func (ts *testSampler) keptSpans() map[pcommon.TraceID][]ptrace.Span {
	out := map[pcommon.TraceID][]ptrace.Span{}
	for _, td := range ts.sink.AllTraces() {
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) { out[s.TraceID()] = append(out[s.TraceID()], s) })
	}
	return out
}

// metric sums the points of an int or float metric whose attributes include want.
func (ts *testSampler) metric(name string, want ...attribute.KeyValue) float64 {
	ts.t.Helper()
	m, err := ts.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var sum float64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				sum += float64(p.Value)
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				sum += float64(p.Value)
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				sum += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sum += float64(p.Count)
		}
	default:
		ts.t.Fatalf("unexpected %T", d)
	}
	return sum
}

func decisionAttr(d string) attribute.KeyValue { return attribute.String("decision", d) }
func reasonAttr(r string) attribute.KeyValue   { return attribute.String("reason", r) }

// traceID makes a trace ID whose randomness (low 56 bits) is r/2^56 of the range.
func traceIDWithRandomness(hi uint64, fraction float64) pcommon.TraceID {
	var id pcommon.TraceID
	for i := 0; i < 8; i++ {
		id[i] = byte(hi >> (56 - 8*i))
	}
	r := uint64(fraction * float64(uint64(1)<<56))
	for i := 0; i < 7; i++ {
		id[9+i] = byte(r >> (48 - 8*i))
	}
	id[8] = 0x5a
	return id
}

// span builds a one-span request.
func oneSpan(service string, id pcommon.TraceID, spanID byte, parent byte, start time.Time, dur time.Duration) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if service != "" {
		rs.Resource().Attributes().PutStr("service.name", service)
	}
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(id)
	s.SetSpanID(pcommon.SpanID{spanID, 1, 1, 1, 1, 1, 1, 1})
	if parent != 0 {
		s.SetParentSpanID(pcommon.SpanID{parent, 1, 1, 1, 1, 1, 1, 1})
	}
	s.SetName("GET /")
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(dur)))
	return td
}

// storeBaselinePolicy makes the baseline keep svc's (and new services')
// traces with probability prob; errors and outliers are kept.
func storeBaselinePolicy(ts *testSampler, svc string, prob float64) {
	pr := traceinfo.NewProbability(prob)
	ts.p.adj.Pin(policy.Fixed(map[string]traceinfo.Probability{svc: pr}, pr))
}

// Test names for the vocabulary's values.
const (
	sampled    = traceinfo.Sampled
	notSampled = traceinfo.NotSampled
)

// feedConcurrently sends, from each of workers goroutines (as the OTLP
// receiver does), batches requests of 20 traces, each split over two
// requests; it returns the spans sent.
func feedConcurrently(t *testing.T, p *budgetTailSampler, workers, batches int, opt workload.Options) *atomic.Int64 {
	t.Helper()
	var wg sync.WaitGroup
	total := &atomic.Int64{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			o := opt
			o.Seed = seed
			g := workload.NewGenerator(o)
			for i := 0; i < batches; i++ {
				td, _ := g.Batch(20)
				total.Add(int64(td.SpanCount()))
				for _, part := range workload.Interleave(td, 2) {
					assert.NoError(t, p.ConsumeTraces(context.Background(), part))
				}
			}
		}(uint64(w + 1))
	}
	wg.Wait()
	return total
}
