package budgettailsamplingprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// redHistogramCount is the RED duration histogram's count over every key.
func redHistogramCount(t *testing.T, ts *testSampler) uint64 {
	t.Helper()
	m, err := ts.tel.GetMetric(metadata.MetricREDDuration)
	require.NoError(t, err)
	var n uint64
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		n += p.Count
	}
	return n
}

// TestREDCountsEveryTraceAndSpanWhateverIsKept: at a baseline of 10%, the
// RED metrics count every trace, error and span that arrived, late spans
// and dropped traces included, per fairness key.
func TestREDCountsEveryTraceAndSpanWhateverIsKept(t *testing.T) {
	cfg := testConfig()
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "", 0.1)
	g := workload.NewGenerator(workload.Options{Services: 3, SpansPerTrace: 4, ErrorEvery: 10, Seed: 40, Start: ts.now})
	var traces, errs, spans int
	var late []ptrace.Traces
	for range 400 {
		td := ptrace.NewTraces()
		tr := g.Next(td)
		traces++
		spans += td.SpanCount()
		if tr.Error {
			errs++
		}
		parts := workload.Interleave(td, 2)
		ts.send(parts[0])
		late = append(late, parts[1]) // arrives after the decision
	}
	ts.advance(cfg.DecisionWait)
	for _, td := range late {
		ts.send(td)
	}
	require.Zero(t, ts.p.bufferedTraces())
	assert.EqualValues(t, traces, ts.metric(metadata.MetricREDRequests))
	assert.EqualValues(t, errs, ts.metric(metadata.MetricREDErrors))
	assert.EqualValues(t, spans, ts.metric(metadata.MetricREDSpans), "late spans too")
	assert.EqualValues(t, traces, redHistogramCount(t, ts))
	assert.Less(t, ts.sink.SpanCount(), spans/2, "while most were dropped")
	m, err := ts.tel.GetMetric(metadata.MetricREDRequests)
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := p.Attributes.Value("key")
		keys[v.AsString()] = true
	}
	assert.Len(t, keys, 3, "per fairness key (the service): %v", keys)
}

// TestREDKeysAreBoundedByMaxKeys: past red_metrics.max_keys, keys are
// recorded as _other and counted as folds; totals are unchanged.
func TestREDKeysAreBoundedByMaxKeys(t *testing.T) {
	cfg := testConfig()
	cfg.REDMetrics.MaxKeys = 2
	ts := newTestSampler(t, cfg)
	for i, svc := range []string{"a", "b", "c", "d"} {
		ts.send(oneSpan(svc, traceIDWithRandomness(uint64(i+1), 0.5), 1, 0, ts.now, time.Millisecond))
	}
	ts.advance(cfg.DecisionWait)
	assert.EqualValues(t, 4, ts.metric(metadata.MetricREDRequests))
	assert.EqualValues(t, 2, ts.metric(metadata.MetricREDRequests, attribute.String("key", "_other")))
	assert.EqualValues(t, 2, ts.metric(metadata.MetricKeyFolds))
}

// TestREDCountsATraceOnceAcrossAHandoff: traces split across a scale-out
// (buffered at A, handed to B, their roots proxied by A) are counted once
// in the tier, by the sampler that decides them.
func TestREDCountsATraceOnceAcrossAHandoff(t *testing.T) {
	ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, nil)
	a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
	ht.resolve("127.0.0.2")
	later := multipart(t, a, 300)
	ht.advance(4 * time.Second)
	ht.resolve("127.0.0.2", "127.0.0.3")
	ht.settle()
	spans := 0
	for _, part := range later {
		spans += part.SpanCount()
		require.NoError(t, a.p.ConsumeTraces(context.Background(), part))
	}
	ht.settle()
	require.Positive(t, a.metric("otelcol_processor_budget_tail_sampling_handoff_proxied_spans"))
	ht.advance(2 * time.Second)
	require.Zero(t, a.p.bufferedTraces()+b.p.bufferedTraces())
	requests := a.metric(metadata.MetricREDRequests) + b.metric(metadata.MetricREDRequests)
	assert.EqualValues(t, 300, requests, "each trace once")
	assert.Positive(t, b.metric(metadata.MetricREDRequests), "B decided what moved")
	assert.EqualValues(t, 6*300, a.metric(metadata.MetricREDSpans)+b.metric(metadata.MetricREDSpans), "each span once")
	_ = spans
}
