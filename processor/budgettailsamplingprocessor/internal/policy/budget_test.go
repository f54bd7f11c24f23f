package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
)

// settings are the defaults with a spans budget.
func settings(spansPerSecond float64) Settings {
	return Settings{
		Budget: BudgetConfig{SpansPerSecond: spansPerSecond, Pricing: pricing.DefaultConfig(), Instances: 1,
			MaxPriorityShare: 0.8},
		AdjustInterval: 5 * time.Second,
		Smoothing:      0.7, // the processor's defaults
		MaxKeys:        10_000,
	}
}

func compile(t *testing.T, cfgs ...rules.Config) *rules.Set {
	t.Helper()
	rs, err := rules.Compile(cfgs, component.TelemetrySettings{Logger: zap.NewNop()})
	require.NoError(t, err)
	return rs
}

func noRules(t *testing.T) *rules.Set { return compile(t) }

func unitWeight(string) float64 { return 1 }

func TestBudgetUnits(t *testing.T) {
	cfg := settings(0)
	cfg.Budget.BytesPerSecond = 1000
	u := NewUnit(cfg.Budget)
	assert.Equal(t, 280.0, u.Volume(1, 280))
	assert.Equal(t, 1000.0, u.perSecond)

	cfg = settings(0)
	cfg.Budget.MonthlyCost = 2628
	one, zero := 1.0, 0.0
	cfg.Budget.Pricing.PerMillionSpans = &one
	cfg.Budget.Pricing.PerGiBIngested = &zero
	cfg.Budget.Pricing.PerGiBMonthStored = &zero
	require.Empty(t, cfg.Budget.Check())
	u = NewUnit(cfg.Budget)
	// 2,628 a month at 1 per million spans is 1,000 spans/s.
	assert.InEpsilon(t, 1000, u.perSecond/u.Volume(1, 280), 1e-9)
	assert.InEpsilon(t, 2628.0/pricing.Month.Seconds(), u.perSecond, 1e-9)
}

func TestWaterLevel(t *testing.T) {
	rates := map[string]float64{"a": 1, "b": 10, "c": 100}
	assert.True(t, math.IsInf(waterLevel(rates, unitWeight, 200, 0), 1))
	assert.InDelta(t, 89, waterLevel(rates, unitWeight, 100, 0), 1e-9) // 1 + 10 + 89 = 100
	assert.InDelta(t, 10, waterLevel(rates, unitWeight, 21, 0), 1e-9)
	assert.InDelta(t, 2.5, waterLevel(rates, unitWeight, 6, 0), 1e-9) // 1 + 2.5 + 2.5 = 6
	assert.Zero(t, waterLevel(rates, unitWeight, 0, 0))
}

func TestCorrectionTakesOutASteadyOvershoot(t *testing.T) {
	e := newEstimator(settings(1000), noRules(t))
	vols := func(kept float64) Volumes {
		v := NewVolumes(0)
		v.baseline["a"] = 5000
		v.kept = kept
		return v
	}
	// The first policy samples (5,000 offered against 1,000): binding.
	e.update(vols(1000), 1, 1000)
	require.True(t, e.binding)
	// Kept keeps coming in 10% over budget: the correction walks down, at
	// most 2% an interval, and settles within its bounds.
	prev := e.correction
	for i := 0; i < 10; i++ {
		e.update(vols(1100), 1, 1000)
		assert.Less(t, e.correction, prev)
		assert.GreaterOrEqual(t, e.correction, prev*0.98-1e-12)
		prev = e.correction
	}
	for i := 0; i < 200; i++ {
		e.update(vols(1100), 1, 1000)
	}
	assert.InDelta(t, 0.7, e.correction, 1e-9, "bounded below")
	// Not binding (everything fits): the correction stays where it is.
	small := NewVolumes(0)
	small.baseline["a"] = 10
	small.kept = 10
	for i := 0; i < 20; i++ {
		e.update(small, 1, 1000)
	}
	assert.False(t, e.binding)
	c := e.correction
	e.update(small, 1, 1000)
	assert.Equal(t, c, e.correction)
}

// The egress ratio is what kept traces weigh as they leave over what their
// decisions booked, smoothed and bounded, in budget units: 1 for spans.
func TestEgressRatio(t *testing.T) {
	// One span and its resource as buffered: merging could not shrink it.
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("s")
	var sizer ptrace.ProtoMarshaler
	size := int64(sizer.TracesSize(td))

	spansUnit := Unit{perSpan: 1, perSecond: 10}
	spans := newEgressMeter(spansUnit)
	spans.Add(td, 4*size)
	assert.Equal(t, 1.0, spans.update(spansUnit, 0.5), "a spans budget has no bytes to correct")

	u := Unit{perByte: 1, perSecond: 1000}
	bytes := newEgressMeter(u)
	bytes.Add(td, 2*size)
	assert.InDelta(t, 0.75, bytes.update(u, 0.5), 1e-9, "half of the booking left, smoothed from 1")
	assert.InDelta(t, 0.75, bytes.update(u, 0.5), 1e-9, "nothing left since: unchanged")
	bytes.Add(td, 100*size)
	assert.InDelta(t, 0.5*0.75+0.5*minEgressRatio, bytes.update(u, 0.5), 1e-9, "bounded below")
	assert.InDelta(t, 0.5*0.75+0.5*minEgressRatio, bytes.Current(), 1e-9, "published for the metric")

	mu := Unit{perSpan: float64(size), perByte: 1}
	money := newEgressMeter(mu)
	// Priced per span as much as its bytes that left: booked 1 + 2, left 1 + 1.
	money.Add(td, 2*size)
	assert.InDelta(t, 2.0/3, money.update(mu, 1), 1e-9, "only the bytes' part shrinks")
}

func TestKeepRuleMaxShare(t *testing.T) {
	cfg := settings(1000)
	rs := compile(t, rules.Config{Name: "debug", Action: "keep", MaxShare: 0.1,
		Conditions: []string{`attributes["debug"] == "true"`}})
	e := newEstimator(cfg, rs)
	v := NewVolumes(1)
	v.rules[0] = 400 * 5 // 400/s against a cap of 100/s
	v.baseline["api"] = 5000 * 5
	pol := e.update(v, 5, 1000)
	assert.InDelta(t, 0.25, pol.keeps[0].P, 0.01, "sampled to stay within max_share")
	assert.InDelta(t, 900.0/5000, pol.Baseline("api").P, 0.01, "the baseline has the rest")
}

func TestWeightedWaterLevel(t *testing.T) {
	rates := map[string]float64{"a": 100, "b": 100, "c": 1}
	weights := func(k string) float64 {
		if k == "b" {
			return 3
		}
		return 1
	}
	// c keeps its 1; a gets L, b 3L: 1 + L + 3L = 81 → L = 20.
	assert.InDelta(t, 20, waterLevel(rates, weights, 81, 0), 1e-9)
}

// Errors are decided before outliers and never below their service's baseline.
func TestErrorsComeBeforeOutliers(t *testing.T) {
	cfg := settings(1000)
	cfg.Budget.MaxPriorityShare = 0.5
	e := newEstimator(cfg, noRules(t))
	v := NewVolumes(0)
	v.errors, v.outliers = 100*5, 2000*5 // per 5 s interval
	v.baseline["quiet"] = 10 * 5
	v.baseline["noisy"] = 5000 * 5
	pol := e.update(v, 5, 1000)
	assert.Equal(t, 1.0, pol.errors.P, "errors fit the cap: all kept")
	assert.InDelta(t, 0.2, pol.outliers.P, 0.01, "outliers take what errors leave of the cap")

	v = NewVolumes(0)
	v.errors = 4000 * 5
	v.baseline["quiet"] = 10 * 5
	pol = newEstimator(cfg, noRules(t)).update(v, 5, 1000)
	assert.InDelta(t, 0.125, pol.errors.P, 0.01)
	assert.GreaterOrEqual(t, pol.ErrorProbability("quiet").P, pol.Baseline("quiet").P,
		"an error is never kept with a lower probability than its service's ordinary traffic")
}

// Services past max_services are sampled at the probability of _other, the
// entry their volume is booked under.
func TestServicesPastTheCapGetOthersProbability(t *testing.T) {
	cfg := settings(100)
	cfg.MaxKeys = 2
	e := newEstimator(cfg, noRules(t))
	v := NewVolumes(0)
	v.baseline["a"] = 500 * 5
	v.baseline["b"] = 10 * 5
	v.baseline["c"] = 1000 * 5 // a third service, seen by another shard
	pol := e.update(v, 5, 100)
	require.True(t, pol.full)
	assert.Len(t, pol.services, 2, "capped at max_services, the smallest merged into _other")
	other := pol.services[OtherKeys]
	assert.Equal(t, other, pol.Baseline("zzz"), "an unknown service gets _other's probability")
	assert.Equal(t, OtherKeys, pol.BookedKey("zzz"))
	assert.Less(t, other.P, 1.0)
}

// What a sample rule with a fixed probability keeps comes off the
// baseline's share of the budget.
func TestSampleRuleWithProbabilityIsInTheBudget(t *testing.T) {
	rs := compile(t, rules.Config{Name: "batch", Action: "sample", Probability: 0.25,
		Conditions: []string{`resource.attributes["service.name"] == "batch"`}})
	e := newEstimator(settings(1000), rs)
	v := NewVolumes(1)
	v.rules[0] = 2000 * 5
	v.baseline["api"] = 5000 * 5
	pol := e.update(v, 5, 1000)
	assert.InDelta(t, 500.0/5000, pol.Baseline("api").P, 0.01)
}

// TestKeysIntermittentKeysStayInsideTheBudget: 300 fairness keys with a
// trace every 20 s each (Poisson) and 2 loud keys, at a budget of a fifth of
// the traffic. A quiet key reads 0 in most intervals; sampled at its
// fast rate it would be kept whole whenever it shows up, and together the
// quiet keys would take far more than their fair share.
func TestKeysIntermittentKeysStayInsideTheBudget(t *testing.T) {
	const quiet, quietRate, loudRate, secs = 300, 0.05, 20.0, 5.0
	offered := quiet*quietRate + 2*loudRate // 55 traces/s, one span each
	budget := offered / 5
	e := newEstimator(settings(budget), noRules(t))
	rng := rand.New(rand.NewPCG(40, 1))
	pol := KeepAll(0)
	var kept, total float64
	for i := range 400 {
		v := NewVolumes(0)
		var keptNow float64
		add := func(key string, n float64) {
			if n > 0 {
				v.baseline[key] += n
				keptNow += n * pol.Baseline(key).P // expected kept
			}
		}
		for k := range quiet {
			add(fmt.Sprintf("quiet-%d", k), float64(poisson(rng, quietRate*secs)))
		}
		add("loud-a", float64(poisson(rng, loudRate*secs)))
		add("loud-b", float64(poisson(rng, loudRate*secs)))
		v.kept = keptNow
		pol = e.update(v, secs, budget)
		if i >= 100 {
			kept += keptNow
			total += budget * secs
		}
	}
	assert.InEpsilon(t, total, kept, 0.10, "kept %.0f for a budget of %.0f", kept, total)
}

func poisson(rng *rand.Rand, mean float64) int {
	n, p, l := 0, 1.0, math.Exp(-mean)
	for {
		p *= rng.Float64()
		if p <= l {
			return n
		}
		n++
	}
}

// TestWeightsFloorAndRareThinning: when errors, outliers and rare traces
// ask for more than the budget, the baseline keeps min_share of it, spread
// over all its traffic (one probability for the loudest key too), rare
// traces are thinned to what is left of them with a probability below 1,
// outliers to what rare leaves; only errors may take the floor.
func TestWeightsFloorAndRareThinning(t *testing.T) {
	cfg := settings(100)
	cfg.MinBaselineShare = 0.2
	v := NewVolumes(0)
	v.errors, v.outliers, v.rare = 40*5, 50*5, 60*5 // per 5 s interval
	v.baseline["loud"] = 5000 * 5
	for i := range 100 {
		v.baseline[fmt.Sprintf("quiet-%d", i)] = 1 * 5
	}
	pol := newEstimator(cfg, noRules(t)).update(v, 5, 100)
	assert.Equal(t, 1.0, pol.errors.P, "errors fit: all kept")
	// 100 − 20 (floor) − 40 (errors) leaves 40 of the 60 rare asks for.
	assert.InDelta(t, 40.0/60, pol.Rare().P, 0.01)
	assert.InDelta(t, 20, pol.RareShortfall(), 1e-9)
	assert.Less(t, pol.outliers.P, 0.001, "nothing left for outliers after rare")
	floorP := 20.0 / 5100
	assert.InDelta(t, floorP, pol.Baseline("loud").P, floorP*0.01, "the loudest key gets the floor's probability")
	var kept float64
	for svc, r := range v.baseline {
		kept += r / 5 * pol.Baseline(svc).P
	}
	assert.InDelta(t, 20, kept, 0.5, "the baseline keeps its floor")

	// Without the floor the same traffic leaves the baseline nothing.
	cfg.MinBaselineShare = 0
	pol = newEstimator(cfg, noRules(t)).update(v, 5, 100)
	assert.Equal(t, 1.0, pol.Rare().P)
	assert.Less(t, pol.Baseline("loud").P, 1e-6)

	// Errors win over the floor.
	cfg.MinBaselineShare = 0.2
	cfg.Budget.MaxPriorityShare = 1
	v.errors = 150 * 5
	pol = newEstimator(cfg, noRules(t)).update(v, 5, 100)
	assert.InDelta(t, 100.0/150, pol.errors.P, 0.01, "errors take the whole budget, floor included")
	assert.Less(t, pol.Rare().P, 0.001)
}

// With plenty of budget the floor changes nothing: fairness alone gives
// every key more than it.
func TestWeightsFloorDoesNotBindWhenTheBaselineHasRoom(t *testing.T) {
	cfg := settings(1000)
	v := NewVolumes(0)
	v.baseline["a"] = 1000 * 5
	v.baseline["b"] = 10 * 5
	without := newEstimator(cfg, noRules(t)).update(v, 5, 1000)
	cfg.MinBaselineShare = 0.2
	with := newEstimator(cfg, noRules(t)).update(v, 5, 1000)
	assert.Equal(t, without.Baseline("a"), with.Baseline("a"))
	assert.Equal(t, without.Baseline("b"), with.Baseline("b"))
}

// Rare's volume is measured per whole clock-aligned interval, whatever its
// length against the adjust interval: the first, partial interval gives a
// provisional rate; from the next on, each whole interval's volume over its
// length. Rare traces come as a burst when an interval starts.
func TestWeightsRareClockMeasuresWholeIntervals(t *testing.T) {
	for _, interval := range []time.Duration{15 * time.Second, time.Minute} {
		c := &rareClock{interval: interval}
		at := time.Unix(1_700_000_007, 0) // mid-interval
		burst := 30.0
		for at.Before(time.Unix(1_700_000_007, 0).Add(5 * interval)) {
			vol := 0.0
			if at.UnixNano()%int64(interval) < int64(5*time.Second) {
				vol = burst // the first adjustment of an interval drains its burst
			}
			c.add(at, vol)
			at = at.Add(5 * time.Second)
		}
		require.True(t, c.whole, "%v: a whole interval was measured", interval)
		assert.InDelta(t, burst/interval.Seconds(), c.rate, 1e-9, "%v: the burst over the interval", interval)
	}
}

// Before a whole interval was measured, rare's rate is what it decided so
// far over the interval, not over the seconds so far: the burst of every
// key's first trace at start (after priming, seconds of it drained at
// once) read as a rate many times the interval's and thinned rare traces
// to 1.7% with four keys through the binary.
func TestWeightsRareClockFirstBurstIsNotARate(t *testing.T) {
	c := &rareClock{interval: time.Minute}
	c.add(time.Unix(1_700_000_007, 0), 40) // four keys' first traces, 10 spans each
	assert.InDelta(t, 40.0/60, c.rate, 1e-9)
	assert.False(t, c.whole)
}

// A retune (a new budget from the policy file) applies at the next tick,
// planned from the rates already learned: no priming again, no interval
// without a policy, and the probabilities follow the new budget at once.
func TestReloadRetuneKeepsTheRatesAndAppliesAtOnce(t *testing.T) {
	drain := func() (Volumes, float64, int64) {
		v := NewVolumes(0)
		v.baseline["a"] = 5000 // a second of it: one tick
		return v, 5000, 100
	}
	a := NewAdjuster(settings(1000), noRules(t), drain)
	start := time.Unix(1_000_000, 0)
	a.Start(start)
	now := start
	for i := 0; i < 20 && (a.Priming() || i < 12); i++ {
		now = now.Add(time.Second)
		a.Tick(now)
	}
	require.False(t, a.Priming(), "primed")
	before := a.Policy().MeanProb()
	require.InDelta(t, 0.2, before, 0.03, "1,000 of 5,000 spans/s")

	a.Retune(Retune{PerSecond: 500, MaxPriorityShare: 0.8})
	now = now.Add(time.Second) // mid-interval: no adjustment due
	a.Tick(now)
	assert.False(t, a.Priming(), "the rates are kept")
	assert.Equal(t, 500.0, a.Budget())
	assert.InDelta(t, before/2, a.Policy().MeanProb(), 0.01, "the baseline follows the halved budget at the next tick")
	// And the adjustments that follow keep planning for the new budget.
	for range 10 {
		now = now.Add(time.Second)
		a.Tick(now)
	}
	assert.InDelta(t, before/2, a.Policy().MeanProb(), 0.02)
}

// A policy file read at start applies before the first tick: relief and
// priming never see the configuration's budget (the chart's placeholder).
func TestReloadRetuneNowBeforeStart(t *testing.T) {
	a := NewAdjuster(settings(1), noRules(t), func() (Volumes, float64, int64) { return NewVolumes(0), 0, 0 })
	a.RetuneNow(Retune{PerSecond: 900, MaxPriorityShare: 0.8})
	assert.Equal(t, 900.0, a.Budget())
	assert.Equal(t, 900.0, a.Share())
}

// A rare interval changed live: until a whole new interval is measured,
// rare's rate is the last one's scaled to the new length (a trace per key
// per interval), not zero (which would keep every first trace) nor the
// old rate (which would thin them).
func TestReloadRareIntervalScalesRaresRate(t *testing.T) {
	s := settings(1000)
	s.RareInterval = time.Minute
	e := newEstimator(s, noRules(t))
	start := time.Unix(600, 0)
	e.addRare(start, 0)
	e.addRare(start.Add(time.Minute), 120)  // the first (partial) interval ends
	e.addRare(start.Add(2*time.Minute), 60) // a whole one: 120 over 60 s
	require.True(t, e.rareClock.whole)
	assert.InDelta(t, 2.0, e.rareClock.rate, 1e-9)
	e.rare = e.rareClock.rate
	e.setRareInterval(5 * time.Minute)
	assert.InDelta(t, 0.4, e.rare, 1e-9)
	assert.Equal(t, 5*time.Minute, e.rareClock.interval)
	e.addRare(start.Add(2*time.Minute+time.Second), 30)
	assert.InDelta(t, 0.4, e.rareClock.rate, 1e-9, "kept until a whole interval of the new length")
}
