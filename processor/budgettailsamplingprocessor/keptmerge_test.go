package budgettailsamplingprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// Traces a pass keeps leave as one request with a ResourceSpans per
// resource, not one per fragment (each with its resource again), and each
// span still carries its own trace's threshold and reason.
func TestKeptFragmentsLeaveMergedPerResource(t *testing.T) {
	cfg := testConfig()
	cfg.ReasonAttribute = "sampling.reason"
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "", 0.5)
	ts.p.priming.Store(false)
	ts.p.lastAdj = ts.now.Add(time.Hour)

	start := ts.now
	type sent struct {
		id      pcommon.TraceID
		service string
		err     bool
	}
	traces := []sent{
		{traceIDWithRandomness(1, 0.9), "checkout", true},
		{traceIDWithRandomness(2, 0.9), "checkout", false},
		{traceIDWithRandomness(3, 0.9), "cart", false},
		{traceIDWithRandomness(4, 0.9), "checkout", false},
	}
	// Each trace in two requests: a child, then its root.
	for _, tr := range traces {
		child := oneSpan(tr.service, tr.id, 2, 1, start, 10*time.Millisecond)
		if tr.err {
			child.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
		}
		ts.send(child)
	}
	for _, tr := range traces {
		ts.send(oneSpan(tr.service, tr.id, 1, 0, start, 20*time.Millisecond))
	}
	ts.advance(3 * time.Second)

	require.Len(t, ts.sink.AllTraces(), 1, "one pass, one request")
	td := ts.sink.AllTraces()[0]
	require.Equal(t, 8, td.SpanCount())
	services := map[string]int{}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		name, _ := rs.Resource().Attributes().Get("service.name")
		services[name.Str()]++
		assert.Equal(t, 1, rs.ScopeSpans().Len(), "one ScopeSpans per scope in %s", name.Str())
	}
	assert.Equal(t, map[string]int{"checkout": 1, "cart": 1}, services, "ResourceSpans per service")

	errID := traces[0].id
	spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
		th, reason := "ot=th:8", "baseline"
		if s.TraceID() == errID {
			th, reason = "ot=th:0", "error"
		}
		assert.Equal(t, th, s.TraceState().AsRaw(), "threshold of a span of %x", s.TraceID())
		got, ok := s.Attributes().Get("sampling.reason")
		if s.ParentSpanID().IsEmpty() {
			assert.Equal(t, reason, got.Str(), "reason on the root of %x", s.TraceID())
		} else {
			assert.False(t, ok, "no reason on a child span")
		}
	})
}

// Fragments that differ in their resource or scope stay apart; equal ones
// join whatever their order, and no span is lost or doubled.
func TestKeptMergerGroupsByResourceAndScope(t *testing.T) {
	build := func(service, scope string, spans ...byte) []byte {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		for _, b := range spans {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{b})
			s.SetSpanID(pcommon.SpanID{b})
		}
		var m ptrace.ProtoMarshaler
		out, err := m.MarshalTraces(td)
		require.NoError(t, err)
		return out
	}
	m := newKeptMerger()
	m.add(build("a", "http", 1, 2), mark{reason: "1"})
	m.add(build("b", "http", 3), mark{reason: "2"})
	m.add(build("a", "db", 4), mark{reason: "3"})
	m.add(build("a", "http", 5), mark{reason: "4"})
	encoded, marks, err := m.merged()
	require.NoError(t, err)
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(encoded)
	require.NoError(t, err)

	var got []string
	i := 0
	spanwalk.Traces(td, func(rs ptrace.ResourceSpans, s ptrace.Span) {
		svc, _ := rs.Resource().Attributes().Get("service.name")
		got = append(got, svc.Str()+"/"+string('0'+rune(s.TraceID()[0]))+"/"+marks[i].reason)
		i++
	})
	assert.Equal(t, []string{"a/1/1", "a/2/1", "a/5/4", "a/4/3", "b/3/2"}, got)
	assert.Equal(t, 2, td.ResourceSpans().Len())
	assert.Equal(t, 2, td.ResourceSpans().At(0).ScopeSpans().Len(), "a's http and db scopes")
}

// On SDK clients' traffic (a trace in a part per service, each pod's
// resource on every part) what leaves is much smaller than the fragments
// as buffered: a pass's parts from one pod share one resource.
func TestMergedOutputOfSDKTraffic(t *testing.T) {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 0
	cfg.Budget.BytesPerSecond = 1e12
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "", 1)
	ts.p.priming.Store(false)
	ts.p.lastAdj = ts.now.Add(time.Hour)
	r := newFleetRun(ts, workload.FleetOptions{Seed: 5}, 200)
	r.run(20)
	r.finish()
	v, _, _ := ts.p.drain()
	var m ptrace.ProtoMarshaler
	left, resources := 0, 0
	for _, td := range ts.sink.AllTraces() {
		left += m.TracesSize(td)
		resources += td.ResourceSpans().Len()
	}
	t.Logf("what left: %d bytes in %d ResourceSpans; booked as buffered: %.0f bytes (%.2f×)", left, resources, v.kept, float64(left)/v.kept)
	// Fragment by fragment, what left was the booked volume (1.0×); 0.66×
	// when merging was added.
	assert.Less(t, float64(left), 0.8*v.kept, "merged per resource")
}

// BenchmarkForward hands on what a pass keeps at 100k spans/s and 3% —
// about 60 traces — merged per resource and fragment by fragment, on SDK
// clients' traffic and on the reference workload's (a ResourceSpans a
// trace).
//
//	go test -run '^$' -bench Forward -count 5 ./processor/budgettailsamplingprocessor/
func BenchmarkForward(b *testing.B) {
	for _, shape := range []string{"sdk_batches", "reference"} {
		cfg := testConfig()
		cfg.DecisionWait, cfg.DecisionWaitAfterRoot = time.Hour, time.Hour
		ts := newTestSampler(b, cfg)
		if shape == "sdk_batches" {
			fleet := workload.NewFleet(workload.FleetOptions{Seed: 3}, ts.now)
			for range 100 {
				for range 20 {
					fleet.Start(ts.now)
				}
				ts.now = ts.now.Add(100 * time.Millisecond)
				for _, req := range fleet.Exports(ts.now) {
					require.NoError(b, ts.p.ConsumeTraces(context.Background(), req.Traces))
				}
			}
		} else {
			g := workload.NewGenerator(workload.Options{Services: 10})
			td, _ := g.Batch(2000)
			require.NoError(b, ts.p.ConsumeTraces(context.Background(), td))
		}
		var kept [][][]byte // each trace's chunks
		for _, sh := range ts.p.shards {
			sh.each(func(t *trace) {
				if len(kept) < 60 {
					var data [][]byte
					for _, c := range sh.held(t).chunks {
						data = append(data, c.data)
					}
					kept = append(kept, data)
				}
			})
		}
		ts.p.next = consumertest.NewNop()
		fill := func() *keptMerger {
			m := newKeptMerger()
			for i, chunks := range kept {
				for _, c := range chunks {
					m.add(c, mark{th: sampling.AlwaysSampleThreshold, reason: fmt.Sprint(i % 2)})
				}
			}
			return m
		}
		spans := 0
		for _, chunks := range kept {
			for _, c := range chunks {
				td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(c)
				require.NoError(b, err)
				spans += td.SpanCount()
			}
		}
		// merged_bytes_budget: a bytes budget sizes what leaves (egressMeter).
		for _, name := range []string{"merged", "merged_bytes_budget", "each"} {
			forward, unit := ts.p.forwardMerged, budgetUnit{perSpan: 1}
			switch name {
			case "each":
				forward = ts.p.forwardEach
			case "merged_bytes_budget":
				unit = budgetUnit{perByte: 1}
			}
			b.Run(shape+"/"+name, func(b *testing.B) {
				ts.p.egress = newEgressMeter(unit)
				b.ReportAllocs()
				for range b.N {
					forward(context.Background(), fill())
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			})
		}
	}
}
