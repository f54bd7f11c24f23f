package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"math"
	"sort"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
)

// thresholdPrecision is the th hex digits written: probabilities are
// rounded to 1 part in 4096, which keeps tracestate short.
const thresholdPrecision = 3

// budgetUnit turns a trace's spans and bytes into the budget's unit.
type budgetUnit struct {
	perSpan, perByte float64
	// perSecond is the whole tier's budget in that unit per second.
	perSecond float64
}

func newBudgetUnit(b BudgetConfig) budgetUnit {
	switch {
	case b.SpansPerSecond > 0:
		return budgetUnit{perSpan: 1, perSecond: b.SpansPerSecond}
	case b.BytesPerSecond > 0:
		return budgetUnit{perByte: 1, perSecond: b.BytesPerSecond}
	default:
		m := b.Pricing.Resolve()
		return budgetUnit{perSpan: m.PerSpan(), perByte: m.PerByte(), perSecond: b.MonthlyCost / pricing.Month.Seconds()}
	}
}

func (u budgetUnit) volume(spans int, bytes int64) float64 {
	return float64(spans)*u.perSpan + float64(bytes)*u.perByte
}

// probability is a sampling probability with its OTEP 235 threshold.
type probability struct {
	p  float64
	th sampling.Threshold
}

func newProbability(p float64) probability {
	if !(p < 1) {
		return probability{p: 1, th: sampling.AlwaysSampleThreshold}
	}
	p = max(p, sampling.MinSamplingProbability)
	th, err := sampling.ProbabilityToThresholdWithPrecision(p, thresholdPrecision)
	if err != nil {
		return probability{p: 1, th: sampling.AlwaysSampleThreshold}
	}
	return probability{p: th.Probability(), th: th}
}

var always = newProbability(1)

// policy is what decisions read; the adjuster replaces it every interval.
type policy struct {
	services    map[string]probability
	newService  probability
	priority    probability
	utilization float64
	meanProb    float64
}

func (p *policy) baseline(service string) probability {
	if pr, ok := p.services[service]; ok {
		return pr
	}
	return p.newService
}

// estimator turns interval volumes into smoothed rates and a new policy.
type estimator struct {
	smoothing   float64
	maxShare    float64
	maxServices int
	baseline    map[string]float64 // smoothed rate per service
	priority    float64
	kept        float64
	primed      bool
	// correction scales the baseline budget by how far the kept volume
	// missed the budget (integral feedback). Probabilities set from noisy
	// rate estimates overshoot on average (E[1/rate] > 1/E[rate]), by ≈ 5%
	// with few large traces per interval; this takes that out.
	correction float64
	binding    bool // the last policy sampled the baseline (budget binding)
}

func newEstimator(cfg *Config) *estimator {
	return &estimator{smoothing: cfg.Smoothing, maxShare: cfg.Budget.MaxPriorityShare, maxServices: cfg.MaxServices,
		baseline: map[string]float64{}, correction: 1}
}

func (e *estimator) ewma(old, cur float64) float64 {
	if !e.primed {
		return cur
	}
	return e.smoothing*cur + (1-e.smoothing)*old
}

// update folds one interval's volumes (over secs seconds) into the rates
// and returns the policy for a per-instance budget of share units/s.
func (e *estimator) update(v volumes, secs, share float64) *policy {
	for svc, old := range e.baseline {
		if _, ok := v.baseline[svc]; !ok {
			if r := e.ewma(old, 0); r > 1e-12 {
				e.baseline[svc] = r
			} else {
				delete(e.baseline, svc)
			}
		}
	}
	for svc, vol := range v.baseline {
		e.baseline[svc] = e.ewma(e.baseline[svc], vol/secs)
	}
	e.priority = e.ewma(e.priority, v.priority/secs)
	e.kept = e.ewma(e.kept, v.kept/secs)
	if e.binding && share > 0 && v.kept > 0 {
		// At most 2% a step and within ±30%: slow enough that a load step
		// (which the rate estimates follow on their own) barely moves it.
		step := min(max(math.Pow(share/(v.kept/secs), 0.3), 0.98), 1.02)
		e.correction = min(max(e.correction*step, 0.7), 1.3)
	}
	e.primed = true

	pol := &policy{services: make(map[string]probability, len(e.baseline))}
	if share > 0 {
		pol.utilization = e.kept / share
	}
	// Errors and outliers first, up to their cap; past it they are sampled
	// so they stay inside it.
	prioBudget := e.maxShare * share
	pol.priority = always
	if e.priority > prioBudget {
		pol.priority = newProbability(prioBudget / e.priority)
	}
	remaining := (share - math.Min(e.priority, prioBudget)) * e.correction
	level := waterLevel(e.baseline, remaining)
	e.binding = !math.IsInf(level, 1)
	var total, keptBase float64
	for svc, r := range e.baseline {
		pr := always
		if r > level {
			pr = newProbability(level / r)
		}
		pol.services[svc] = pr
		total += r
		keptBase += r * pr.p
	}
	pol.meanProb = 1
	pol.newService = always
	if total > 0 {
		pol.meanProb = keptBase / total
		// A service not seen yet starts at the level an average service gets,
		// so a burst of new services cannot blow the budget for a whole interval.
		if mean := total / float64(len(e.baseline)); mean > level {
			pol.newService = newProbability(level / mean)
		}
	}
	return pol
}

// waterLevel is max-min fairness: the per-service rate L such that
// Σ min(rate_s, L) = budget. Quiet services keep all their traffic before
// noisy ones take the rest; +Inf when everything fits.
func waterLevel(rates map[string]float64, budget float64) float64 {
	if budget <= 0 {
		return 0
	}
	sorted := make([]float64, 0, len(rates))
	for _, r := range rates {
		sorted = append(sorted, r)
	}
	sort.Float64s(sorted)
	remaining := budget
	for i, r := range sorted {
		n := float64(len(sorted) - i)
		if r*n > remaining {
			return remaining / n
		}
		remaining -= r
	}
	return math.Inf(1)
}
