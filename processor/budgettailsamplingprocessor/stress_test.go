package budgettailsamplingprocessor

import (
	"runtime"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
)

// errorSpans lists the spans with an error status in td.
func errorSpans(td ptrace.Traces, into map[pcommon.SpanID]bool) {
	spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
		if s.Status().Code() == ptrace.StatusCodeError {
			into[s.SpanID()] = true
		}
	})
}

// SDK clients (5 s export delay, a fragment per service and pod, errors on
// the deepest service's last span only, head sampling on some entry
// services) at three times the budget, with relief always on: the kept
// volume holds the budget, every error span is kept, and every span is
// decided at arrival or follows its trace's decision (none buffered).
func TestStressReliefHoldsTheBudgetAndKeepsEveryErrorSpan(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Budget.SpansPerSecond = 500
	cfg.NumShards = 8
	cfg.StressRelief.Mode = relief.ModeAlways
	ts := newTestSampler(t, cfg)
	r := newFleetRun(ts, workload.FleetOptions{ErrorShare: 0.02, HeadProbabilities: []float64{1, 1, 0.5}, Seed: 3}, 300)
	sentErrors := map[pcommon.SpanID]bool{}
	sentSpans := map[pcommon.TraceID]int{}
	errorTraces := map[pcommon.TraceID]bool{}
	r.onSend = func(td ptrace.Traces) {
		errorSpans(td, sentErrors)
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
			sentSpans[s.TraceID()]++
			if s.Status().Code() == ptrace.StatusCodeError {
				errorTraces[s.TraceID()] = true
			}
		})
	}
	r.run(60)
	kept := meanOf(r.keptAt[20:60])
	offered := float64(r.sent) / 60
	t.Logf("offered %.0f spans/s, kept %.0f spans/s (budget 500), relief p=%.3f", offered, kept, ts.p.relief.Probability().P)
	require.Greater(t, offered, 3*500.0*0.8, "the load is well above the budget")
	assert.InEpsilon(t, 500, kept, 0.10, "kept volume within ±10%% of the budget while relief is active")
	assert.Zero(t, ts.p.bufferedTraces(), "relief buffers nothing")
	arrival := ts.metric(metadata.MetricReliefSpans)
	assert.Positive(t, ts.metric(metadata.MetricReliefSpans, decisionAttr("sampled")))
	assert.Positive(t, ts.metric(metadata.MetricReliefSpans, decisionAttr("not_sampled")))
	late := ts.metric(metadata.MetricLateSpans)
	assert.Equal(t, float64(r.sent), arrival+late, "every span decided at arrival or following its trace's decision")
	assert.Equal(t, 1.0, ts.metric(metadata.MetricReliefActive, reasonAttr("always")))
	recalled := ts.metric(metadata.MetricReliefRecalled)
	r.finish()

	keptErrors := map[pcommon.SpanID]bool{}
	for _, td := range ts.sink.AllTraces() {
		errorSpans(td, keptErrors)
	}
	require.Greater(t, len(sentErrors), 200)
	assert.Equal(t, len(sentErrors), len(keptErrors), "every error span kept")
	// Every error trace whole: the fragments relief dropped before the
	// error arrived are recalled with it.
	keptSpans := ts.keptSpans()
	split := 0
	for id := range errorTraces {
		if len(keptSpans[id]) != sentSpans[id] {
			split++
		}
	}
	t.Logf("%d error traces, %d not whole; %.0f spans recalled", len(errorTraces), split, recalled)
	assert.Zero(t, split, "every error trace kept whole")
	assert.Positive(t, recalled, "by recalling what relief dropped")
}

// Relief's threshold comes from the budget and the measured arrivals,
// rounded to steps, so samplers with the same share of the same traffic
// keep the same traces: a trace whose fragments reach two samplers (a ring
// change) is kept on both or dropped on both, with one th.
func TestStressReliefGivesATraceOneDecisionOnEverySampler(t *testing.T) {
	newSampler := func() *testSampler {
		cfg := testConfig()
		cfg.Budget.SpansPerSecond = 300
		cfg.StressRelief.Mode = relief.ModeAlways
		return newTestSampler(t, cfg)
	}
	a, b := newSampler(), newSampler()
	// Each measures its own arrivals: 2,000 spans/s, and 2,060/s. (Two
	// estimates that straddle a step's boundary give thresholds one step
	// apart: the traces between them are then kept on one sampler only.)
	for i, ts := range []*testSampler{a, b} {
		g := workload.NewGenerator(workload.Options{Services: 5, SpansPerTrace: 10, Seed: uint64(i + 1)})
		for range 5 {
			td, _ := g.Batch(200 + 6*i)
			ts.send(td)
			ts.now = ts.now.Add(time.Second)
			ts.p.measureRelief()
		}
	}
	require.Equal(t, a.p.relief.Probability().Th, b.p.relief.Probability().Th)
	require.Less(t, a.p.relief.Probability().P, 0.3)
	a.sink.Reset()
	b.sink.Reset()

	g := workload.NewGenerator(workload.Options{Services: 5, SpansPerTrace: 6, ErrorEvery: 7, Seed: 99})
	sent := map[pcommon.TraceID]int{}
	failed := map[pcommon.TraceID]bool{}
	for i := range 400 {
		td := ptrace.NewTraces()
		tr := g.Next(td)
		if i%2 == 0 {
			// Head-sampled at 50%: th on every span.
			spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) { s.TraceState().FromRaw("ot=th:8") })
		}
		sent[tr.ID] = tr.Spans
		failed[tr.ID] = tr.Error
		for j, part := range workload.Interleave(td, 3) {
			[]*testSampler{a, b}[(i+j)%2].send(part)
		}
	}
	kept := map[pcommon.TraceID]int{}
	ths := map[pcommon.TraceID]map[string]bool{}
	for _, ts := range []*testSampler{a, b} {
		for id, spans := range ts.keptSpans() {
			kept[id] += len(spans)
			for _, s := range spans {
				if ths[id] == nil {
					ths[id] = map[string]bool{}
				}
				ths[id][s.TraceState().AsRaw()] = true
			}
		}
	}
	var whole, errorsFrom int
	for id, n := range kept {
		if n == sent[id] {
			whole++
		} else {
			// Kept from its error on: the error's fragment and what follows.
			errorsFrom++
		}
	}
	t.Logf("%d of %d traces kept: %d whole, %d from their error on", len(kept), len(sent), whole, errorsFrom)
	assert.Positive(t, whole)
	for id, n := range kept {
		if n == sent[id] {
			assert.Len(t, ths[id], 1, "one th on every span of a trace kept whole")
		}
	}
	// A trace without an error is kept whole or not at all.
	for id, n := range kept {
		if !failed[id] {
			assert.Equal(t, sent[id], n, "trace %v split between the samplers", id)
		}
	}
}

// Relief starts while traces are buffered: their later fragments join them
// and the tail decides them whole; traces begun under relief follow its
// decisions after it has ended. No kept trace is missing a fragment.
func TestStressReliefNeverSplitsATraceBetweenTheTwoPaths(t *testing.T) {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 100
	cfg.MaxTraces = 200
	cfg.DecisionCache.SampledSize, cfg.DecisionCache.NotSampledSize = 10_000, 10_000
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "", 0.5)
	g := workload.NewGenerator(workload.Options{Services: 4, SpansPerTrace: 6, Seed: 5})
	type trace struct {
		id    pcommon.TraceID
		spans int
		parts []ptrace.Traces
	}
	batch := func(n int) []trace {
		var out []trace
		for range n {
			td := ptrace.NewTraces()
			tr := g.Next(td)
			out = append(out, trace{id: tr.ID, spans: tr.Spans, parts: workload.Interleave(td, 3)})
		}
		return out
	}
	before := batch(185)
	for _, tr := range before {
		ts.send(tr.parts[0])
	}
	ts.now = ts.now.Add(time.Second)
	ts.p.measureRelief()
	require.Less(t, ts.p.relief.Probability().P, 0.5, "about 370 spans/s arrived for a budget of 100")
	ts.p.updateRelief()
	require.True(t, ts.p.relief.Active(), "185 of 200 traces buffered: past 90%%")
	assert.Equal(t, int32(relief.SignalBufferTraces), ts.p.relief.Reason())

	during := batch(300)
	for _, tr := range before {
		ts.send(tr.parts[1])
	}
	for _, tr := range during {
		ts.send(tr.parts[0])
		ts.send(tr.parts[1])
	}
	assert.Equal(t, 185, int(ts.p.bufferedTraces()), "only the traces buffered before relief are")
	for _, tr := range before {
		ts.send(tr.parts[2])
	}
	// The tail decides the buffered traces; relief stays on its minimum
	// 10 s, then ends with the buffer empty.
	for range 12 {
		ts.advance(time.Second)
		ts.p.updateRelief()
	}
	require.False(t, ts.p.relief.Active())
	for _, tr := range during {
		ts.send(tr.parts[2])
	}
	ts.advance(15 * time.Second)

	kept := ts.keptSpans()
	var whole [2]int
	for i, set := range [][]trace{before, during} {
		for _, tr := range set {
			if n := len(kept[tr.id]); n > 0 {
				assert.Equal(t, tr.spans, n, "trace %v kept partly", tr.id)
				if n == tr.spans {
					whole[i]++
				}
			}
		}
	}
	t.Logf("kept whole: %d of %d buffered before relief, %d of %d begun under it", whole[0], len(before), whole[1], len(during))
	assert.Positive(t, whole[0])
	assert.Positive(t, whole[1])
	assert.Less(t, whole[1], len(during)/2)
	assert.Zero(t, ts.metric(metadata.MetricTraces, reasonAttr("forced")), "the bound was not what decided")
}

// A trace dropped at arrival whose error comes in a later fragment is kept
// whole: the error recalls the fragment relief dropped and held
// (stress_relief.recall), with the weight it arrived with; its later
// fragments follow. Without the hold, the first fragment was lost: the
// error trace left without its root.
func TestStressReliefKeepsALateErrorAndWhatFollows(t *testing.T) {
	cfg := testConfig()
	cfg.StressRelief.Mode = relief.ModeAlways
	cfg.Budget.SpansPerSecond = 1
	ts := newTestSampler(t, cfg)
	ts.p.relief.Measure(relief.Arrivals{Volume: 1e6}, 1, 1)
	require.Less(t, ts.p.relief.Probability().P, 1e-5)

	id := traceIDWithRandomness(1, 0.9) // passes th:c (75%)
	first := oneSpan("frontend", id, 1, 0, ts.now, time.Millisecond)
	first.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw("ot=th:c")
	ts.send(first)
	failing := oneSpan("db", id, 2, 1, ts.now, time.Millisecond)
	s := failing.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	s.TraceState().FromRaw("ot=th:c")
	s.Status().SetCode(ptrace.StatusCodeError)
	ts.send(failing)
	after := oneSpan("cache", id, 3, 1, ts.now, time.Millisecond)
	after.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw("ot=th:c")
	ts.send(after)

	spans := ts.keptSpans()[id]
	require.Len(t, spans, 3, "the fragment dropped before the error, the error span and the one after it")
	for _, sp := range spans {
		th, ok := thresholdOf(sp.TraceState().AsRaw())
		require.True(t, ok)
		want, _ := sampling.TValueToThreshold("c")
		assert.Equal(t, want, th, "kept with the head's weight only: probability 1 on top of it")
	}
	assert.Equal(t, 1.0, ts.metric(metadata.MetricReliefSpans, decisionAttr("not_sampled")))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricTraces, decisionAttr("sampled"), reasonAttr("late_error")))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricReliefRecalled))
}

// Rules match spans, so they apply at arrival: a drop rule drops what it
// matches (errors too, and the trace's later spans), a keep rule keeps
// what it matches whatever relief's threshold.
func TestStressReliefAppliesRulesAtArrival(t *testing.T) {
	cfg := withRules(testConfig(),
		RuleConfig{Name: "health", Action: "drop", Conditions: []string{`name == "GET /healthz"`}},
		RuleConfig{Name: "vip", Action: "keep", Conditions: []string{`attributes["tier"] == "gold"`}})
	cfg.StressRelief.Mode = relief.ModeAlways
	ts := newTestSampler(t, cfg)
	ts.p.relief.Measure(relief.Arrivals{Volume: 1e6}, 1, 1)
	require.Less(t, ts.p.relief.Probability().P, 1e-5, "relief keeps almost nothing by threshold")

	health := traceIDWithRandomness(1, 0.99)
	probe := oneSpan("lb", health, 1, 0, ts.now, time.Millisecond)
	probe.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName("GET /healthz")
	ts.send(probe)
	failing := oneSpan("lb", health, 2, 1, ts.now, time.Millisecond)
	failing.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
	ts.send(failing)

	gold := traceIDWithRandomness(2, 0.01)
	ts.send(spanWith("shop", gold, 1, 0, ts.now, time.Millisecond, map[string]string{"tier": "gold"}))
	ts.send(oneSpan("db", gold, 2, 1, ts.now, time.Millisecond))

	plain := traceIDWithRandomness(3, 0.5)
	ts.send(oneSpan("shop", plain, 1, 0, ts.now, time.Millisecond))

	kept := ts.keptSpans()
	assert.Empty(t, kept[health], "dropped by the rule, its late error too")
	assert.Len(t, kept[gold], 2, "kept by the rule, and its later span follows")
	assert.Empty(t, kept[plain], "below relief's threshold")
	assert.Equal(t, 1.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("health", "dropped")...))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("vip", "kept")...))
}

// Past relief's activation level of memory, the buffer is cut towards
// deactivation_level, oldest traces first (TestE2EOverloadStressRelief:
// relief alone stopped new traces while the buffered ones went on growing
// the heap past memory_limiter's soft limit). A trace decided early stays
// whole: its later fragments follow its decision. Under the level, nothing
// is cut.
func TestStressReliefShedsTheBufferOnMemory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limitMiB uint64
		shed     bool
	}{{"past the level", 1, true}, {"under the level", 1 << 20, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.StressRelief.Mode = relief.ModeMonitor
			cfg.StressRelief.MemoryLimitMiB = tc.limitMiB
			cfg.Budget.SpansPerSecond = 1e6 // keep every trace: wholeness is checked
			ts := newTestSampler(t, cfg)
			var ids []pcommon.TraceID
			for i := range 200 {
				id := traceIDWithRandomness(uint64(i+1), 0.5)
				ids = append(ids, id)
				ts.send(oneSpan("frontend", id, 1, 0, ts.now, time.Millisecond)) // a child: no root, buffered
			}
			require.EqualValues(t, 200, ts.p.bufferedTraces())
			runtime.GC() // the memory level is the live heap the last GC marked
			ts.p.updateRelief()
			if !tc.shed {
				assert.EqualValues(t, 200, ts.p.bufferedTraces(), "nothing cut under the level")
				assert.Zero(t, ts.metric(metadata.MetricReliefShed))
				return
			}
			require.True(t, ts.p.relief.Active(), "relief started on memory")
			assert.Less(t, ts.p.bufferedTraces(), int64(20), "the buffer cut towards deactivation_level")
			assert.Positive(t, ts.metric(metadata.MetricReliefShed))
			for _, id := range ids {
				ts.send(oneSpan("db", id, 2, 1, ts.now, time.Millisecond))
			}
			ts.advance(time.Minute)
			kept := ts.keptSpans()
			whole := 0
			for _, id := range ids {
				if len(kept[id]) == 2 {
					whole++
				}
			}
			assert.Equal(t, len(ids), whole, "every trace kept whole: later fragments follow the early decision")
		})
	}
}
