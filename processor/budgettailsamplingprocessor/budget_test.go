package budgettailsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// load drives a sampler on its fake clock, one second per step.
type load struct {
	ts      *testSampler
	gens    map[string]*workload.Generator
	rate    map[string]int // traces per second per service
	seconds int
	sent    map[string]int // error traces sent, by trace ID string
	errIDs  map[[16]byte]bool
}

func newLoad(ts *testSampler, rate map[string]int, errorEvery int) *load {
	l := &load{ts: ts, gens: map[string]*workload.Generator{}, rate: rate, sent: map[string]int{}, errIDs: map[[16]byte]bool{}}
	seed := uint64(1)
	for svc := range rate {
		l.gens[svc] = workload.NewGenerator(workload.Options{Services: 1, ErrorEvery: errorEvery, Seed: seed})
		seed++
	}
	return l
}

// run sends `seconds` seconds of load, deciding and adjusting as the real
// tickers would; it returns the spans kept in each second.
func (l *load) run(seconds int) []int {
	cfg := l.ts.p.cfg
	adjustEvery := int(cfg.AdjustInterval / time.Second)
	var keptPerSecond []int
	for s := 0; s < seconds; s++ {
		for svc, n := range l.rate {
			td := ptrace.NewTraces()
			for range n {
				tr := l.gens[svc].Next(td)
				if tr.Error {
					l.errIDs[tr.ID] = true
				}
			}
			workload.SetService(td, svc)
			l.ts.send(td)
		}
		before := l.ts.sink.SpanCount()
		for step := 0; step < 10; step++ {
			l.ts.advance(100 * time.Millisecond)
		}
		keptPerSecond = append(keptPerSecond, l.ts.sink.SpanCount()-before)
		l.seconds++
		if l.seconds%adjustEvery == 0 {
			l.ts.p.adj.Adjust(l.ts.now)
		}
	}
	return keptPerSecond
}

func mean(xs []int) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

func budgetConfig(spansPerSecond float64) *Config {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = spansPerSecond
	return cfg
}

func TestKeptVolumeMeetsBudgetUnderConstantLoad(t *testing.T) {
	// Windows hold ≈ 2,500 kept traces, so sampling noise (≈ 2%) stays well
	// inside the ±10% asserted.
	ts := newTestSampler(t, budgetConfig(1000))
	// 10,000 spans/s offered across 5 services of different sizes.
	l := newLoad(ts, map[string]int{"a": 1000, "b": 750, "c": 500, "d": 200, "e": 50}, 100)
	l.run(5 * 4) // warm-up: 3 adjust intervals plus the decision wait
	for window := 0; window < 3; window++ {
		kept := mean(l.run(10))
		assert.InEpsilon(t, 1000, kept, 0.10, "window %d kept %.0f spans/s", window, kept)
	}
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()
	missing := 0
	for id := range l.errIDs {
		if _, ok := kept[id]; !ok {
			missing++
		}
	}
	require.NotEmpty(t, l.errIDs)
	assert.Zero(t, missing, "every error trace is kept while under the priority cap")
	assert.InDelta(t, 1.0, ts.metric(metadata.MetricBudgetUtilization), 0.1)
	// Outliers are the slowest 1% of each group, learned online.
	outliers := ts.metric(metadata.MetricTraces, reasonAttr("outlier"))
	share := outliers / ts.metric(metadata.MetricTraces)
	assert.InDelta(t, 0.01, share, 0.006, "outlier share %.4f", share)
	assert.Less(t, ts.metric(metadata.MetricBaselineProb), 0.2)
}

func TestKeptVolumeFollowsAStepInLoad(t *testing.T) {
	ts := newTestSampler(t, budgetConfig(1000))
	l := newLoad(ts, map[string]int{"a": 500, "b": 500}, 0)
	l.run(30)
	assert.InEpsilon(t, 1000, mean(l.run(10)), 0.10)
	// Load triples.
	l.rate = map[string]int{"a": 1500, "b": 1500}
	l.run(3*5 + 5) // three adjust intervals after the step, plus the decision wait
	for window := 0; window < 2; window++ {
		kept := mean(l.run(10))
		assert.InEpsilon(t, 1000, kept, 0.10, "window %d after the step kept %.0f spans/s", window, kept)
	}
	// And falls to a twentieth: the budget is no longer binding, all is kept.
	l.rate = map[string]int{"a": 25, "b": 25}
	l.run(20)
	assert.InEpsilon(t, 200, mean(l.run(10)), 0.10)
}

func TestBaselineIsFairAcrossServices(t *testing.T) {
	ts := newTestSampler(t, budgetConfig(200))
	cfg := ts.p.cfg
	cfg.Outliers.MinObservations = 1 << 30
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	// A noisy service offers 1,900 spans/s, a quiet one 20.
	l := newLoad(ts, map[string]int{"noisy": 475, "quiet": 5}, 0)
	l.run(30)
	pol := ts.p.adj.Policy()
	assert.Equal(t, 1.0, pol.Baseline("quiet").P, "the quiet service keeps all its traffic")
	assert.InDelta(t, 180.0/1900, pol.Baseline("noisy").P, 0.02, "the noisy one takes the rest of the budget")
}

func TestPriorityCapSamplesErrorsPastTheirShare(t *testing.T) {
	cfg := budgetConfig(1000)
	cfg.Budget.MaxPriorityShare = 0.5
	ts := newTestSampler(t, cfg)
	// Every other trace is an error: 5,000 error spans/s against a cap of 500.
	l := newLoad(ts, map[string]int{"a": 2500}, 2)
	l.run(30)
	kept := mean(l.run(10))
	assert.InEpsilon(t, 1000, kept, 0.10)
	pol := ts.p.adj.Policy()
	assert.InDelta(t, 0.1, pol.Errors().P, 0.02, "errors sampled to stay within their share")
	assert.Positive(t, ts.metric(metadata.MetricPriorityOverflow))
	keptErrors := 0
	kspans := ts.keptSpans()
	for id := range l.errIDs {
		if _, ok := kspans[id]; ok {
			keptErrors++
		}
	}
	assert.Positive(t, keptErrors)
	assert.Less(t, keptErrors, len(l.errIDs)/2)
}

func TestBudgetShareFollowsPeers(t *testing.T) {
	ts := newTestSampler(t, budgetConfig(3000))
	ts.p.adj.SetPeers(3)
	l := newLoad(ts, map[string]int{"a": 2500}, 0)
	l.run(30)
	assert.InEpsilon(t, 1000, mean(l.run(10)), 0.10, "each of three instances keeps a third")
}

// Each service's baseline probability is exported, for the dashboard.
func TestServiceBaselineProbabilityIsExported(t *testing.T) {
	ts := newTestSampler(t, budgetConfig(200))
	l := newLoad(ts, map[string]int{"noisy": 475, "quiet": 5}, 0)
	l.run(30)
	pol := ts.p.adj.Policy()
	assert.Equal(t, 1.0, ts.metric(metadata.MetricServiceBaseline, attribute.String("service_name", "quiet")))
	assert.InDelta(t, pol.Baseline("noisy").P, ts.metric(metadata.MetricServiceBaseline, attribute.String("service_name", "noisy")), 1e-9)
	assert.Less(t, ts.metric(metadata.MetricServiceBaseline, attribute.String("service_name", "noisy")), 0.2)
}
