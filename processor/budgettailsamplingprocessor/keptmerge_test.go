package budgettailsamplingprocessor

import (
	"testing"
	"time"

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

// On SDK clients' traffic (a trace in a part per service, each pod's
// resource on every part) what leaves is much smaller than the fragments
// as buffered: a pass's parts from one pod share one resource.
func TestMergedOutputOfSDKTraffic(t *testing.T) {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 0
	cfg.Budget.BytesPerSecond = 1e12
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "", 1)
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
	t.Logf("what left: %d bytes in %d ResourceSpans; booked as buffered: %.0f bytes (%.2f×)", left, resources, v.Kept(), float64(left)/v.Kept())
	// Fragment by fragment, what left was the booked volume (1.0×); 0.66×
	// when merging was added.
	assert.Less(t, float64(left), 0.8*v.Kept(), "merged per resource")
}
