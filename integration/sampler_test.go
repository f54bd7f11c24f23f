package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// TestTailSamplerThroughTheBinary runs configs/tail.yaml with the backend
// overlay against a real OTLP sink: children arrive before their roots, in
// other requests; every error and slow trace must arrive complete and the
// kept volume must meet the budget.
func TestTailSamplerThroughTheBinary(t *testing.T) {
	const (
		budget        = 500.0 // spans/s
		tracesPerTick = 50    // every 100ms: 500 traces/s, 2,000 spans/s
		runFor        = 26 * time.Second
	)
	sink := startSink(t)
	c := startCollector(t, map[string]string{
		"OTLP_BACKEND_ENDPOINT":    sink.Addr,
		"BUDGET_SPANS_PER_SECOND":  "500",
		"ADJUST_INTERVAL":          "2s",
		"DECISION_WAIT":            "5s",
		"DECISION_WAIT_AFTER_ROOT": "1s",
	}, configPath("tail.yaml"), configPath("backend.yaml"))

	g := workload.NewGenerator(workload.Options{Services: 5, ErrorEvery: 50, SlowEvery: 75, Seed: 42})
	var errorIDs, slowIDs []pcommon.TraceID
	start := time.Now()
	next := start
	pendingRoots := ptrace.NewTraces()
	for time.Since(start) < runFor {
		td, traces := g.Batch(tracesPerTick)
		for _, tr := range traces {
			if tr.Error {
				errorIDs = append(errorIDs, tr.ID)
			} else if tr.Slow {
				slowIDs = append(slowIDs, tr.ID)
			}
		}
		roots, children := workload.SplitRoots(td)
		require.NoError(t, c.sendGRPC(children))
		if pendingRoots.SpanCount() > 0 {
			require.NoError(t, c.sendGRPC(pendingRoots))
		}
		pendingRoots = roots
		next = next.Add(100 * time.Millisecond)
		time.Sleep(time.Until(next))
	}
	require.NoError(t, c.sendGRPC(pendingRoots))
	end := time.Now()
	// Read the sampler's own figures while the load is still in its last interval.
	fams := c.metrics()
	sampled, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_traces_total", map[string]string{"decision": "sampled"})
	notSampled, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_traces_total", map[string]string{"decision": "not_sampled"})
	assert.Positive(t, sampled)
	assert.Greater(t, notSampled, sampled, "most traffic is sampled out at a 4× overload")
	util, ok := metricValue(fams, "otelcol_processor_budget_tail_sampling_budget_utilization_ratio", nil)
	require.True(t, ok)
	assert.InDelta(t, 1.0, util, 0.15)
	egress, ok := metricValue(fams, "otelcol_processor_budget_tail_sampling_egress_to_booked_ratio", nil)
	require.True(t, ok, "the egress ratio is exposed")
	assert.Equal(t, 1.0, egress, "a spans budget does not correct for bytes")

	// Decisions land within decision_wait_after_root (+ the batch timeout).
	eventually(t, 20*time.Second, func() bool {
		for _, id := range append(append([]pcommon.TraceID{}, errorIDs...), slowIDs...) {
			if len(sink.trace(id)) < 4 {
				return false
			}
		}
		return true
	}, "every error and slow trace complete at the sink")
	require.NotEmpty(t, errorIDs)
	require.NotEmpty(t, slowIDs)
	for _, id := range errorIDs {
		spans := sink.trace(id)
		assert.Len(t, spans, 4)
		for _, s := range spans {
			assert.Equal(t, "ot=th:0", s.TraceState().AsRaw(), "priority traces are kept at probability 1")
		}
	}

	// After warm-up (a few adjust intervals), the kept rate meets the budget.
	from, to := start.Add(10*time.Second), end
	kept := float64(sink.spansBetween(from, to)) / to.Sub(from).Seconds()
	t.Logf("offered %.0f spans/s, kept %.0f spans/s against a budget of %.0f", tracesPerTick*10*4.0, kept, budget)
	assert.InEpsilon(t, budget, kept, 0.10)

	c.stop()
}

// TestBytesBudgetThroughTheBinary: with a bytes budget, what reaches the
// backend meets it. SDK clients export a trace in a fragment per service,
// each with its pod's resource; kept fragments leave the sampler joined per
// resource, a third smaller than they were buffered and booked. The
// sampler learns the ratio (egress_to_booked_ratio) and keeps more, so the
// budget is spent, not two thirds of it.
func TestBytesBudgetThroughTheBinary(t *testing.T) {
	const (
		budget        = 150_000.0 // bytes/s, about a quarter of what is offered
		tracesPerTick = 30        // every 100ms: 300 traces/s of 6 spans
		runFor        = 60 * time.Second
	)
	overlay := filepath.Join(t.TempDir(), "bytes-budget.yaml")
	require.NoError(t, os.WriteFile(overlay, fmt.Appendf(nil, `processors:
  budget_tail_sampling:
    budget:
      spans_per_second: 0
      bytes_per_second: %.0f
`, budget), 0o600))
	sink := startSink(t)
	c := startCollector(t, map[string]string{
		"OTLP_BACKEND_ENDPOINT": sink.Addr,
		// The waits cover the fleet's 5-s exports; the default adjust
		// interval (5 s) spans one export of every pod.
		"DECISION_WAIT":            "8s",
		"DECISION_WAIT_AFTER_ROOT": "6s",
	}, configPath("tail.yaml"), configPath("backend.yaml"), overlay)

	start := time.Now()
	fleet := workload.NewFleet(workload.FleetOptions{ErrorShare: 0.01, Seed: 5}, start)
	next := start
	for time.Since(start) < runFor {
		now := time.Now()
		for range tracesPerTick {
			fleet.Start(now)
		}
		for _, req := range fleet.Exports(now) {
			require.NoError(t, c.sendGRPC(req.Traces))
		}
		next = next.Add(100 * time.Millisecond)
		time.Sleep(time.Until(next))
	}
	end := time.Now()
	fams := c.metrics()
	ratio, ok := metricValue(fams, "otelcol_processor_budget_tail_sampling_egress_to_booked_ratio", nil)
	require.True(t, ok)
	assert.Less(t, ratio, 0.85, "kept fragments leave joined per resource, smaller than booked")

	from := start.Add(36 * time.Second)
	left := float64(sink.bytesBetween(from, end)) / end.Sub(from).Seconds()
	t.Logf("%.0f bytes/s reached the backend against a budget of %.0f; egress/booked %.3f", left, budget, ratio)
	assert.InEpsilon(t, budget, left, 0.15)
	c.stop()
}
