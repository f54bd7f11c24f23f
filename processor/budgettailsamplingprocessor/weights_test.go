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
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
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
	return runWeightsWorkloadAt(t, headP, minShare, coverageBudget*2*coverageRate, weightsErrorRate)
}

func runWeightsWorkloadAt(t *testing.T, headP, minShare, budget, errorRate float64) (weightsResult, *testSampler, float64) {
	t.Helper()
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = budget
	cfg.Baseline.Keys = coverageKeys
	cfg.Baseline.MinShare = minShare
	cfg.Rare.Interval = time.Minute
	cfg.ReasonAttribute = "sampling.reason"
	w := newCoverageTraffic(51)
	w.errorRate = errorRate
	if headP < 1 {
		th, err := sampling.ProbabilityToThreshold(headP)
		require.NoError(t, err)
		w.head = &th
		w.rate = int(float64(coverageRate) / headP)
	}
	ts := runCoverageTraffic(t, cfg, w, 0)
	ts.p.red.Roll(ts.now) // what was decided since the last adjustment
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

// representedRatios reads represented_ratio: overall (the point without a
// key) and per key.
func representedRatios(t *testing.T, ts *testSampler) (overall float64, perKey map[string]float64) {
	t.Helper()
	m, err := ts.tel.GetMetric(metadata.MetricRepresented)
	require.NoError(t, err)
	perKey = map[string]float64{}
	overall = math.NaN()
	for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
		if k, ok := p.Attributes.Value("key"); ok {
			perKey[k.AsString()] = p.Value
		} else {
			overall = p.Value
		}
	}
	return overall, perKey
}

// TestRepresentedRatioOnTheWorkload: the sampler's own check, from 100% of
// the traffic, agrees with the test's: represented_ratio overall within
// 0.95–1.05, with and without head sampling; per key it is noisier (a
// quiet key has a handful of kept traces) but centred on 1.
func TestRepresentedRatioOnTheWorkload(t *testing.T) {
	for _, headP := range []float64{1, 0.1} {
		t.Run(map[bool]string{true: "no head sampling", false: "head-sampled at 10%"}[headP == 1], func(t *testing.T) {
			res, ts, _ := runWeightsWorkload(t, headP, createDefaultConfig().Baseline.MinShare)
			overall, perKey := representedRatios(t, ts)
			assert.InDelta(t, 1, overall, 0.05, "represented_ratio overall")
			ratios := make([]float64, 0, len(perKey))
			for _, r := range perKey {
				ratios = append(ratios, r)
			}
			slices.Sort(ratios)
			median := ratios[len(ratios)/2]
			t.Logf("represented_ratio %.3f overall (the test's own count %.3f); %d keys, median %.2f, quartiles %.2f–%.2f",
				overall, res.represented, len(ratios), median, ratios[len(ratios)/4], ratios[3*len(ratios)/4])
			assert.Len(t, perKey, len(coverageStatuses)*coverageRoutes*coverageServices, "a ratio per key")
			assert.InDelta(t, 1, median, 0.25, "per key, centred on 1")
		})
	}
}

// TestRepresentedRatioCatchesWrongWeights: the ratio catches weights
// written wrong. Written as contrib's tail_sampling leaves them (no th:
// every kept span counts once), the ratio is about the kept share.
func TestRepresentedRatioCatchesWrongWeights(t *testing.T) {
	testThresholdOverride = func(sampling.Threshold) sampling.Threshold { return sampling.AlwaysSampleThreshold }
	defer func() { testThresholdOverride = nil }()
	_, ts, _ := runWeightsWorkload(t, 1, createDefaultConfig().Baseline.MinShare)
	overall, _ := representedRatios(t, ts)
	t.Logf("represented_ratio %.4f", overall)
	assert.Less(t, overall, 0.1)
}

// TestWeightsRareCoverageWhenTheBudgetFallsShort: a budget too small for
// one trace per key and minute thins the rare traces (rare_probability <
// 1), warns saying what gives way, and rare_coverage says how much of the
// last minute's keys had a trace kept; the weights stay honest.
func TestWeightsRareCoverageWhenTheBudgetFallsShort(t *testing.T) {
	res, ts, budget := runWeightsWorkloadAt(t, 1, createDefaultConfig().Baseline.MinShare, 20, coverageErrors)
	core, logs := observer.New(zap.WarnLevel)
	ts.p.logger = zap.New(core)
	ts.p.warnRareShortfall()
	require.Equal(t, 1, logs.Len(), "a warning when rare falls short")
	assert.Contains(t, logs.All()[0].Message, "rare.interval: the budget cannot keep the first trace of every key")
	ts.p.warnRareShortfall()
	assert.Equal(t, 1, logs.Len(), "once, until it changes")

	rareP := ts.metric(metadata.MetricRareProbability)
	coverage := ts.metric(metadata.MetricRareCoverage)
	last := res.coverage.coverage[len(res.coverage.coverage)-1]
	t.Logf("rare_probability %.2f; rare_coverage %.3f, the test's count for that minute %.3f", rareP, coverage, last)
	assert.Less(t, rareP, 0.95)
	assert.Greater(t, rareP, 0.05)
	assert.Less(t, coverage, 0.99, "some keys go without")
	assert.InDelta(t, last, coverage, 0.03, "rare_coverage is the share of the last minute's keys with a kept trace")
	assert.InDelta(t, 1, res.represented, 0.05, "th still weighs the kept spans right")
	assert.InEpsilon(t, budget, res.keptPerSecond, 0.10)
}
