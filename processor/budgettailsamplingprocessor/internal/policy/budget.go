package policy // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// OtherKeys is the key the fairness keys past max_keys are booked under.
const OtherKeys = "_other"

type probability = traceinfo.Probability

var always = traceinfo.Always

func newProbability(p float64) probability { return traceinfo.NewProbability(p) }

func higher(a, b probability) probability { return traceinfo.Higher(a, b) }

func isRuleKey(key string) bool { return rules.IsRuleKey(key) }

// BudgetConfig is the whole tier's budget: exactly one of the three.
type BudgetConfig struct {
	SpansPerSecond float64        `mapstructure:"spans_per_second"`
	BytesPerSecond float64        `mapstructure:"bytes_per_second"`
	MonthlyCost    float64        `mapstructure:"monthly_cost"`
	Pricing        pricing.Config `mapstructure:"pricing"`
	// Instances is the static number of sampler instances sharing the budget.
	Instances int `mapstructure:"instances"`
	// PeersDNS, when set, counts the instances from this name's A/AAAA records.
	PeersDNS string `mapstructure:"peers_dns"`
	// PeersRefreshInterval is how often PeersDNS is resolved.
	PeersRefreshInterval time.Duration `mapstructure:"peers_refresh_interval"`
	// MaxPriorityShare caps errors and outliers at this share of the budget.
	MaxPriorityShare float64 `mapstructure:"max_priority_share"`
}

// Check reports every invalid field, named under budget.
func (b *BudgetConfig) Check() []error {
	var errs []error
	set := 0
	for _, f := range []struct {
		name string
		v    float64
	}{{"spans_per_second", b.SpansPerSecond}, {"bytes_per_second", b.BytesPerSecond}, {"monthly_cost", b.MonthlyCost}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("budget.%s: must be a finite number ≥ 0, got %v", f.name, f.v))
		}
		if f.v > 0 {
			set++
		}
	}
	if set != 1 {
		errs = append(errs, fmt.Errorf("budget: exactly one of spans_per_second, bytes_per_second, monthly_cost must be > 0, got %d", set))
	}
	if b.Instances < 1 {
		errs = append(errs, fmt.Errorf("budget.instances: must be ≥ 1, got %d", b.Instances))
	}
	if b.PeersDNS != "" && b.PeersRefreshInterval <= 0 {
		errs = append(errs, fmt.Errorf("budget.peers_refresh_interval: must be > 0, got %v", b.PeersRefreshInterval))
	}
	if !(b.MaxPriorityShare > 0 && b.MaxPriorityShare <= 1) {
		errs = append(errs, fmt.Errorf("budget.max_priority_share: must be in (0, 1], got %v", b.MaxPriorityShare))
	}
	return errs
}

// Unit turns a trace's spans and bytes into the budget's unit.
type Unit struct {
	perSpan, perByte float64
	// perSecond is the whole tier's budget in that unit per second.
	perSecond float64
}

// NewUnit is the unit of budget b.
func NewUnit(b BudgetConfig) Unit {
	switch {
	case b.SpansPerSecond > 0:
		return Unit{perSpan: 1, perSecond: b.SpansPerSecond}
	case b.BytesPerSecond > 0:
		return Unit{perByte: 1, perSecond: b.BytesPerSecond}
	default:
		m := b.Pricing.Resolve()
		return Unit{perSpan: m.PerSpan(), perByte: m.PerByte(), perSecond: b.MonthlyCost / pricing.Month.Seconds()}
	}
}

// SameKind is whether o counts what u counts (spans, bytes, or money at
// the same prices), so that only the amount differs.
func (u Unit) SameKind(o Unit) bool { return u.perSpan == o.perSpan && u.perByte == o.perByte }

// PerSecond is the tier's budget in the unit per second.
func (u Unit) PerSecond() float64 { return u.perSecond }

// Volume is spans and bytes in the budget's unit.
func (u Unit) Volume(spans int, bytes int64) float64 {
	return float64(spans)*u.perSpan + float64(bytes)*u.perByte
}

// Policy is what decisions read; the adjuster replaces it every interval.
// Probabilities are conditional on what arrives: a trace that arrived
// head-sampled is kept with them on top of its incoming probability.
type Policy struct {
	// services holds the baseline services and weighted sample rules.
	services   map[string]probability
	newService probability
	// other is the probability of keys booked under _other once the
	// estimator tracks max_keys of them (full).
	other    probability
	full     bool
	errors   probability
	outliers probability
	// rare is the probability of a key's first trace in rare's interval,
	// below 1 when the rare traces need more than the budget leaves them;
	// rareShortfall is by how much (units/s).
	rare          probability
	rareShortfall float64
	keeps         []probability // per rule; used for keep rules
	utilization   float64
	meanProb      float64
}

// KeepAll keeps everything: the policy before anything was measured.
func KeepAll(rules int) *Policy {
	keeps := make([]probability, rules)
	for i := range keeps {
		keeps[i] = always
	}
	return &Policy{services: map[string]probability{}, newService: always, other: always, errors: always, outliers: always,
		rare: always, keeps: keeps, meanProb: 1}
}

// Fixed keeps each service's traces with its probability, new services'
// with newService, errors and outliers always: for tests.
func Fixed(services map[string]traceinfo.Probability, newService traceinfo.Probability) *Policy {
	return &Policy{services: services, newService: newService, other: newService, errors: always, outliers: always, rare: always, meanProb: 1}
}

// Errors is the error class's probability (before ErrorProbability raises
// it to a service's baseline).
func (p *Policy) Errors() traceinfo.Probability { return p.errors }

// Utilization is the kept volume against the budget share, smoothed.
func (p *Policy) Utilization() float64 { return p.utilization }

// MeanProb is the baseline's traffic-weighted mean probability.
func (p *Policy) MeanProb() float64 { return p.meanProb }

// EachService calls f with every baseline service (not rules) and its
// probability.
func (p *Policy) EachService(f func(service string, pr traceinfo.Probability)) {
	for svc, pr := range p.services {
		if !isRuleKey(svc) {
			f(svc, pr)
		}
	}
}

// BookedKey is the name a service's volume is booked under.
func (p *Policy) BookedKey(service string) string {
	if _, ok := p.services[service]; ok || !p.full {
		return service
	}
	return OtherKeys
}

// Baseline is the service's baseline probability.
func (p *Policy) Baseline(service string) probability {
	if pr, ok := p.services[service]; ok {
		return pr
	}
	if p.full {
		return p.other
	}
	return p.newService
}

// Rare is the probability a key's first trace in rare's interval is kept
// with (at least): 1 unless the rare traces need more than the budget
// leaves them, when they are thinned and weigh 1/p like any other.
func (p *Policy) Rare() traceinfo.Probability { return p.rare }

// RareShortfall is how much more than the budget leaves them the rare
// traces need, in budget units per second (0 when they fit).
func (p *Policy) RareShortfall() float64 { return p.rareShortfall }

// Keep is keep rule i's probability (1 until the estimator set one).
func (p *Policy) Keep(i int) probability {
	if i < len(p.keeps) {
		return p.keeps[i]
	}
	return always
}

// ErrorProbability is the errors' class probability, never below the
// service's baseline: an error is never kept less often than ordinary traffic.
func (p *Policy) ErrorProbability(service string) probability {
	return higher(p.errors, p.Baseline(service))
}

// OutlierProbability likewise for latency outliers.
func (p *Policy) OutlierProbability(service string) probability {
	return higher(p.outliers, p.Baseline(service))
}

// estimator turns interval volumes into smoothed rates and a new policy.
type estimator struct {
	smoothing float64
	maxShare  float64
	minShare  float64 // the baseline's floor
	maxKeys   int
	baseline  map[string]float64 // smoothed rate per fairness key
	// slow is each key's rate smoothed over about a minute, and steady the
	// intervals in a row the key had traffic in (negative: silent). An
	// intermittent key (not steady for steadyIntervals) is sampled at
	// max(baseline, slow): with a trace every few intervals it reads 0 in
	// most of them and would be kept whole between its traces, and hundreds
	// of such keys together go well over budget; the slow rate holds its
	// true rate. A steady key follows its fast rate, so a drop in load is
	// followed at once.
	slow     map[string]float64
	steady   map[string]int
	errors   float64
	outliers float64
	rules    []float64 // smoothed rate per keep and fixed-probability sample rule
	rare     float64
	ruleSet  *rules.Set
	kept     float64
	primed   bool
	// correction scales the baseline budget by how far the kept volume
	// missed the budget (integral feedback). Probabilities set from noisy
	// rate estimates overshoot on average (E[1/rate] > 1/E[rate]), by ≈ 5%
	// with few large traces per interval; this takes that out.
	correction float64
	binding    bool // the last policy sampled the baseline (budget binding)
	// rareClock measures rare's volume per clock-aligned interval (nil:
	// rare is off, or a test gives volumes without a clock).
	rareClock *rareClock
}

// rareClock measures rare's volume over whole clock-aligned rare intervals.
// Rare keeps a burst of first traces as each interval starts and few after:
// smoothed per adjustment, its rate swings from high at the start to low at
// the end, and the next burst would be kept at the quiet end's probability.
type rareClock struct {
	interval time.Duration
	n        int64   // the interval being measured
	vol      float64 // its volume so far
	// started: an interval is being measured; partial: it is the first,
	// which began before the clock did (the estimator's start or reset).
	// Each later one is measured from its first adjustment, whose drained
	// volumes reach back to the one before: whole.
	started, partial bool
	// rate is the last whole interval's volume per second; until one was
	// measured, the volume so far over the interval's length (not over the
	// time so far: the burst at its start would read as a rate many times
	// the interval's, and thin rare traces to nothing).
	rate  float64
	whole bool
}

// setRareInterval measures rare over intervals of d from now on (0 or
// rare off: nothing). Until the first whole one, rare's rate is the last
// one's scaled to the new length: rare keeps about a trace per key per
// interval, so its volume per second goes as 1/interval.
func (e *estimator) setRareInterval(d time.Duration) {
	c := e.rareClock
	if d <= 0 || c == nil || d == c.interval {
		return
	}
	e.rareClock = &rareClock{interval: d, rate: c.rate * c.interval.Seconds() / d.Seconds(), whole: c.whole}
	if c.whole {
		e.rare = e.rareClock.rate
	}
}

// addRare books rare's volume decided by now.
func (e *estimator) addRare(now time.Time, vol float64) {
	if e.rareClock != nil {
		e.rareClock.add(now, vol)
	}
}

// add books vol (decided by now) and updates the rate.
func (c *rareClock) add(now time.Time, vol float64) {
	n := now.UnixNano() / int64(c.interval)
	if !c.started {
		c.started, c.partial, c.n = true, true, n
	}
	if n != c.n {
		if !c.partial {
			c.rate, c.whole = c.vol/c.interval.Seconds(), true
		}
		c.partial = false
		c.n, c.vol = n, 0
	}
	c.vol += vol
	if !c.whole {
		c.rate = c.vol / c.interval.Seconds()
	}
}

func newEstimator(s Settings, rs *rules.Set) *estimator {
	e := &estimator{smoothing: s.Smoothing, maxShare: s.Budget.MaxPriorityShare, minShare: s.MinBaselineShare, maxKeys: s.MaxKeys,
		baseline: map[string]float64{}, slow: map[string]float64{}, steady: map[string]int{}, rules: make([]float64, rs.Len()), ruleSet: rs, correction: 1}
	if s.RareInterval > 0 {
		e.rareClock = &rareClock{interval: s.RareInterval}
	}
	return e
}

// setRules follows the rules of a running sampler: the rates of the rules
// that keep their slot stay; new slots start at zero; a retired weighted
// sample rule leaves the baseline.
func (e *estimator) setRules(rs *rules.Set) {
	if n := rs.Len(); n > len(e.rules) {
		e.rules = append(e.rules, make([]float64, n-len(e.rules))...)
	}
	for key := range e.baseline {
		if isRuleKey(key) && rs.ByKey(key) == nil {
			delete(e.baseline, key)
			delete(e.slow, key)
			delete(e.steady, key)
		}
	}
	e.ruleSet = rs
}

// reset forgets the rates (after an idle spell) but keeps the correction,
// which describes the estimator's bias, not the traffic.
func (e *estimator) reset() {
	e.baseline = map[string]float64{}
	e.slow = map[string]float64{}
	e.steady = map[string]int{}
	e.errors, e.outliers, e.rare, e.kept = 0, 0, 0, 0
	e.rules = make([]float64, len(e.rules))
	if e.rareClock != nil {
		e.rareClock = &rareClock{interval: e.rareClock.interval}
	}
	e.primed = false
	e.binding = false
}

func (e *estimator) ewma(old, cur float64) float64 {
	if !e.primed {
		return cur
	}
	return e.smoothing*cur + (1-e.smoothing)*old
}

// slowSmoothing is the slow rates' weight of the newest interval: with the
// default 5 s interval, a memory of about a minute.
const slowSmoothing = 0.08

// steadyIntervals is how many intervals in a row with traffic make a key
// steady (about a minute at the default interval).
const steadyIntervals = 12

// forgetIntervals is how many silent intervals in a row make the estimator
// forget a key (5 minutes at the default interval): it comes back as a new
// key would.
const forgetIntervals = 60

func (e *estimator) slowEWMA(old, cur float64) float64 {
	if !e.primed {
		return cur
	}
	return slowSmoothing*cur + (1-slowSmoothing)*old
}

// update folds one interval's volumes (over secs seconds) into the rates
// and returns the policy for a per-instance budget of share units/s.
// update learns the interval's volumes and plans the policy.
func (e *estimator) update(v Volumes, secs, share float64) *Policy {
	e.observe(v, secs, share)
	return e.plan(share)
}

// observe folds an interval's volumes (over secs) into the rates.
func (e *estimator) observe(v Volumes, secs, share float64) {
	for svc, old := range e.baseline {
		if _, ok := v.baseline[svc]; !ok {
			e.baseline[svc] = e.ewma(old, 0)
			e.slow[svc] = e.slowEWMA(e.slow[svc], 0)
			e.steady[svc] = min(e.steady[svc], 0) - 1 // silent intervals, counted down
			if e.steady[svc] <= -forgetIntervals || e.slow[svc] < 1e-12 {
				delete(e.baseline, svc)
				delete(e.slow, svc)
				delete(e.steady, svc)
			}
		}
	}
	for svc, vol := range v.baseline {
		e.baseline[svc] = e.ewma(e.baseline[svc], vol/secs)
		e.slow[svc] = e.slowEWMA(e.slow[svc], vol/secs)
		e.steady[svc] = max(e.steady[svc], 0) + 1
	}
	e.capKeys()
	e.errors = e.ewma(e.errors, v.errors/secs)
	e.outliers = e.ewma(e.outliers, v.outliers/secs)
	if e.rareClock != nil {
		e.rare = e.rareClock.rate
	} else {
		e.rare = e.slowEWMA(e.rare, v.rare/secs)
	}
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
}

// plan is the policy the rates learned give for share (units per second).
func (e *estimator) plan(share float64) *Policy {
	pol := &Policy{services: make(map[string]probability, len(e.baseline)), full: len(e.baseline) >= e.maxKeys}
	if share > 0 {
		pol.utilization = e.kept / share
	}
	// Errors first, within the priority cap; they alone may take the
	// baseline's floor (min_share). Then keep rules (each within its
	// max_share) and rare traces, then outliers, each sampled past the room
	// left so that the classes stay inside the budget less the floor; keep
	// rules and outliers also within the priority cap. Fixed-probability
	// sample rules take what they take; the baseline shares the rest. The
	// floor is what keeps the kept traces representative: without it a
	// budget that errors, outliers and rare traces fill leaves ordinary
	// traffic no chance, and nothing kept stands for it.
	capacity := e.maxShare * share
	pol.errors = fraction(capacity, e.errors)
	used := math.Min(e.errors, capacity)
	floor := math.Min(e.minShare*share, math.Max(share-used, 0))
	var fixed float64
	for _, i := range e.ruleSet.Order() {
		if r := e.ruleSet.Rule(i); r.Action == rules.ActionSample && !r.Weighted {
			fixed += e.rules[i] * r.Prob.P
		}
	}
	// room is what a class may still take: inside the cap when capped, and
	// never into the floor.
	room := func(capped bool) float64 {
		r := share - floor - fixed - used
		if capped {
			r = math.Min(r, capacity-used)
		}
		return math.Max(r, 0)
	}
	// Keep rules take room in the order they are tried; a retired rule's
	// slot decides nothing more.
	pol.keeps = make([]probability, len(e.rules))
	for i := range pol.keeps {
		pol.keeps[i] = always
	}
	for _, i := range e.ruleSet.Order() {
		if r := e.ruleSet.Rule(i); r.Action == rules.ActionKeep {
			ruleRoom := room(true)
			if r.MaxShare > 0 {
				ruleRoom = math.Min(ruleRoom, r.MaxShare*share)
			}
			pol.keeps[i] = fraction(ruleRoom, e.rules[i])
			used += math.Min(e.rules[i], ruleRoom)
		}
	}
	rareRoom := room(false)
	pol.rare = fraction(rareRoom, e.rare)
	pol.rareShortfall = math.Max(e.rare-rareRoom, 0)
	used += math.Min(e.rare, rareRoom)
	outlierRoom := room(true)
	pol.outliers = fraction(outlierRoom, e.outliers)
	used += math.Min(e.outliers, outlierRoom)
	remaining := (share - used - fixed) * e.correction
	rates := make(map[string]float64, len(e.baseline))
	for svc, r := range e.baseline {
		rates[svc] = r
		if e.steady[svc] < steadyIntervals {
			rates[svc] = max(r, e.slow[svc])
		}
	}
	// The floor is min_share of the budget spread over all baseline
	// traffic alike (as far as the baseline has it).
	var all float64
	for _, r := range rates {
		all += r
	}
	floorP := 0.0
	if all > 0 {
		floorP = min(math.Min(floor*e.correction, math.Max(remaining, 0))/all, 1)
	}
	level := waterLevel(rates, e.weight, remaining, floorP)
	e.binding = !math.IsInf(level, 1)
	var total, keptBase float64
	services := 0
	for svc, r := range rates {
		pr := fraction(max(level*e.weight(svc), floorP*r), r)
		pol.services[svc] = pr
		if !isRuleKey(svc) {
			total += r
			keptBase += r * pr.P
			services++
		}
	}
	pol.meanProb = 1
	pol.newService = always
	if total > 0 {
		pol.meanProb = keptBase / total
		// A service not seen yet starts at the level an average service gets,
		// so a burst of new services cannot blow the budget for a whole interval.
		mean := total / float64(max(services, 1))
		pol.newService = fraction(max(level, floorP*mean), mean)
	}
	pol.other = pol.newService
	if pr, ok := pol.services[OtherKeys]; ok {
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
		if r := e.ruleSet.ByKey(key); r != nil {
			return r.Weight
		}
	}
	return 1
}

// capKeys keeps max_keys rates: the smallest are merged into _other
// (shards book independently, so together they may have seen more).
// Weighted sample rules are not services and are never merged.
func (e *estimator) capKeys() {
	type kv struct {
		svc  string
		rate float64
	}
	all := make([]kv, 0, len(e.baseline))
	for svc, r := range e.baseline {
		if svc != OtherKeys && !isRuleKey(svc) {
			all = append(all, kv{svc, r})
		}
	}
	if len(all) <= e.maxKeys {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].rate > all[j].rate })
	for _, x := range all[e.maxKeys-1:] {
		e.baseline[OtherKeys] += x.rate
		e.slow[OtherKeys] += e.slow[x.svc]
		delete(e.baseline, x.svc)
		delete(e.slow, x.svc)
		delete(e.steady, x.svc)
	}
}

// waterLevel is weighted max-min fairness above a floor: the level L such
// that Σ min(rate_s, max(floor · rate_s, weight_s · L)) = budget. Quiet
// entries keep all their traffic before noisy ones take the rest, a
// weighted entry w times a service's share, and none is kept below floor;
// +Inf when everything fits. The floor (one probability for all traffic)
// bounds the weights the noisiest entries' traces carry, so th-weighted
// totals stay precise when fairness alone would leave them a trace in
// thousands.
func waterLevel(rates map[string]float64, weight func(string) float64, budget, floor float64) float64 {
	if budget <= 0 {
		return 0
	}
	type entry struct{ rate, w float64 }
	entries := make([]entry, 0, len(rates))
	var total, hi float64
	for key, r := range rates {
		w := weight(key)
		entries = append(entries, entry{r, w})
		total += r
		hi = max(hi, r/w)
	}
	if total <= budget {
		return math.Inf(1)
	}
	kept := func(level float64) float64 {
		var sum float64
		for _, e := range entries {
			sum += min(e.rate, max(floor*e.rate, e.w*level))
		}
		return sum
	}
	// kept rises with the level: bisect until the interval stops shrinking.
	lo := 0.0
	for range 200 {
		mid := (lo + hi) / 2
		if mid <= lo || mid >= hi {
			break
		}
		if kept(mid) > budget {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// Volumes is what one adjust interval saw, in budget units: every span
// decided, late spans included, booked to the class and service of its trace.
type Volumes struct {
	baseline map[string]float64 // per fairness key (and weighted sample rule), traces that were not priority
	errors   float64
	outliers float64
	rare     float64
	rules    []float64 // per keep rule and fixed-probability sample rule
	kept     float64
}

// NewVolumes returns empty volumes for this many rules.
func NewVolumes(rules int) Volumes {
	return Volumes{baseline: make(map[string]float64), rules: make([]float64, rules)}
}

func (v *Volumes) empty() bool {
	if len(v.baseline) > 0 || v.errors != 0 || v.outliers != 0 || v.rare != 0 {
		return false
	}
	for _, x := range v.rules {
		if x != 0 {
			return false
		}
	}
	return true
}

// Add adds o's volumes to v's.
func (v *Volumes) Add(o *Volumes) {
	for svc, x := range o.baseline {
		v.baseline[svc] += x
	}
	v.errors += o.errors
	v.outliers += o.outliers
	v.rare += o.rare
	if len(v.rules) < len(o.rules) {
		v.rules = append(v.rules, make([]float64, len(o.rules)-len(v.rules))...)
	}
	for i, x := range o.rules {
		v.rules[i] += x
	}
	v.kept += o.kept
}

func (v *Volumes) total() float64 {
	t := v.errors + v.outliers + v.rare
	for _, x := range v.baseline {
		t += x
	}
	for _, x := range v.rules {
		t += x
	}
	return t
}

// scale multiplies the offered volumes (not the kept one) by f.
func (v *Volumes) scale(f float64) {
	for svc := range v.baseline {
		v.baseline[svc] *= f
	}
	v.errors *= f
	v.outliers *= f
	v.rare *= f
	for i := range v.rules {
		v.rules[i] *= f
	}
}

// scaleAll multiplies every volume, the kept one too, by f.
func (v *Volumes) scaleAll(f float64) {
	if f == 1 {
		return
	}
	v.scale(f)
	v.kept *= f
}

// Book adds vol to the class (and fairness key, or rule) a trace was
// decided in. It reports whether the key was folded into _other because
// this interval's volumes already hold maxKeys keys.
func (v *Volumes) Book(d traceinfo.Decided, vol float64, kept bool, maxKeys int) (folded bool) {
	key := d.Service
	switch d.Class {
	case traceinfo.ReasonError:
		v.errors += vol
	case traceinfo.ReasonOutlier:
		v.outliers += vol
	case traceinfo.ReasonRule:
		if d.Rule < 0 || int(d.Rule) >= rules.MaxSlots {
			// A peer's decision with a slot this sampler cannot have.
			break
		}
		if int(d.Rule) >= len(v.rules) {
			v.rules = append(v.rules, make([]float64, int(d.Rule)+1-len(v.rules))...)
		}
		v.rules[d.Rule] += vol
	case traceinfo.ReasonRare:
		v.rare += vol
	default:
		if _, ok := v.baseline[key]; !ok && len(v.baseline) >= maxKeys && !isRuleKey(key) {
			key, folded = OtherKeys, key != OtherKeys
		}
		v.baseline[key] += vol
	}
	if kept {
		v.kept += vol
	}
	return folded
}

// Total is every class's volume.
func (v *Volumes) Total() float64 { return v.total() }

// Baseline is the volume per baseline service (and weighted rule).
func (v *Volumes) Baseline() map[string]float64 { return v.baseline }

// Errors is the error traces' volume.
func (v *Volumes) Errors() float64 { return v.errors }

// Kept is the kept volume.
func (v *Volumes) Kept() float64 { return v.kept }
