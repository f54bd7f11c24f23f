package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Fresh IDs replace every trace ID, keep the spans of a trace together and
// leave a request that still decodes to the same spans.
func TestFreshIDsKeepRequestsValid(t *testing.T) {
	reqs, err := buildRequests(2)
	require.NoError(t, err)
	orig := ptraceotlp.NewExportRequest()
	require.NoError(t, orig.UnmarshalProto(reqs[0].body))
	before := map[pcommon.TraceID]bool{}
	rss := orig.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		before[rss.At(i).ScopeSpans().At(0).Spans().At(0).TraceID()] = true
	}

	body := reqs[0].withFreshIDs(nil)
	got := ptraceotlp.NewExportRequest()
	require.NoError(t, got.UnmarshalProto(body))
	require.Equal(t, reqs[0].spans, got.Traces().SpanCount())
	seen := map[pcommon.TraceID]bool{}
	rss = got.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		id := spans.At(0).TraceID()
		for j := 0; j < spans.Len(); j++ {
			assert.Equal(t, id, spans.At(j).TraceID(), "one ID per trace")
		}
		assert.False(t, before[id], "trace ID replaced")
		assert.False(t, seen[id], "a new ID per trace")
		seen[id] = true
	}
	assert.Len(t, seen, 100)
}

// A ramp rises by its factor while steps pass, then bisects between the
// highest rate passed and the lowest failed, so that the limit it reports
// is within the refinement's bracket rather than a whole factor below.
func TestRampPlanBisectsAfterTheFirstFailure(t *testing.T) {
	const limit = 500.0
	plan := rampPlan{start: 100, factor: 2, steps: 10, refine: 3}
	var done []stepResult
	for {
		rate, ok := plan.next(done)
		if !ok {
			break
		}
		r := stepResult{offered: rate, sent: min(rate, limit), passed: rate <= limit}
		done = append(done, r)
		require.Less(t, len(done), 20, "the plan ends")
	}
	var offered []float64
	for _, r := range done {
		offered = append(offered, r.offered)
	}
	// 100, 200, 400 pass; 800 fails; then √(400·800) fails,
	// √(400·565.7) passes, √(475.7·565.7) fails.
	require.Len(t, offered, 7)
	assert.InDeltaSlice(t, []float64{100, 200, 400, 800, 565.7, 475.7, 518.8}, offered, 0.1)
	best := sustained(done)
	require.NotNil(t, best)
	assert.InDelta(t, 475.7, best.offered, 0.1, "within 9% of the limit, not 20%")

	// Without refinement the ramp stops at its first failure; when every
	// step passes it stops after its steps.
	plan.refine = 0
	rate, ok := plan.next(done[:4])
	assert.False(t, ok, "stops at the first failure: %v", rate)
	allPassed := []stepResult{{offered: 100, passed: true}, {offered: 200, passed: true}}
	plan.steps = 2
	_, ok = plan.next(allPassed)
	assert.False(t, ok, "stops after its steps")
	// Nothing passed: nothing to bisect.
	plan.refine = 3
	_, ok = plan.next([]stepResult{{offered: 100}})
	assert.False(t, ok)
}

// Explicit rates are offered in their order, failed or not, and no more.
func TestRampPlanTakesExplicitRates(t *testing.T) {
	plan := rampPlan{start: 1, factor: 2, steps: 9, refine: 3, rates: []float64{500, 300, 400}}
	var done []stepResult
	for {
		r, ok := plan.next(done)
		if !ok {
			break
		}
		done = append(done, stepResult{offered: r, passed: r < 450})
	}
	require.Len(t, done, 3)
	assert.Equal(t, []float64{500, 300, 400}, []float64{done[0].offered, done[1].offered, done[2].offered})
}

// One short step against the built binary measures something for every
// setup: spans accepted, the collector's CPU per span, its memory.
func TestRampMeasuresEverySetup(t *testing.T) {
	bin := builtBinary(t)
	reqs, err := buildRequests(4)
	require.NoError(t, err)
	for _, name := range []string{"bare", "tail", "contrib", "gateway", "gateway_contrib", "gateway_decoded"} {
		t.Run(name, func(t *testing.T) {
			warm, res, err := ramp(bin, setupsByName[name], reqs, rampPlan{start: 4000, factor: 2, steps: 1}, 3*time.Second, 4)
			require.NoError(t, err)
			assert.Nil(t, warm, "no warm-up asked for")
			require.Len(t, res, 1)
			r := res[0]
			assert.Positive(t, r.accepted)
			assert.InDelta(t, 4000, r.sent, 1000, "the offered rate is sent")
			assert.Zero(t, r.refusedShare)
			assert.Positive(t, r.cpuPerSpan)
			assert.Positive(t, r.rssMiB)
			assert.Positive(t, r.p50, "every export is timed")
			assert.GreaterOrEqual(t, r.p99, r.p50)
			if strings.HasPrefix(name, "gateway") {
				assert.Positive(t, r.sinkRequests, "the gateway delivers to the sinks")
			}
		})
	}
}

// A warm-up runs at the first step's rate before it and is reported apart:
// the steps, and so the limit, measure the setup after it.
func TestRampWarmsUpBeforeTheFirstStep(t *testing.T) {
	bin := builtBinary(t)
	reqs, err := buildRequests(4)
	require.NoError(t, err)
	warm, res, err := ramp(bin, setupsByName["tail"], reqs, rampPlan{start: 8000, factor: 2, steps: 2, warmup: 2 * time.Second}, 2*time.Second, 4)
	require.NoError(t, err)
	require.NotNil(t, warm)
	assert.Equal(t, 8000.0, warm.offered)
	assert.Positive(t, warm.accepted)
	require.Len(t, res, 2, "the warm-up is not a step")
	assert.Equal(t, []float64{8000, 16000}, []float64{res[0].offered, res[1].offered})
	// Steps start from zero: the warm-up's spans are in no step.
	assert.InDelta(t, 8000*2, res[0].accepted, 4000)
}

// The comparison takes the highest rate both setups sustained, not each
// one's own limit.
func TestCompareAtTheSameRate(t *testing.T) {
	bare := []stepResult{
		{offered: 100, sent: 100, cpuPerSpan: 4, passed: true},
		{offered: 200, sent: 200, cpuPerSpan: 3, passed: true},
		{offered: 400, sent: 390, cpuPerSpan: 2.5, passed: true},
	}
	tail := []stepResult{
		{offered: 100, sent: 100, cpuPerSpan: 5, passed: true},
		{offered: 200, sent: 200, cpuPerSpan: 3.6, passed: true},
		{offered: 400, sent: 300, cpuPerSpan: 3, passed: false},
	}
	got := compare("tail", tail, bare)
	assert.Contains(t, got, "1.20× the CPU per span at 200 spans/s offered")
	assert.Contains(t, got, "sustains 51% of bare's spans/s (200 vs 390)")
	assert.Contains(t, compare("tail", tail[2:], bare), "no rate both sustained")
}

// Percentiles come from the sorted latencies: the median and the 99th of a
// hundred, whatever order they were recorded in.
func TestPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p50, p99 := percentiles(d)
	assert.Equal(t, 51*time.Millisecond, p50)
	assert.Equal(t, 100*time.Millisecond, p99)
	p50, p99 = percentiles(nil)
	assert.Zero(t, p50)
	assert.Zero(t, p99)
}

// builtBinary is the distribution these tests run (OTELCOL_COST_BIN); the
// test is skipped without it, or with -short.
func builtBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("OTELCOL_COST_BIN")
	if bin == "" || testing.Short() {
		t.Skip("needs the built binary: OTELCOL_COST_BIN")
	}
	return bin
}
