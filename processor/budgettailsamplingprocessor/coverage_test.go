package budgettailsamplingprocessor

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
)

// The coverage workload (issue 40): zipf traffic over 3 services × 40
// endpoints × 3 status codes, two spans a trace (the root and a downstream
// call on its own resource), bimodal quantized latencies with a slow tail,
// errors on downstream spans only; a budget of 2% of the spans.
const (
	coverageServices = 3
	coverageRoutes   = 40
	coverageRate     = 1500 // traces/s
	coverageMinutes  = 8
	coverageWarmup   = 2 // minutes not counted: the policy is learning
	coverageBudget   = 0.02
	coverageErrors   = 0.003
	coverageSlow     = 0.003
)

var coverageStatuses = []int64{200, 404, 500}

type coverageCombo struct {
	service, route string
	status         int64
}

func (c coverageCombo) String() string { return fmt.Sprintf("%s|%s|%d", c.service, c.route, c.status) }

// coverageTraffic draws combos by zipf weight (s = 1.1, ranks shuffled so
// no service owns the loud ones) and remembers what it sent.
type coverageTraffic struct {
	rng    *rand.Rand
	combos []coverageCombo
	cum    []float64
	// meta is each trace's combo and the minute it is decided in.
	meta map[pcommon.TraceID]traceMeta
	// sent[minute-first][combo] counts traces; first is the first minute.
	sent  [][]int
	first int
	// spans is how many spans were sent in total, slow and errors the
	// traces that carry them.
	spans, slow, errors int
	// errorRate is the share of traces with an error (coverageErrors
	// unless set); head, when set, head-samples the traces before they are
	// sent (consistently, th on every span).
	errorRate float64
	rate      int // traces/s made, before head sampling
	head      *sampling.Threshold
	// generated[minute-first] counts the spans made, head-sampled or not.
	generated []int
}

type traceMeta struct{ combo, minute int }

func newCoverageTraffic(seed uint64) *coverageTraffic {
	rng := rand.New(rand.NewPCG(seed, 40))
	w := &coverageTraffic{rng: rng, meta: map[pcommon.TraceID]traceMeta{}, errorRate: coverageErrors, rate: coverageRate}
	for s := range coverageServices {
		for r := range coverageRoutes {
			for _, st := range coverageStatuses {
				w.combos = append(w.combos, coverageCombo{fmt.Sprintf("svc-%d", s), fmt.Sprintf("/api/%d", r), st})
			}
		}
	}
	ranks := rng.Perm(len(w.combos))
	var total float64
	for i := range w.combos {
		total += 1 / math.Pow(float64(ranks[i]+1), 1.1)
		w.cum = append(w.cum, total)
	}
	for i := range w.cum {
		w.cum[i] /= total
	}
	return w
}

// second builds one second's traces, sent at now and decided at decided
// (the minute they count in).
func (w *coverageTraffic) second(now, decided time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	minute := int(decided.Unix() / 60)
	for range w.rate {
		c, _ := slices.BinarySearch(w.cum, w.rng.Float64())
		c = min(c, len(w.combos)-1)
		combo := w.combos[c]
		var id pcommon.TraceID
		for i := range id {
			id[i] = byte(w.rng.Uint32())
		}
		dur := []time.Duration{10 * time.Millisecond, 200 * time.Millisecond}[w.rng.IntN(2)]
		if w.rng.Float64() < coverageSlow {
			dur, w.slow = 2*time.Second, w.slow+1
		}
		isErr := w.rng.Float64() < w.errorRate
		if len(w.sent) == 0 {
			w.first = minute
		}
		for len(w.sent) <= minute-w.first {
			w.sent = append(w.sent, make([]int, len(w.combos)))
			w.generated = append(w.generated, 0)
		}
		w.generated[minute-w.first] += 2
		if w.head != nil && !w.head.ShouldSample(sampling.TraceIDToRandomness(id)) {
			continue
		}
		if isErr {
			w.errors++
		}
		root := td.ResourceSpans().AppendEmpty()
		root.Resource().Attributes().PutStr("service.name", combo.service)
		s := root.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID(id)
		s.SetSpanID(pcommon.SpanID{1, byte(w.rng.Uint32())})
		s.SetKind(ptrace.SpanKindServer)
		s.SetName("GET " + combo.route)
		s.Attributes().PutStr("http.route", combo.route)
		s.Attributes().PutInt("http.response.status_code", combo.status)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-dur)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
		down := td.ResourceSpans().AppendEmpty()
		down.Resource().Attributes().PutStr("service.name", "db")
		d := down.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		d.SetTraceID(id)
		d.SetSpanID(pcommon.SpanID{2, byte(w.rng.Uint32())})
		d.SetParentSpanID(s.SpanID())
		d.SetKind(ptrace.SpanKindClient)
		d.SetName("SELECT")
		d.SetStartTimestamp(s.StartTimestamp())
		d.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(-dur / 2)))
		if isErr {
			d.Status().SetCode(ptrace.StatusCodeError)
		}
		if w.head != nil {
			s.TraceState().FromRaw("ot=th:" + w.head.TValue())
			d.TraceState().FromRaw("ot=th:" + w.head.TValue())
		}
		w.spans += 2
		w.meta[id] = traceMeta{c, minute}
		w.sent[minute-w.first][c]++
	}
	return td
}

// coverageResult is what a sampler kept of the workload.
type coverageResult struct {
	name string
	// keptShare is the kept spans over the spans sent, in the minutes
	// counted.
	keptShare float64
	// coverage is, per counted minute, the share of combos with traffic
	// whose traces had at least one kept.
	coverage []float64
	// estimate is the th-weighted count of traces per combo.
	estimate []float64
	// variance estimates each combo's estimate's variance (Σ w(w−1)).
	variance []float64
}

func (r coverageResult) meanCoverage() float64 {
	var s float64
	for _, c := range r.coverage {
		s += c
	}
	return s / float64(len(r.coverage))
}

// measureCoverage reads kept traces (whole: a root and its child) from td.
func measureCoverage(t *testing.T, name string, w *coverageTraffic, kept []ptrace.Traces) coverageResult {
	t.Helper()
	res := coverageResult{name: name, estimate: make([]float64, len(w.combos)), variance: make([]float64, len(w.combos))}
	keptIn := make([][]int, len(w.sent))
	for i := range keptIn {
		keptIn[i] = make([]int, len(w.combos))
	}
	spans := map[pcommon.TraceID]int{}
	var keptSpans int
	for _, td := range kept {
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
			if m := w.meta[s.TraceID()].minute - w.first; m >= coverageWarmup && m < len(w.sent)-1 {
				keptSpans++
			}
			spans[s.TraceID()]++
			if !s.ParentSpanID().IsEmpty() {
				return
			}
			m, ok := w.meta[s.TraceID()]
			require.True(t, ok)
			keptIn[m.minute-w.first][m.combo]++
			weight := 1.0
			if th, ok := thresholdOf(s.TraceState().AsRaw()); ok {
				weight = th.AdjustedCount()
			}
			res.estimate[m.combo] += weight
			res.variance[m.combo] += weight * (weight - 1)
		})
	}
	for id, n := range spans {
		require.Equal(t, 2, n, "%s kept trace %v whole", name, id)
	}
	var sentSpans int
	for m := coverageWarmup; m < len(w.sent)-1; m++ { // the last minute is partial
		seen, covered := 0, 0
		for c, n := range w.sent[m] {
			sentSpans += 2 * n
			if n > 0 {
				seen++
				if keptIn[m][c] > 0 {
					covered++
				}
			}
		}
		res.coverage = append(res.coverage, float64(covered)/float64(seen))
	}
	res.keptShare = float64(keptSpans) / float64(sentSpans)
	return res
}

// runOursOnCoverage runs the workload through our sampler on its fake clock;
// fixed > 0 pins every key's baseline probability instead of the budget's.
func runOursOnCoverage(t *testing.T, keys []string, rareInterval time.Duration, fixed float64) (coverageResult, *coverageTraffic, *testSampler) {
	t.Helper()
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = coverageBudget * 2 * coverageRate
	cfg.Baseline.Keys = keys
	cfg.Rare.Interval = rareInterval
	cfg.ReasonAttribute = "sampling.reason"
	w := newCoverageTraffic(7)
	ts := runCoverageTraffic(t, cfg, w, fixed)
	name := "keys " + strings.Join(keys, ", ")
	if rareInterval > 0 {
		name += fmt.Sprintf(", rare %v", rareInterval)
	}
	return measureCoverage(t, name, w, ts.sink.AllTraces()), w, ts
}

// runCoverageTraffic sends coverageMinutes of w through a sampler with cfg
// on its fake clock, adjusting every adjust_interval, and decides what is
// left; fixed > 0 pins every key's baseline probability instead.
func runCoverageTraffic(t *testing.T, cfg *Config, w *coverageTraffic, fixed float64) *testSampler {
	t.Helper()
	ts := newTestSampler(t, cfg)
	if fixed > 0 {
		storeBaselinePolicy(ts, "", fixed)
	}
	adjustEvery := int(cfg.AdjustInterval / time.Second)
	for s := range coverageMinutes * 60 {
		// Roots arrive with their trace: decided decision_wait_after_root later.
		ts.send(w.second(ts.now, ts.now.Add(cfg.DecisionWaitAfterRoot)))
		for range 10 {
			ts.advance(100 * time.Millisecond)
		}
		if (s+1)%adjustEvery == 0 {
			ts.p.adj.Adjust(ts.now)
		}
	}
	ts.advance(cfg.DecisionWait)
	return ts
}

// runContribOnCoverage runs the same workload through contrib's
// tail_sampling with the usual policies (errors, latency, probabilistic),
// the probabilistic share set so that it keeps keptShare of the spans.
func runContribOnCoverage(t *testing.T, keptShare float64) coverageResult {
	t.Helper()
	w := newCoverageTraffic(7)
	// Errors and slow traces are kept whole; the percentage fills the rest.
	priority := 2 * float64(coverageRate*coverageMinutes*60) * (coverageErrors + coverageSlow)
	total := 2 * float64(coverageRate*coverageMinutes*60)
	pct := 100 * (keptShare*total - priority) / (total - priority)
	f := tailsamplingprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"decision_wait": "500ms",
		"num_traces":    200000,
		"policies": []any{
			map[string]any{"name": "errors", "type": "status_code", "status_code": map[string]any{"status_codes": []any{"ERROR"}}},
			map[string]any{"name": "slow", "type": "latency", "latency": map[string]any{"threshold_ms": 1000}},
			map[string]any{"name": "baseline", "type": "probabilistic", "probabilistic": map[string]any{"sampling_percentage": pct}},
		},
	}).Unmarshal(cfg))
	sink := new(consumertest.TracesSink)
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	now := time.Unix(1_700_000_000, 0)
	for range coverageMinutes {
		for range 60 {
			require.NoError(t, p.ConsumeTraces(context.Background(), w.second(now, now.Add(2*time.Second))))
			now = now.Add(time.Second)
		}
		// A minute's traces (24,000) decided before the next minute's come.
		deadline := time.Now().Add(10 * time.Second)
		for last := -1; time.Now().Before(deadline); {
			time.Sleep(700 * time.Millisecond)
			if n := sink.SpanCount(); n == last {
				break
			} else {
				last = n
			}
		}
	}
	return measureCoverage(t, fmt.Sprintf("contrib tail_sampling (errors, latency 1s, probabilistic %.2f%%)", pct), w, sink.AllTraces())
}

var coverageKeys = []string{"service.name", "http.route", "http.response.status_code"}

// TestCoverageOfRareCombinationsAtEqualVolume is issue 40's coverage table:
// the share of (service, endpoint, status) combinations with traffic in a
// minute that had at least one trace kept in it, per-service fairness
// against per-key fairness and rare, and contrib at the same kept volume.
func TestCoverageOfRareCombinationsAtEqualVolume(t *testing.T) {
	perService, _, _ := runOursOnCoverage(t, []string{"service.name"}, 0, 0)
	keys, _, _ := runOursOnCoverage(t, coverageKeys, 0, 0)
	rare, _, _ := runOursOnCoverage(t, coverageKeys, time.Minute, 0)
	contrib := runContribOnCoverage(t, rare.keptShare)
	for _, r := range []coverageResult{perService, keys, rare, contrib} {
		t.Logf("| %s | %.2f%% | %.1f%% | %.1f%% |", r.name, 100*r.keptShare, 100*r.meanCoverage(), 100*slices.Min(r.coverage))
	}
	for _, r := range []coverageResult{perService, keys, rare} {
		assert.InEpsilon(t, coverageBudget, r.keptShare, 0.15, "%s keeps its budget", r.name)
	}
	assert.InEpsilon(t, rare.keptShare, contrib.keptShare, 0.15, "contrib keeps the same volume")
	assert.Equal(t, 1.0, slices.Min(rare.coverage), "with rare, every combination with traffic in a minute has a trace kept in it")
	assert.Greater(t, keys.meanCoverage(), perService.meanCoverage()+0.1, "fairness per key covers more combinations than per service")
	assert.Greater(t, rare.meanCoverage(), contrib.meanCoverage()+0.1)
}

// TestRareKeepsTheWeightsUnbiased: with rare on, each combination's
// th-weighted count of kept traces estimates its true count. A rare trace
// is kept with probability 1 and says so (its th is what it arrived with);
// writing the baseline's th on it would inflate every quiet combination by
// (1/p − 1) a minute. The baseline is pinned at p = 0.1 so that the
// estimates' noise is known: each combination must be within 5% of its
// true count or 4 standard errors, and the quiet half and the loud half of
// the combinations each within 5% together.
func TestRareKeepsTheWeightsUnbiased(t *testing.T) {
	const p = 0.1
	res, w, _ := runOursOnCoverage(t, coverageKeys, time.Minute, p)
	truth := make([]float64, len(w.combos))
	for _, minute := range w.sent {
		for c, n := range minute {
			truth[c] += float64(n)
		}
	}
	order := make([]int, len(w.combos))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(truth[a] - truth[b]) })
	var halves [2][2]float64 // quiet, loud: estimated, sent
	var within5 int
	for i, c := range order {
		if truth[c] == 0 {
			continue
		}
		half := i * 2 / len(order)
		halves[half][0] += res.estimate[c]
		halves[half][1] += truth[c]
		// At most one trace a minute is kept outside p; the rest are kept
		// with p and weigh 1/p.
		se := math.Sqrt(truth[c] * (1 - p) / p)
		off := math.Abs(res.estimate[c] - truth[c])
		if off <= 0.05*truth[c] {
			within5++
		}
		assert.LessOrEqual(t, off, max(0.05*truth[c], 4*se),
			"%v: estimated %.0f traces, sent %.0f (standard error %.1f)", w.combos[c], res.estimate[c], truth[c], se)
	}
	for i, name := range []string{"quiet", "loud"} {
		assert.InEpsilon(t, halves[i][1], halves[i][0], 0.05, "the %s half: estimated %.0f traces, sent %.0f", name, halves[i][0], halves[i][1])
		t.Logf("%s half of the combinations: th-weighted %.0f of %.0f traces sent (%+.2f%%)", name, halves[i][0], halves[i][1], 100*(halves[i][0]/halves[i][1]-1))
	}
	t.Logf("%d of %d combinations within 5%% of their true count", within5, len(order))
}

// TestCoverageKeysHoldAcrossTwoSamplers: the tier shares the budget as it
// does per service. Two samplers (budget.instances: 2), each given the
// traces the gateway's ring would send it (by trace ID), together keep the
// budget, and per-key fairness with rare still covers every combination
// with traffic in a minute.
func TestCoverageKeysHoldAcrossTwoSamplers(t *testing.T) {
	var tier [2]*testSampler
	for i := range tier {
		cfg := testConfig()
		cfg.Budget.SpansPerSecond = coverageBudget * 2 * coverageRate
		cfg.Budget.Instances = 2
		cfg.Baseline.Keys = coverageKeys
		cfg.Rare.Interval = time.Minute
		tier[i] = newTestSampler(t, cfg)
	}
	w := newCoverageTraffic(7)
	adjustEvery := int(tier[0].p.cfg.AdjustInterval / time.Second)
	for s := range coverageMinutes * 60 {
		td := w.second(tier[0].now, tier[0].now.Add(tier[0].p.cfg.DecisionWaitAfterRoot))
		var parts [2]ptrace.Traces
		for i := range parts {
			parts[i] = ptrace.NewTraces()
		}
		td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			id := rs.ScopeSpans().At(0).Spans().At(0).TraceID()
			rs.MoveTo(parts[id[15]&1].ResourceSpans().AppendEmpty())
			return true
		})
		for i, ts := range tier {
			ts.send(parts[i])
			for range 10 {
				ts.advance(100 * time.Millisecond)
			}
			if (s+1)%adjustEvery == 0 {
				ts.p.adj.Adjust(ts.now)
			}
		}
	}
	var kept []ptrace.Traces
	for _, ts := range tier {
		ts.advance(ts.p.cfg.DecisionWait)
		kept = append(kept, ts.sink.AllTraces()...)
	}
	res := measureCoverage(t, "two samplers, keys + rare", w, kept)
	t.Logf("| %s | %.2f%% | %.1f%% | %.1f%% |", res.name, 100*res.keptShare, 100*res.meanCoverage(), 100*slices.Min(res.coverage))
	assert.InEpsilon(t, coverageBudget, res.keptShare, 0.15, "the tier keeps its budget")
	assert.Equal(t, 1.0, slices.Min(res.coverage), "every combination with traffic in a minute has a trace kept in it")
}
