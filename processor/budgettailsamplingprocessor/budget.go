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
// Probabilities are conditional on what arrives: a trace that arrived
// head-sampled is kept with them on top of its incoming probability.
type policy struct {
	// services holds the baseline services and weighted sample rules.
	services   map[string]probability
	newService probability
	// other is the probability of services booked under _other once the
	// estimator tracks max_services of them (full).
	other       probability
	full        bool
	errors      probability
	outliers    probability
	keeps       []probability // per rule; used for keep rules
	utilization float64
	meanProb    float64
}

func keepAllPolicy(rules int) *policy {
	keeps := make([]probability, rules)
	for i := range keeps {
		keeps[i] = always
	}
	return &policy{services: map[string]probability{}, newService: always, other: always, errors: always, outliers: always,
		keeps: keeps, meanProb: 1}
}

// bookedService is the name a service's volume is booked under.
func (p *policy) bookedService(service string) string {
	if _, ok := p.services[service]; ok || !p.full {
		return service
	}
	return otherServices
}

func (p *policy) baseline(service string) probability {
	if pr, ok := p.services[service]; ok {
		return pr
	}
	if p.full {
		return p.other
	}
	return p.newService
}

// keep is keep rule i's probability (1 until the estimator set one).
func (p *policy) keep(i int) probability {
	if i < len(p.keeps) {
		return p.keeps[i]
	}
	return always
}

// errorProbability is the errors' class probability, never below the
// service's baseline: an error is never kept less often than ordinary traffic.
func (p *policy) errorProbability(service string) probability {
	return higher(p.errors, p.baseline(service))
}

// outlierProbability likewise for latency outliers.
func (p *policy) outlierProbability(service string) probability {
	return higher(p.outliers, p.baseline(service))
}

func higher(a, b probability) probability {
	if b.p > a.p {
		return b
	}
	return a
}

// estimator turns interval volumes into smoothed rates and a new policy.
type estimator struct {
	smoothing   float64
	maxShare    float64
	maxServices int
	baseline    map[string]float64 // smoothed rate per service
	errors      float64
	outliers    float64
	rules       []float64 // smoothed rate per keep and fixed-probability sample rule
	ruleSet     *ruleSet
	kept        float64
	primed      bool
	// correction scales the baseline budget by how far the kept volume
	// missed the budget (integral feedback). Probabilities set from noisy
	// rate estimates overshoot on average (E[1/rate] > 1/E[rate]), by ≈ 5%
	// with few large traces per interval; this takes that out.
	correction float64
	binding    bool // the last policy sampled the baseline (budget binding)
}

func newEstimator(cfg *Config, rules *ruleSet) *estimator {
	return &estimator{smoothing: cfg.Smoothing, maxShare: cfg.Budget.MaxPriorityShare, maxServices: cfg.MaxServices,
		baseline: map[string]float64{}, rules: make([]float64, len(rules.rules)), ruleSet: rules, correction: 1}
}

// reset forgets the rates (after an idle spell) but keeps the correction,
// which describes the estimator's bias, not the traffic.
func (e *estimator) reset() {
	e.baseline = map[string]float64{}
	e.errors, e.outliers, e.kept = 0, 0, 0
	e.rules = make([]float64, len(e.rules))
	e.primed = false
	e.binding = false
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
	e.capServices()
	e.errors = e.ewma(e.errors, v.errors/secs)
	e.outliers = e.ewma(e.outliers, v.outliers/secs)
	for i := range e.rules {
		if i < len(v.rules) {
			e.rules[i] = e.ewma(e.rules[i], v.rules[i]/secs)
		}
	}
	e.kept = e.ewma(e.kept, v.kept/secs)
	if e.binding && share > 0 && v.kept > 0 {
		// At most 2% a step and within ±30%: slow enough that a load step
		// (which the rate estimates follow on their own) barely moves it.
		step := min(max(math.Pow(share/(v.kept/secs), 0.3), 0.98), 1.02)
		e.correction = min(max(e.correction*step, 0.7), 1.3)
	}
	e.primed = true

	pol := &policy{services: make(map[string]probability, len(e.baseline)), full: len(e.baseline) >= e.maxServices}
	if share > 0 {
		pol.utilization = e.kept / share
	}
	// Errors first, then keep rules (each within its max_share), then
	// outliers, together within the priority cap; past it each class is
	// sampled so that it stays inside. Fixed-probability sample rules take
	// what they take; the baseline shares the rest.
	capacity := e.maxShare * share
	pol.errors = fraction(capacity, e.errors)
	used := math.Min(e.errors, capacity)
	pol.keeps = make([]probability, len(e.rules))
	var fixed float64
	for i, r := range e.ruleSet.rules {
		pol.keeps[i] = always
		switch {
		case r.action == actionKeep:
			room := capacity - used
			if r.maxShare > 0 {
				room = math.Min(room, r.maxShare*share)
			}
			pol.keeps[i] = fraction(room, e.rules[i])
			used += math.Min(e.rules[i], math.Max(room, 0))
		case r.action == actionSample && !r.weighted:
			fixed += e.rules[i] * r.prob.p
		}
	}
	pol.outliers = fraction(capacity-used, e.outliers)
	used += math.Min(e.outliers, math.Max(capacity-used, 0))
	remaining := (share - used - fixed) * e.correction
	level := waterLevel(e.baseline, e.weight, remaining)
	e.binding = !math.IsInf(level, 1)
	var total, keptBase float64
	services := 0
	for svc, r := range e.baseline {
		pr := fraction(level*e.weight(svc), r)
		pol.services[svc] = pr
		if !isRuleKey(svc) {
			total += r
			keptBase += r * pr.p
			services++
		}
	}
	pol.meanProb = 1
	pol.newService = always
	if total > 0 {
		pol.meanProb = keptBase / total
		// A service not seen yet starts at the level an average service gets,
		// so a burst of new services cannot blow the budget for a whole interval.
		pol.newService = fraction(level, total/float64(max(services, 1)))
	}
	pol.other = pol.newService
	if pr, ok := pol.services[otherServices]; ok {
		pol.other = pr
	}
	return pol
}

// fraction is the probability that keeps budget out of rate.
func fraction(budget, rate float64) probability {
	if rate <= budget {
		return always
	}
	return newProbability(max(budget, 0) / rate)
}

// weight is a baseline entry's weight: a weighted sample rule's, else 1.
func (e *estimator) weight(key string) float64 {
	if isRuleKey(key) {
		for _, r := range e.ruleSet.rules {
			if r.key == key {
				return r.weight
			}
		}
	}
	return 1
}

// capServices keeps max_services rates: the smallest are merged into _other
// (shards book independently, so together they may have seen more).
// Weighted sample rules are not services and are never merged.
func (e *estimator) capServices() {
	type kv struct {
		svc  string
		rate float64
	}
	all := make([]kv, 0, len(e.baseline))
	for svc, r := range e.baseline {
		if svc != otherServices && !isRuleKey(svc) {
			all = append(all, kv{svc, r})
		}
	}
	if len(all) <= e.maxServices {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].rate > all[j].rate })
	for _, x := range all[e.maxServices-1:] {
		e.baseline[otherServices] += x.rate
		delete(e.baseline, x.svc)
	}
}

// waterLevel is weighted max-min fairness: the level L such that
// Σ min(rate_s, weight_s · L) = budget. Quiet entries keep all their traffic
// before noisy ones take the rest, a weighted entry w times a service's
// share; +Inf when everything fits.
func waterLevel(rates map[string]float64, weight func(string) float64, budget float64) float64 {
	if budget <= 0 {
		return 0
	}
	type entry struct{ rate, w float64 }
	sorted := make([]entry, 0, len(rates))
	var weights float64
	for key, r := range rates {
		w := weight(key)
		sorted = append(sorted, entry{r, w})
		weights += w
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].rate/sorted[i].w < sorted[j].rate/sorted[j].w })
	remaining := budget
	for _, e := range sorted {
		if e.rate/e.w*weights > remaining {
			return remaining / weights
		}
		remaining -= e.rate
		weights -= e.w
	}
	return math.Inf(1)
}

// volumes is what one adjust interval saw, in budget units: every span
// decided, late spans included, booked to the class and service of its trace.
type volumes struct {
	baseline map[string]float64 // per service (and weighted sample rule), traces that were not priority
	errors   float64
	outliers float64
	rules    []float64 // per keep rule and fixed-probability sample rule
	kept     float64
}

func newVolumes(rules int) volumes {
	return volumes{baseline: make(map[string]float64), rules: make([]float64, rules)}
}

func (v *volumes) empty() bool {
	if len(v.baseline) > 0 || v.errors != 0 || v.outliers != 0 {
		return false
	}
	for _, x := range v.rules {
		if x != 0 {
			return false
		}
	}
	return true
}

func (v *volumes) addAll(o *volumes) {
	for svc, x := range o.baseline {
		v.baseline[svc] += x
	}
	v.errors += o.errors
	v.outliers += o.outliers
	if len(v.rules) < len(o.rules) {
		v.rules = append(v.rules, make([]float64, len(o.rules)-len(v.rules))...)
	}
	for i, x := range o.rules {
		v.rules[i] += x
	}
	v.kept += o.kept
}

func (v *volumes) total() float64 {
	t := v.errors + v.outliers
	for _, x := range v.baseline {
		t += x
	}
	for _, x := range v.rules {
		t += x
	}
	return t
}

// scale multiplies the offered volumes (not the kept one) by f.
func (v *volumes) scale(f float64) {
	for svc := range v.baseline {
		v.baseline[svc] *= f
	}
	v.errors *= f
	v.outliers *= f
	for i := range v.rules {
		v.rules[i] *= f
	}
}

// scaleAll multiplies every volume, the kept one too, by f.
func (v *volumes) scaleAll(f float64) {
	if f == 1 {
		return
	}
	v.scale(f)
	v.kept *= f
}

// book adds vol to the class (and service, or rule) a trace was decided in.
func (v *volumes) book(d decided, vol float64, kept bool, maxServices int) {
	service := d.service
	switch d.class {
	case reasonError:
		v.errors += vol
	case reasonOutlier:
		v.outliers += vol
	case reasonRule:
		v.rules[d.rule] += vol
	default:
		if _, ok := v.baseline[service]; !ok && len(v.baseline) >= maxServices && !isRuleKey(service) {
			service = otherServices
		}
		v.baseline[service] += vol
	}
	if kept {
		v.kept += vol
	}
}
