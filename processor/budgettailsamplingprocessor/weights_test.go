package budgettailsamplingprocessor

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
)

// Issue 51's workload: the coverage workload (3 services × 40 routes, zipf,
// × 3 statuses) with 1% of traces in error, fairness per (service, route,
// status), rare every minute, and a budget of 2% of the spans made. Errors,
// latency outliers and the rare traces together ask for more than the
// budget: the kept traces' th must still weigh them to the traffic.
const weightsErrorRate = 0.01

// weightsResult is what the kept traces say about the traffic, over the
// minutes counted (decision minutes, the warm-up and the last partial one
// left out).
type weightsResult struct {
	coverage coverageResult
	// represented is the kept spans' th-weighted count over the spans made
	// (before head sampling).
	represented float64
	// keptPerSecond is the kept spans per second.
	keptPerSecond float64
	// se is represented's standard error (Horvitz–Thompson, from the kept
	// traces); byReason the th-weighted spans per sampling.reason over the
	// spans made.
	se       float64
	byReason map[string]float64
}

func measureWeights(t *testing.T, name string, w *coverageTraffic, kept []ptrace.Traces) weightsResult {
	t.Helper()
	res := weightsResult{coverage: measureCoverage(t, name, w, kept)}
	counted := func(m int) bool { return m >= coverageWarmup && m < len(w.sent)-1 }
	var weighted, variance float64
	var keptSpans int
	res.byReason = map[string]float64{}
	for _, td := range kept {
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
			if !counted(w.meta[s.TraceID()].minute - w.first) {
				return
			}
			keptSpans++
			weight := 1.0
			if th, ok := thresholdOf(s.TraceState().AsRaw()); ok {
				weight = th.AdjustedCount()
			}
			weighted += weight
			if s.ParentSpanID().IsEmpty() {
				// A trace's two spans share its weight: (2w)²(1 − 1/w).
				variance += 4 * weight * (weight - 1)
			}
			reason, _ := s.Attributes().Get("sampling.reason")
			res.byReason[reason.Str()] += weight
		})
	}
	var made, minutes int
	for m := range w.generated {
		if counted(m) {
			made += w.generated[m]
			minutes++
		}
	}
	res.represented = weighted / float64(made)
	res.se = math.Sqrt(variance) / float64(made)
	for r := range res.byReason {
		res.byReason[r] /= float64(made)
	}
	res.keptPerSecond = float64(keptSpans) / float64(minutes*60)
	return res
}

// runWeightsWorkload runs issue 51's workload, head-sampled at headP (1:
// not) with as many traces arriving either way, through a sampler with the
// given baseline.min_share.
func runWeightsWorkload(t *testing.T, headP, minShare float64) (weightsResult, *testSampler, float64) {
	t.Helper()
	cfg := testConfig()
	budget := coverageBudget * 2 * coverageRate
	cfg.Budget.SpansPerSecond = budget
	cfg.Baseline.Keys = coverageKeys
	cfg.Baseline.MinShare = minShare
	cfg.Rare.Interval = time.Minute
	cfg.ReasonAttribute = "sampling.reason"
	w := newCoverageTraffic(51)
	w.errorRate = weightsErrorRate
	if headP < 1 {
		th, err := sampling.ProbabilityToThreshold(headP)
		require.NoError(t, err)
		w.head = &th
		w.rate = int(float64(coverageRate) / headP)
	}
	ts := runCoverageTraffic(t, cfg, w, 0)
	res := measureWeights(t, "weights", w, ts.sink.AllTraces())
	t.Logf("head %.0f%%, min_share %.2f: th-weighted %.1f%% ± %.1f%% of the spans made %v; (path, minute) coverage %.2f%% (lowest minute %.2f%%); kept %.1f spans/s of %.0f",
		100*headP, minShare, 100*res.represented, 100*res.se, res.byReason, 100*res.coverage.meanCoverage(), 100*slices.Min(res.coverage.coverage), res.keptPerSecond, budget)
	return res, ts, budget
}

// TestWeightsRepresentTheTrafficWhenProtectedClassesFillTheBudget is issue
// 51's acceptance test: coverage of (path, minute) pairs ≥ 99% in
// clock-aligned minutes, the th-weighted span count within 5% of the spans
// made, the budget held within ±10%; and the same with 10% consistent head
// sampling on the input.
func TestWeightsRepresentTheTrafficWhenProtectedClassesFillTheBudget(t *testing.T) {
	for _, headP := range []float64{1, 0.1} {
		t.Run(map[bool]string{true: "no head sampling", false: "head-sampled at 10%"}[headP == 1], func(t *testing.T) {
			res, _, budget := runWeightsWorkload(t, headP, createDefaultConfig().Baseline.MinShare)
			assert.GreaterOrEqual(t, res.coverage.meanCoverage(), 0.99, "(path, minute) pairs with a kept trace")
			assert.InDelta(t, 1, res.represented, 0.05, "th-weighted spans over spans made")
			assert.InEpsilon(t, budget, res.keptPerSecond, 0.10, "kept spans/s against the budget")
		})
	}
}
