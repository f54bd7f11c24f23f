package budgettailsamplingprocessor

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// fleetRun drives a sampler on its fake clock with a workload.Fleet: every
// 100 ms traces start and the pods' due exports are sent; decisions and
// adjustments run as the real tickers would.
type fleetRun struct {
	ts      *testSampler
	fleet   *workload.Fleet
	perStep int // traces started every 100 ms
	traces  []workload.FleetTrace
	steps   int
	// keptAt[s] is the spans that reached the sink during second s,
	// bytesAt[s] their OTLP bytes as they left.
	keptAt, bytesAt []int
	counted         int // the sink's requests sized so far
	// sent counts the spans sent; onSend, when set, sees every request.
	sent   int
	onSend func(ptrace.Traces)
}

func newFleetRun(ts *testSampler, opt workload.FleetOptions, tracesPerSecond int) *fleetRun {
	return &fleetRun{ts: ts, fleet: workload.NewFleet(opt, ts.now), perStep: tracesPerSecond / 10}
}

// sdkFleetRun is a fleet of SDK clients sending 300 traces/s of 6 spans
// (1,800 spans/s; 1% errors, downstream only) to a sampler of 8 shards
// with the default waits and the given budget (its other fields default).
func sdkFleetRun(t *testing.T, seed uint64, budget BudgetConfig) (*testSampler, *fleetRun) {
	cfg := createDefaultConfig()
	cfg.Budget.SpansPerSecond = budget.SpansPerSecond
	cfg.Budget.BytesPerSecond = budget.BytesPerSecond
	cfg.NumShards = 8
	ts := newTestSampler(t, cfg)
	return ts, newFleetRun(ts, workload.FleetOptions{ErrorShare: 0.01, Seed: seed}, 300)
}

func (r *fleetRun) run(seconds int) {
	adjustSteps := int(r.ts.p.cfg.AdjustInterval / (100 * time.Millisecond))
	for s := 0; s < seconds; s++ {
		before := r.ts.sink.SpanCount()
		for step := 0; step < 10; step++ {
			for range r.perStep {
				r.traces = append(r.traces, r.fleet.Start(r.ts.now))
			}
			for _, req := range r.fleet.Exports(r.ts.now) {
				r.send(req.Traces)
			}
			r.ts.advance(100 * time.Millisecond)
			r.steps++
			if r.ts.p.relief.Enabled() {
				r.ts.p.updateRelief()
				if r.steps%10 == 0 {
					r.ts.p.measureRelief()
				}
			}
			if r.steps%10 == 0 || r.steps%adjustSteps == 0 {
				r.ts.p.adj.Tick(r.ts.now)
			}
		}
		r.keptAt = append(r.keptAt, r.ts.sink.SpanCount()-before)
		r.bytesAt = append(r.bytesAt, r.leftBytes())
	}
}

func (r *fleetRun) send(td ptrace.Traces) {
	r.sent += td.SpanCount()
	if r.onSend != nil {
		r.onSend(td)
	}
	r.ts.send(td)
}

// leftBytes sizes what reached the sink since the last call.
func (r *fleetRun) leftBytes() int {
	var m ptrace.ProtoMarshaler
	all := r.ts.sink.AllTraces()
	n := 0
	for _, td := range all[r.counted:] {
		n += m.TracesSize(td)
	}
	r.counted = len(all)
	return n
}

// finish stops starting traces, lets every pod export what it holds and
// every pending trace be decided.
func (r *fleetRun) finish() {
	r.perStep = 0
	r.run(15)
	for _, req := range r.fleet.Drain() {
		r.send(req.Traces)
	}
	require.NoError(r.ts.t, r.ts.p.Shutdown(context.Background()))
}

func meanOf(xs []int) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// SDK clients export every 5 s at independent phases: a trace's fragments
// arrive seconds apart, the error often only on a late downstream span.
func TestRealExportDelaysKeepEveryErrorWholeAndTheBudget(t *testing.T) {
	ts, r := sdkFleetRun(t, 7, BudgetConfig{SpansPerSecond: 600})
	r.run(45)
	kept := meanOf(r.keptAt[30:45])
	assert.InEpsilon(t, 600, kept, 0.10, "kept %.0f spans/s, late spans included", kept)
	r.finish()

	keptSpans := ts.keptSpans()
	var errors, whole int
	for _, tr := range r.traces {
		if !tr.Error {
			continue
		}
		errors++
		if len(keptSpans[tr.ID]) == tr.Spans {
			whole++
		}
	}
	require.Greater(t, errors, 100)
	assert.Equal(t, errors, whole, "every error trace kept whole")
	assert.Zero(t, ts.metric(metadata.MetricLateSpans), "the default waits cover an SDK's 5 s export delay")
}

// A bytes budget holds for the bytes that leave. SDK clients' traces come
// in a fragment per service, each with its resource; kept fragments leave
// merged per resource, smaller than they were buffered (and booked at
// decision): the budget learns by how much.
func TestBytesBudgetHoldsForWhatLeaves(t *testing.T) {
	// About 550 kB/s offered.
	_, r := sdkFleetRun(t, 11, BudgetConfig{BytesPerSecond: 150_000})
	r.run(60)
	left := meanOf(r.bytesAt[40:60])
	assert.InEpsilon(t, 150_000, left, 0.10, "%.0f bytes/s left", left)
}

// A late fragment that carries the only error of a trace already decided
// not-sampled is kept: a partial error trace beats none.
func TestLateErrorOfANotSampledTraceIsKept(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	storeBaselinePolicy(ts, "api", 0.01)
	id := traceIDWithRandomness(1, 0.5)
	ts.send(oneSpan("api", id, 1, 0, ts.now, time.Millisecond))
	ts.advance(ts.p.cfg.DecisionWait)
	require.Empty(t, ts.keptSpans())
	late := oneSpan("db", id, 2, 1, ts.now, time.Millisecond)
	late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
	ts.send(late)
	again := oneSpan("db", id, 3, 2, ts.now, time.Millisecond)
	ts.send(again)
	spans := ts.keptSpans()[id]
	require.Len(t, spans, 2, "the late error and what follows it are kept")
	for _, s := range spans {
		assert.Equal(t, "ot=th:0", s.TraceState().AsRaw())
	}
	assert.Equal(t, 1.0, ts.metric(metadata.MetricTraces, decisionAttr("sampled"), reasonAttr("late_error")))
}

// Head-sampled input (ot=th on every span): the tail stage samples in
// proportion, so the budget holds and weights represent the traffic before
// both stages.
func TestHeadSampledInputIsSampledProportionally(t *testing.T) {
	mixes := [][]float64{{0.1}, {1, 0.25, 0.05}, {0.5, 0.02}}
	// And mixes drawn at random: a property of any mix, not of these.
	rng := rand.New(rand.NewPCG(235, 1))
	for range 3 {
		var mix []float64
		for range 1 + rng.IntN(4) {
			mix = append(mix, math.Pow(10, -2*rng.Float64())) // 1% … 100%
		}
		mixes = append(mixes, mix)
	}
	for _, mix := range mixes {
		cfg := createDefaultConfig()
		cfg.Budget.SpansPerSecond = 150
		cfg.NumShards = 4
		cfg.Outliers.MinObservations = 1 << 30
		cfg.Outliers.FallbackLatencyThreshold = time.Hour
		ts := newTestSampler(t, cfg)
		r := newFleetRun(ts, workload.FleetOptions{HeadProbabilities: mix, Depth: 2, ExportDelay: time.Second, Seed: 11}, 1500)
		r.run(60)
		kept := meanOf(r.keptAt[20:60])
		assert.InEpsilon(t, 150, kept, 0.10, "mix %v: kept %.0f spans/s", mix, kept)
		defer func(mix []float64, kept float64) {
			t.Logf("head mix %.3v: kept %.0f spans/s for a budget of 150", mix, kept)
		}(mix, kept)
		r.finish()
		var represented float64
		for _, td := range ts.sink.AllTraces() {
			spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
				th, ok := thresholdOf(s.TraceState().AsRaw())
				require.True(t, ok, "th on every kept span")
				represented += th.AdjustedCount()
			})
		}
		assert.InEpsilon(t, float64(r.fleet.Offered), represented, 0.05,
			"mix %v: kept spans' adjusted counts represent the spans before head sampling", mix)
		t.Logf("head mix %.3v: represented %+.2f%% of the spans before head sampling", mix, 100*(represented/float64(r.fleet.Offered)-1))
	}
}

func thresholdOf(ts string) (sampling.Threshold, bool) {
	w3c, err := sampling.NewW3CTraceState(ts)
	if err != nil {
		return sampling.Threshold{}, false
	}
	return w3c.OTelValue().TValueThreshold()
}

// The tracestate as SDKs and proxies really send it.
func TestTracestateEdgeCases(t *testing.T) {
	run := func(t *testing.T, raw string) (ptrace.Span, *testSampler) {
		cfg := testConfig()
		ts := newTestSampler(t, cfg)
		id := traceIDWithRandomness(1, 0.9)
		td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw(raw)
		ts.send(td)
		ts.advance(3 * time.Second)
		spans := ts.keptSpans()[id]
		require.Len(t, spans, 1)
		return spans[0], ts
	}
	t.Run("rv below th is inconsistent: th erased and counted", func(t *testing.T) {
		// rv 0x10… < th 0x8…: the span could not have been sampled at th.
		s, ts := run(t, "ot=rv:10000000000000;th:8")
		th, ok := thresholdOf(s.TraceState().AsRaw())
		require.True(t, ok)
		assert.Equal(t, 1.0, th.AdjustedCount(), "the weight of an inconsistent th is not trusted")
		assert.Equal(t, 1.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("inconsistent_threshold")))
	})
	t.Run("32 members of 256 characters", func(t *testing.T) {
		var members []string
		for i := 0; i < 32; i++ {
			members = append(members, "v"+string(rune('a'+i%26))+string(rune('a'+i/26))+"="+repeat('x', 256))
		}
		s, ts := run(t, join(members))
		out := s.TraceState().AsRaw()
		_, ok := thresholdOf(firstMember(out))
		assert.True(t, ok, "th written")
		assert.Equal(t, 32, countMembers(out), "W3C: at most 32 members, the rightmost dropped")
		assert.Equal(t, 1.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("tracestate_truncated")))
	})
	t.Run("unparseable tracestate counted and replaced", func(t *testing.T) {
		s, ts := run(t, "this is not=a,,tracestate")
		_, ok := thresholdOf(s.TraceState().AsRaw())
		assert.True(t, ok, "th on every kept span")
		assert.Equal(t, 1.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("unparseable_tracestate")))
	})
	t.Run("unparseable ot member: other vendors kept", func(t *testing.T) {
		s, ts := run(t, "ot=th:zz,vendor=abc")
		out := s.TraceState().AsRaw()
		assert.Contains(t, out, "vendor=abc")
		_, ok := thresholdOf(out)
		assert.True(t, ok)
		assert.Equal(t, 1.0, ts.metric(metadata.MetricInvalidSpans, attributeCause("unparseable_tracestate")))
	})
}

func repeat(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func join(ms []string) string {
	out := ""
	for i, m := range ms {
		if i > 0 {
			out += ","
		}
		out += m
	}
	return out
}

func countMembers(ts string) int {
	n := 1
	for i := 0; i < len(ts); i++ {
		if ts[i] == ',' {
			n++
		}
	}
	return n
}

func firstMember(ts string) string {
	for i := 0; i < len(ts); i++ {
		if ts[i] == ',' {
			return ts[:i]
		}
	}
	return ts
}

// Clock skew between hosts must not make outliers: the root span's own
// duration is the trace's.
func TestClockSkewDoesNotMakeOutliers(t *testing.T) {
	cfg := testConfig()
	cfg.Outliers.MinObservations = 50
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "web", sampling.MinSamplingProbability)
	for i := 0; i < 200; i++ {
		id := traceIDWithRandomness(uint64(i), 0.5)
		ts.send(oneSpan("web", id, 1, 0, ts.now, time.Duration(50+i%100)*time.Millisecond))
		ts.send(oneSpan("db", id, 2, 1, ts.now.Add(10*time.Millisecond), 50*time.Millisecond))
	}
	ts.advance(ts.p.cfg.DecisionWait)
	// The db host's clock runs 900 ms ahead.
	id := traceIDWithRandomness(999, 0.5)
	ts.send(oneSpan("web", id, 1, 0, ts.now, 100*time.Millisecond))
	ts.send(oneSpan("db", id, 2, 1, ts.now.Add(910*time.Millisecond), 50*time.Millisecond))
	ts.advance(ts.p.cfg.DecisionWait)
	assert.NotContains(t, ts.keptSpans(), id, "a skewed child does not make the trace slow")
}

// Without a root (a proxy propagates a parent it never exports) the group is
// the top-most span's, whatever order the fragments arrive in.
func TestGroupWithoutRootIsTheTopMostSpans(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	proxy := byte(200)
	for i := 0; i < 40; i++ {
		id := traceIDWithRandomness(uint64(i), 0.5)
		entry := oneSpan("web", id, 1, proxy, ts.now, 100*time.Millisecond)
		entry.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName("GET /checkout")
		child := oneSpan("db", id, 2, 1, ts.now.Add(10*time.Millisecond), 20*time.Millisecond)
		child.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName("SELECT")
		if i%2 == 0 {
			ts.send(child)
			ts.send(entry)
		} else {
			ts.send(entry)
			ts.send(child)
		}
	}
	ts.advance(ts.p.cfg.DecisionWait)
	keys := ts.p.groups.Keys()
	assert.Equal(t, []string{"web\x1fGET /checkout"}, keys)
}

// max_traces and max_buffered_bytes hold for the whole processor.
func TestBoundsAreGlobalWhateverTheShards(t *testing.T) {
	cfg := testConfig()
	cfg.NumShards = 256
	cfg.MaxBufferedBytes = 4 << 20
	cfg.MaxTraces = 100
	ts := newTestSampler(t, cfg)
	big := traceIDWithRandomness(1, 0.5)
	for i := 0; i < 300; i++ { // ≈ 1.5 MiB in one trace
		td := oneSpan("api", big, byte(i%250+1), 1, ts.now, time.Millisecond)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("payload", repeat('p', 5000))
		ts.send(td)
	}
	for i := 0; i < 99; i++ {
		ts.send(oneSpan("api", traceIDWithRandomness(uint64(100+i), 0.5), 1, 0, ts.now, time.Millisecond))
	}
	assert.Zero(t, ts.metric(metadata.MetricTraces, reasonAttr("forced")), "within the bounds nothing is forced")
	assert.Equal(t, 100.0, ts.metric(metadata.MetricBufferedTraces))
	// One more trace: the oldest across all shards (the big one) is forced.
	ts.send(oneSpan("api", traceIDWithRandomness(1000, 0.5), 1, 0, ts.now, time.Millisecond))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricTraces, reasonAttr("forced")))
	assert.Len(t, ts.keptSpans()[big], 300)
}

// A fresh sampler, and one back from idling, keeps about its budget from its
// first second.
func TestNoBudgetSpikeAtStartOrAfterIdling(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Budget.SpansPerSecond = 300
	cfg.NumShards = 4
	ts := newTestSampler(t, cfg)
	r := newFleetRun(ts, workload.FleetOptions{Seed: 5, ExportDelay: time.Second}, 500) // 3,000 spans/s
	r.run(20)
	for s, k := range r.keptAt {
		assert.Less(t, float64(k), 1.5*300, "second %d after start kept %d spans", s, k)
	}
	r.perStep = 0
	r.run(60)
	r.perStep = 50
	from := len(r.keptAt)
	r.run(20)
	for s, k := range r.keptAt[from:] {
		assert.Less(t, float64(k), 1.5*300, "second %d after idling kept %d spans", s, k)
	}
}

// The root span can arrive in any fragment: the reason goes on it.
func TestReasonOnARootThatArrivedLast(t *testing.T) {
	cfg := testConfig()
	cfg.ReasonAttribute = "sampling.reason"
	ts := newTestSampler(t, cfg)
	id := traceIDWithRandomness(1, 0.5)
	ts.send(oneSpan("db", id, 2, 1, ts.now, time.Millisecond))
	ts.send(oneSpan("api", id, 1, 0, ts.now, 2*time.Second)) // slower than the 1s fallback
	ts.advance(3 * time.Second)
	var reasons []string
	for _, s := range ts.keptSpans()[id] {
		if v, ok := s.Attributes().Get("sampling.reason"); ok {
			reasons = append(reasons, v.Str())
			assert.True(t, s.ParentSpanID().IsEmpty())
		}
	}
	assert.Equal(t, []string{"outlier"}, reasons)
}

type ctxKey struct{}

// ctxSink records the context value each forwarded batch carried.
type ctxSink struct {
	seen []any
}

func (c *ctxSink) ConsumeTraces(ctx context.Context, _ ptrace.Traces) error {
	c.seen = append(c.seen, ctx.Value(ctxKey{}))
	return nil
}
func (c *ctxSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// Traces forced out while serving one request belong to other clients: they
// must not travel with that request's context (its client metadata).
func TestForcedDecisionsDoNotCarryTheRequestsContext(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTraces = 1
	sink := &ctxSink{}
	set := processortest.NewNopSettings(metadata.Type)
	p, err := newBudgetTailSampler(set, cfg, sink)
	require.NoError(t, err)
	now := time.Unix(1_700_000_000, 0)
	p.now = func() time.Time { return now }
	first := traceIDWithRandomness(1, 0.5)
	require.NoError(t, p.ConsumeTraces(context.WithValue(context.Background(), ctxKey{}, "tenant-a"), oneSpan("api", first, 1, 0, now, time.Millisecond)))
	// tenant-b's request forces tenant-a's trace out.
	second := traceIDWithRandomness(2, 0.5)
	require.NoError(t, p.ConsumeTraces(context.WithValue(context.Background(), ctxKey{}, "tenant-b"), oneSpan("api", second, 1, 0, now, time.Millisecond)))
	require.Equal(t, []any{nil}, sink.seen, "the forced trace went on without tenant-b's context")
	// A late span of the kept trace, in tenant-a's request, keeps its context.
	require.NoError(t, p.ConsumeTraces(context.WithValue(context.Background(), ctxKey{}, "tenant-a"), oneSpan("api", first, 2, 1, now, time.Millisecond)))
	assert.Equal(t, []any{nil, "tenant-a"}, sink.seen)
}

// With a bytes budget, the bytes writing th adds are in the budget: what
// leaves matches what was booked.
func TestStampBytesAreInTheBudget(t *testing.T) {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 0
	cfg.Budget.BytesPerSecond = 1e9
	ts := newTestSampler(t, cfg)
	g := workload.NewGenerator(workload.Options{Services: 3, Seed: 9})
	td, _ := g.Batch(200)
	ts.send(td)
	ts.advance(3 * time.Second)
	v, _, _ := ts.p.drain()
	// The budget books each kept fragment as it was buffered — its spans
	// with their resource and scope — and the th written into it; what
	// leaves is merged per resource, so it is at most that.
	var m ptrace.ProtoMarshaler
	left, asBuffered := 0, 0
	for _, out := range ts.sink.AllTraces() {
		left += m.TracesSize(out)
		for _, one := range byTrace(out) {
			asBuffered += m.TracesSize(one)
		}
	}
	// th is estimated at 12 bytes a span; "ot=th:8" takes 9.
	assert.InEpsilon(t, float64(asBuffered), v.Kept(), 0.02, "booked %.0f bytes, the kept traces as buffered %d", v.Kept(), asBuffered)
	assert.Less(t, float64(left), v.Kept(), "what left, merged per resource")
}

// byTrace splits td into a Traces per trace holding its spans under their
// resource and scope: what a trace sent whole in one request was buffered
// as.
func byTrace(td ptrace.Traces) map[pcommon.TraceID]ptrace.Traces {
	out := map[pcommon.TraceID]ptrace.Traces{}
	type place struct {
		id     pcommon.TraceID
		rs, ss int
	}
	scopes := map[place]ptrace.SpanSlice{}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				s := ss.Spans().At(k)
				at := place{s.TraceID(), i, j}
				spans, ok := scopes[at]
				if !ok {
					one, ok := out[at.id]
					if !ok {
						one = ptrace.NewTraces()
						out[at.id] = one
					}
					to := one.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(to.Resource())
					toSS := to.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(toSS.Scope())
					spans = toSS.Spans()
					scopes[at] = spans
				}
				s.CopyTo(spans.AppendEmpty())
			}
		}
	}
	return out
}

// Skewed clocks (±400 ms between pods) and a third of the traces without a
// root: slow-mode traces are still all kept, and skew makes no outliers.
func TestOutliersWithSkewAndMissingRoots(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Budget.SpansPerSecond = 1000
	cfg.NumShards = 4
	ts := newTestSampler(t, cfg)
	r := newFleetRun(ts, workload.FleetOptions{Services: 3, ExportDelay: time.Second, SlowShare: 0.02, SlowDuration: 3 * time.Second,
		ClockSkew: 400 * time.Millisecond, MissingRootShare: 0.3, QuantizeMillis: true, Seed: 21}, 200)
	r.run(20) // learning
	storeBaselinePolicy(ts, "", sampling.MinSamplingProbability)
	learned := len(r.traces)
	r.run(60)
	r.finish()
	kept := ts.keptSpans()
	slow, slowKept, body, bodyKept := 0, 0, 0, 0
	for _, tr := range r.traces[learned:] {
		_, ok := kept[tr.ID]
		if tr.Slow {
			slow++
			if ok && len(kept[tr.ID]) == tr.Spans {
				slowKept++
			}
		} else {
			body++
			if ok {
				bodyKept++
			}
		}
	}
	share := float64(bodyKept) / float64(body)
	t.Logf("skew ±400 ms, 30%% without root: slow kept whole %d/%d, other traces kept as outliers %.2f%%", slowKept, slow, 100*share)
	assert.Equal(t, slow, slowKept)
	assert.Less(t, share, 0.02)
	// With or without its root, a trace is grouped by its entry operation.
	assert.Equal(t, []string{"svc-000\x1fGET /svc-000/op", "svc-001\x1fGET /svc-001/op", "svc-002\x1fGET /svc-002/op"}, ts.p.groups.Keys())
}
