package budgettailsamplingprocessor

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func TestOutOfOrderSpansAcrossRequestsArriveComplete(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	start := ts.now
	id := traceIDWithRandomness(1, 0.5)
	// Children first, interleaved with another trace, the root last.
	other := traceIDWithRandomness(2, 0.5)
	ts.send(oneSpan("api", id, 3, 1, start, 10*time.Millisecond))
	ts.send(oneSpan("db", other, 9, 0, start, 5*time.Millisecond))
	ts.advance(500 * time.Millisecond)
	ts.send(oneSpan("cart", id, 2, 1, start, 20*time.Millisecond))
	ts.advance(500 * time.Millisecond)
	assert.Zero(t, ts.sink.SpanCount(), "nothing is decided before its wait")
	ts.send(oneSpan("web", id, 1, 0, start, 50*time.Millisecond))
	// The root arrived: decided decision_wait_after_root later, before decision_wait.
	ts.advance(1900 * time.Millisecond)
	assert.NotContains(t, ts.keptSpans(), id)
	ts.advance(200 * time.Millisecond)
	kept := ts.keptSpans()
	require.Len(t, kept[id], 3, "the whole trace, from three requests")
	require.Len(t, kept[other], 1, "the other trace is decided with its own root")
	for _, s := range kept[id] {
		assert.Equal(t, "ot=th:0", s.TraceState().AsRaw())
	}
}

func TestDecisionWaitWithoutRoot(t *testing.T) {
	cfg := testConfig()
	cfg.DecisionWait = 3 * time.Second
	ts := newTestSampler(t, cfg)
	id := traceIDWithRandomness(1, 0.9)
	ts.send(oneSpan("api", id, 2, 1, ts.now, time.Millisecond))
	ts.advance(2900 * time.Millisecond)
	assert.Zero(t, ts.sink.SpanCount())
	ts.advance(100 * time.Millisecond)
	assert.Equal(t, 1, ts.sink.SpanCount())
	assert.Equal(t, 1.0, ts.metric(metadata.MetricDecisionLatency))
}

func TestErrorsAreKeptAndBaselineIsConsistent(t *testing.T) {
	cfg := testConfig()
	ts := newTestSampler(t, cfg)
	// Force a baseline probability of 0.25 for the service.
	ts.p.adj.Pin(policy.Fixed(map[string]traceinfo.Probability{"api": traceinfo.NewProbability(0.25)}, traceinfo.Always))
	var ok, errs []pcommon.TraceID
	for i := 0; i < 100; i++ {
		frac := (float64(i) + 0.5) / 100
		id := traceIDWithRandomness(uint64(i), frac)
		td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
		if i%10 == 0 {
			td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
			errs = append(errs, id)
		} else {
			ok = append(ok, id)
		}
		ts.send(td)
	}
	ts.advance(cfg.DecisionWaitAfterRoot)
	kept := ts.keptSpans()
	for _, id := range errs {
		require.Contains(t, kept, id, "every error trace is kept")
		assert.Equal(t, "ot=th:0", kept[id][0].TraceState().AsRaw())
	}
	// Consistent sampling: kept exactly when randomness ≥ threshold (0.75).
	for i, id := range ok {
		_ = i
		r := sampling.TraceIDToRandomness(id)
		want := traceinfo.NewProbability(0.25).Th.ShouldSample(r)
		_, got := kept[id]
		assert.Equal(t, want, got, "trace %x", id)
		if got {
			assert.Equal(t, "ot=th:c", kept[id][0].TraceState().AsRaw())
		}
	}
	assert.Equal(t, 10.0, ts.metric(metadata.MetricTraces, decisionAttr("sampled"), reasonAttr("error")))
	baselineKept := ts.metric(metadata.MetricTraces, decisionAttr("sampled"), reasonAttr("baseline"))
	assert.InDelta(t, 0.25*90, baselineKept, 3)
}

func TestConsistentAcrossInstances(t *testing.T) {
	cfg := testConfig()
	// Only the baseline decides here: outliers depend on each instance's history.
	cfg.Outliers.MinObservations = 1 << 30
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	a := newTestSampler(t, cfg)
	b := newTestSampler(t, cfg)
	pol := policy.Fixed(map[string]traceinfo.Probability{"api": traceinfo.NewProbability(0.1)}, traceinfo.Always)
	a.p.adj.Pin(pol)
	b.p.adj.Pin(pol)
	g := workload.NewGenerator(workload.Options{Services: 1, Seed: 7})
	td, _ := g.Batch(500)
	workload.SetService(td, "api")
	tdB := ptrace.NewTraces()
	td.CopyTo(tdB)
	// Instance b receives the same traces split into single-span requests.
	a.send(td)
	for _, part := range workload.SplitBySpan(tdB, 1) {
		b.send(part)
	}
	a.advance(10 * time.Second)
	b.advance(10 * time.Second)
	ka, kb := a.keptSpans(), b.keptSpans()
	require.NotEmpty(t, ka)
	assert.Equal(t, len(ka), len(kb))
	for id, spans := range ka {
		assert.Len(t, kb[id], len(spans), "trace %x decided the same on both", id)
	}
}

func TestTracestateMembersPreservedAndStricterThresholdKept(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	ts.p.adj.Pin(policy.Fixed(map[string]traceinfo.Probability{"api": traceinfo.NewProbability(0.5)}, traceinfo.Always))
	id := traceIDWithRandomness(1, 0.95)
	td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw("vendor=abc,ot=rv:f3333333333333")
	ts.send(td)
	// A child head-sampled upstream at 1/8 (th:e): stricter than ours, kept.
	child := oneSpan("api", id, 2, 1, ts.now, time.Millisecond)
	child.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw("ot=th:e;rv:f3333333333333")
	ts.send(child)
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()[id]
	require.Len(t, kept, 2)
	// The trace arrived head-sampled at 1/8 (the largest th among its
	// spans): kept with our 0.5 on top, every span carries th for 1/16; the
	// ot member moves to the front (W3C), other members and rv stay.
	got := map[string]bool{}
	for _, s := range kept {
		got[s.TraceState().AsRaw()] = true
	}
	assert.Equal(t, map[string]bool{"ot=rv:f3333333333333;th:f,vendor=abc": true, "ot=rv:f3333333333333;th:f": true}, got)
}

func TestExplicitRandomnessIsUsed(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	ts.p.adj.Pin(policy.Fixed(map[string]traceinfo.Probability{"api": traceinfo.NewProbability(0.5)}, traceinfo.Always))
	// Trace ID randomness is high (would be kept), rv is low: not kept.
	id := traceIDWithRandomness(1, 0.99)
	td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw("ot=rv:10000000000000")
	ts.send(td)
	ts.advance(3 * time.Second)
	assert.Zero(t, ts.sink.SpanCount())
}

func TestLateSpansFollowTheDecision(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	ts.p.adj.Pin(policy.Fixed(map[string]traceinfo.Probability{"api": traceinfo.NewProbability(0.5)}, traceinfo.Always))
	keptID := traceIDWithRandomness(1, 0.9)
	droppedID := traceIDWithRandomness(2, 0.1)
	ts.send(oneSpan("api", keptID, 1, 0, ts.now, time.Millisecond))
	ts.send(oneSpan("api", droppedID, 1, 0, ts.now, time.Millisecond))
	ts.advance(3 * time.Second)
	require.Equal(t, 1, ts.sink.SpanCount())
	ts.send(oneSpan("api", keptID, 2, 1, ts.now, time.Millisecond))
	ts.send(oneSpan("api", droppedID, 2, 1, ts.now, time.Millisecond))
	kept := ts.keptSpans()
	require.Len(t, kept[keptID], 2, "a late span of a kept trace is forwarded at once")
	assert.Equal(t, "ot=th:8", kept[keptID][1].TraceState().AsRaw())
	assert.NotContains(t, kept, droppedID)
	assert.Equal(t, 1.0, ts.metric(metadata.MetricLateSpans, decisionAttr("sampled")))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricLateSpans, decisionAttr("not_sampled")))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricTraces, decisionAttr("sampled"), reasonAttr("late_span")))
	assert.Zero(t, ts.metric(metadata.MetricBufferedTraces), "late spans are not buffered")
}

func TestForcedDecisionsAtTheBounds(t *testing.T) {
	t.Run("max_traces", func(t *testing.T) {
		cfg := testConfig()
		cfg.NumShards = 1
		cfg.MaxTraces = 10
		ts := newTestSampler(t, cfg)
		var ids []pcommon.TraceID
		for i := 0; i < 25; i++ {
			id := traceIDWithRandomness(uint64(i), 0.5)
			ids = append(ids, id)
			td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
			if i < 3 {
				td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
			}
			ts.send(td)
		}
		assert.Equal(t, 10.0, ts.metric(metadata.MetricBufferedTraces))
		assert.Equal(t, 15.0, ts.metric(metadata.MetricTraces, reasonAttr("forced")))
		kept := ts.keptSpans()
		for _, id := range ids[:3] {
			assert.Contains(t, kept, id, "forced decisions still run the policy: error traces are kept")
		}
		assert.Zero(t, ts.metric(metadata.MetricDroppedTooEarly))
	})
	t.Run("max_buffered_bytes", func(t *testing.T) {
		cfg := testConfig()
		cfg.NumShards = 1
		cfg.MaxBufferedBytes = 2000
		ts := newTestSampler(t, cfg)
		for i := 0; i < 40; i++ {
			ts.send(oneSpan("api", traceIDWithRandomness(uint64(i), 0.5), 1, 0, ts.now, time.Millisecond))
			assert.LessOrEqual(t, ts.metric(metadata.MetricBufferedBytes), 2000.0)
		}
		assert.Positive(t, ts.metric(metadata.MetricTraces, reasonAttr("forced")))
		assert.Equal(t, 40.0, ts.metric(metadata.MetricTraces)+ts.metric(metadata.MetricBufferedTraces),
			"every trace is decided or buffered, none vanishes")
	})
	t.Run("max_spans_per_trace", func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxSpansPerTrace = 5
		ts := newTestSampler(t, cfg)
		id := traceIDWithRandomness(1, 0.5)
		for i := 1; i <= 8; i++ {
			ts.send(oneSpan("api", id, byte(i), 1, ts.now, time.Millisecond))
		}
		assert.Equal(t, 1.0, ts.metric(metadata.MetricTraces, reasonAttr("span_limit")))
		assert.Equal(t, 8, len(ts.keptSpans()[id]), "spans after the limit follow the decision")
		assert.Equal(t, 3.0, ts.metric(metadata.MetricLateSpans, decisionAttr("sampled")))
	})
}

func TestShutdownFlushesPending(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	require.NoError(t, ts.p.Start(context.Background(), nil))
	g := workload.NewGenerator(workload.Options{Services: 3, ErrorEvery: 5})
	td, traces := g.Batch(200)
	ts.send(td)
	require.NoError(t, ts.p.Shutdown(context.Background()))
	kept := ts.keptSpans()
	for _, tr := range traces {
		// Under the default 1000 spans/s budget and p = 1 before the first
		// adjustment, everything is kept.
		assert.Len(t, kept[tr.ID], tr.Spans)
	}
	assert.Zero(t, ts.metric(metadata.MetricBufferedTraces))
}

func TestShutdownOutOfTimeCountsDroppedTooEarly(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	td, _ := workload.NewGenerator(workload.Options{}).Batch(20)
	ts.send(td)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, ts.p.Shutdown(ctx))
	c, buffered, _, _ := ts.p.tally()
	assert.Equal(t, int64(20), c.DroppedTooEarly)
	assert.Zero(t, buffered)
}

func TestForwardErrorsAreCounted(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	ts.p.fwd = ts.p.newForwarder(errConsumer{})
	ts.send(oneSpan("api", traceIDWithRandomness(1, 0.5), 1, 0, ts.now, time.Millisecond))
	ts.advance(3 * time.Second)
	assert.Equal(t, 1.0, ts.metric(metadata.MetricForwardFailed))
}

func TestInvalidInputIsCountedNeverFatal(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty() // no service.name
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	spans.AppendEmpty() // zero trace ID
	s := spans.AppendEmpty()
	s.SetTraceID(traceIDWithRandomness(1, 0.5))
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(ts.now))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(ts.now.Add(-time.Hour))) // end before start
	huge := spans.AppendEmpty()
	huge.SetTraceID(traceIDWithRandomness(2, 0.5))
	huge.Attributes().PutStr("blob", strings.Repeat("x", 1<<20))
	ts.send(td)
	ts.advance(3 * time.Second)
	assert.Equal(t, 1.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("zero_trace_id")))
	assert.Equal(t, 2.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("missing_service_name")))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("end_before_start")))
	assert.Equal(t, 2, ts.sink.SpanCount(), "valid-ID spans are still sampled")
}

func TestPeersFromDNS(t *testing.T) {
	cfg := testConfig()
	cfg.Budget.PeersDNS = "samplers.example"
	ts := newTestSampler(t, cfg)
	// Three dual-stack pods, one listed twice: an A and an AAAA record each.
	ts.p.lookup = func(_ context.Context, family, host string) ([]net.IP, error) {
		assert.Equal(t, "samplers.example", host)
		if family == "ip6" {
			return []net.IP{net.ParseIP("fd00::1"), net.ParseIP("fd00::2"), net.ParseIP("fd00::3")}, nil
		}
		return []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("10.0.0.2"), net.ParseIP("10.0.0.3"), net.ParseIP("10.0.0.3")}, nil
	}
	ts.p.refreshPeers()
	assert.Equal(t, 3.0, ts.metric(metadata.MetricPeers), "distinct pods, not A + AAAA records")
	// An IPv6-only Service.
	ts.p.lookup = func(_ context.Context, family, _ string) ([]net.IP, error) {
		if family == "ip4" {
			return nil, errors.New("no such host")
		}
		return []net.IP{net.ParseIP("fd00::1"), net.ParseIP("fd00::2")}, nil
	}
	ts.p.refreshPeers()
	assert.Equal(t, 2.0, ts.metric(metadata.MetricPeers))
	ts.p.lookup = func(context.Context, string, string) ([]net.IP, error) { return nil, errors.New("no such host") }
	ts.p.refreshPeers()
	assert.Equal(t, 2.0, ts.metric(metadata.MetricPeers), "a failed lookup keeps the last count")
}

type errConsumer struct{}

func (errConsumer) ConsumeTraces(context.Context, ptrace.Traces) error {
	return errors.New("backend down")
}
func (errConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func attributeCause(c string) attribute.KeyValue { return attribute.String("cause", c) }

func TestHTTPServerErrorsOption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		kind    ptrace.SpanKind
		code    any
		kept    bool
	}{
		{"disabled", false, ptrace.SpanKindServer, 503, false},
		{"server int", true, ptrace.SpanKindServer, 503, true},
		{"server string", true, ptrace.SpanKindServer, "503", true},
		{"server 404", true, ptrace.SpanKindServer, 404, false},
		{"client 503 is the callee's error, not ours", true, ptrace.SpanKindClient, 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Errors.HTTPServerErrors = tc.enabled
			cfg.Outliers.FallbackLatencyThreshold = time.Hour
			ts := newTestSampler(t, cfg)
			// Baseline keeps nothing, so only a priority trace survives.
			storeBaselinePolicy(ts, "api", sampling.MinSamplingProbability)
			id := traceIDWithRandomness(1, 0.5)
			td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
			span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			span.SetKind(tc.kind)
			switch c := tc.code.(type) {
			case int:
				span.Attributes().PutInt("http.response.status_code", int64(c))
			case string:
				span.Attributes().PutStr("http.response.status_code", c)
			}
			ts.send(td)
			ts.advance(3 * time.Second)
			_, kept := ts.keptSpans()[id]
			assert.Equal(t, tc.kept, kept)
		})
	}
}

func TestReasonAttributeOnRootSpan(t *testing.T) {
	cfg := testConfig()
	cfg.ReasonAttribute = "sampling.reason"
	ts := newTestSampler(t, cfg)
	id := traceIDWithRandomness(1, 0.5)
	ts.send(oneSpan("api", id, 1, 0, ts.now, 2*time.Second)) // slower than the 1s fallback
	ts.send(oneSpan("api", id, 2, 1, ts.now, time.Millisecond))
	ts.advance(3 * time.Second)
	spans := ts.keptSpans()[id]
	require.Len(t, spans, 2)
	for _, s := range spans {
		v, ok := s.Attributes().Get("sampling.reason")
		if s.ParentSpanID().IsEmpty() {
			require.True(t, ok)
			assert.Equal(t, "outlier", v.Str())
		} else {
			assert.False(t, ok, "only the root span carries the reason")
		}
	}
}

// A decision pass takes every core for what expired since the last one:
// passes must come often enough that none holds intake up for long.
func TestDecisionPassesAreAtMost100msApart(t *testing.T) {
	for _, c := range []struct {
		wait, afterRoot, want time.Duration
	}{
		{15 * time.Second, 7 * time.Second, 100 * time.Millisecond}, // tail.yaml
		{30 * time.Second, 30 * time.Second, 100 * time.Millisecond},
		{time.Second, 500 * time.Millisecond, 50 * time.Millisecond},
		{50 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond},
	} {
		cfg := testConfig()
		cfg.DecisionWait, cfg.DecisionWaitAfterRoot = c.wait, c.afterRoot
		ts := newTestSampler(t, cfg)
		assert.Equal(t, c.want, ts.p.tickInterval(), "waits %v, %v", c.wait, c.afterRoot)
	}
}

// On one core, a feeder that never waits (a receiver busy with a backlog)
// and the decision passes share the core: passes must still decide what
// expired while it feeds. A pass that gave its core up (runtime.Gosched)
// every 64 decisions got 64 decisions per 10-ms time slice of the feeder
// and fell ever further behind: the side-by-side benchmark kept no span in
// its timed loop (docs/bench-results/history-to-2026-12-05.md, twelfth pass).
func TestDecisionsKeepUpWithABusyFeederOnOneCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := testConfig()
	cfg.DecisionWait = 20 * time.Millisecond
	cfg.DecisionWaitAfterRoot = 20 * time.Millisecond
	cfg.MaxTraces = 10_000_000
	cfg.MaxBufferedBytes = 8 << 30
	ts := newTestSampler(t, cfg)
	ts.p.now = time.Now
	require.NoError(t, ts.p.Start(context.Background(), nil))
	g := workload.NewGenerator(workload.Options{Services: 5, Seed: 1})
	// Spans fed until 200 ms before the end: their waits were over 180 ms
	// before it, ample for passes 10 ms apart that keep up.
	const feeding, margin = 1500 * time.Millisecond, 200 * time.Millisecond
	var fed, due int64
	start := time.Now()
	for time.Since(start) < feeding {
		td, _ := g.Batch(20)
		require.NoError(t, ts.p.ConsumeTraces(context.Background(), td))
		fed += int64(td.SpanCount())
		if time.Since(start) < feeding-margin {
			due = fed
		}
	}
	c, _, _, _ := ts.p.tally()
	decided := c.Spans[sampled] + c.Spans[notSampled]
	require.NoError(t, ts.p.Shutdown(context.Background()))
	assert.Zero(t, c.Traces[sampled][traceinfo.ReasonForced]+c.Traces[notSampled][traceinfo.ReasonForced], "no trace decided early: the bounds are far")
	t.Logf("decided %d of %d spans due (%d fed)", decided, due, fed)
	assert.GreaterOrEqual(t, decided, due/2, "decided %d of %d spans due (%d fed)", decided, due, fed)
}

func TestConcurrentIntakeWithBackgroundDecisions(t *testing.T) {
	cfg := testConfig()
	cfg.DecisionWait = 50 * time.Millisecond
	cfg.DecisionWaitAfterRoot = 20 * time.Millisecond
	cfg.AdjustInterval = 30 * time.Millisecond
	ts := newTestSampler(t, cfg)
	ts.p.now = time.Now
	require.NoError(t, ts.p.Start(context.Background(), nil))
	total := feedConcurrently(t, ts.p, 4, 50, workload.Options{Services: 5, ErrorEvery: 7})
	require.NoError(t, ts.p.Shutdown(context.Background()))
	c, buffered, _, bytes := ts.p.tally()
	assert.Zero(t, buffered)
	assert.Zero(t, bytes)
	var pending int64
	for _, sh := range ts.p.shards {
		pending += sh.PendingBytes()
	}
	assert.Zero(t, ts.p.totals.Bytes()+pending, "every slab uncounted once, when its last chunk left")
	assert.Zero(t, ts.p.totals.SlabBytes())
	decided := c.Spans[sampled] + c.Spans[notSampled]
	assert.Equal(t, total.Load(), decided, "every span decided exactly once")
	assert.Equal(t, c.Spans[sampled], int64(ts.sink.SpanCount()))
}
