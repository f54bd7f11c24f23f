package policy // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"

import (
	"math"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
)

// Settings are the options the policy is computed with.
type Settings struct {
	Budget         BudgetConfig
	AdjustInterval time.Duration
	Smoothing      float64
	MaxKeys        int
	// MinBaselineShare is the share of the budget the baseline keeps
	// whatever other classes ask, errors excepted.
	MinBaselineShare float64
	// RareInterval is rare's (0: off).
	RareInterval time.Duration
}

// Drain takes the volumes decided, the volume received (intake) and the
// fragments that arrived since its last call.
type Drain func() (v Volumes, intake float64, fragments int64)

// Adjuster recomputes the policy: every adjust interval from the volumes
// decided, or, while priming, every tick from the volume received. Tick and
// Adjust run on one goroutine; Policy, Priming and Share are read from any.
type Adjuster struct {
	s     Settings
	unit  Unit
	rules atomic.Pointer[rules.Set]
	// nextRules is a rule set the next Tick applies (SetRules), nextRare
	// a rare interval (SetRareInterval; 0: none).
	nextRules atomic.Pointer[rules.Set]
	nextRare  atomic.Int64
	drain     Drain
	est       *estimator
	policy    atomic.Pointer[Policy]
	peers     atomic.Int64
	egress    *EgressMeter
	// pinned: Pin set the policy, which stays.
	pinned  atomic.Bool
	lastAdj time.Time
	// priming is read on the hot path; prime is the adjusting goroutine's.
	priming atomic.Bool
	prime   primeState
	// perSecond is the tier's budget (float64 bits), which Retune changes;
	// retune is a change the next Tick applies.
	perSecond atomic.Uint64
	retune    atomic.Pointer[Retune]
}

// Retune is what a running sampler's policy may change to, in the budget's
// unit: the rates learned, the correction and the priming stay.
type Retune struct {
	// PerSecond is the whole tier's budget per second.
	PerSecond        float64
	MaxPriorityShare float64
	MinBaselineShare float64
}

// Retune changes the budget and the shares at the next Tick, which plans
// the policy again from the rates learned: no interval is lost.
func (a *Adjuster) Retune(r Retune) { a.retune.Store(&r) }

// RetuneNow applies r at once: before Start (the policy file read at
// start: no tick runs with the configuration's budget), or on the
// adjusting goroutine.
func (a *Adjuster) RetuneNow(r Retune) {
	a.Retune(r)
	a.applyRetune()
}

// SetRules changes the rules at the next Tick (a set that follows the
// running one: rules.Set.Next), planned at once from the rates learned.
// Decisions read the rules from Rules, which changes with the policy.
func (a *Adjuster) SetRules(rs *rules.Set) { a.nextRules.Store(rs) }

// SetRareInterval changes rare's interval at the next Tick (rare stays on
// or off as configured; 0: unchanged).
func (a *Adjuster) SetRareInterval(d time.Duration) { a.nextRare.Store(int64(d)) }

// Rules are the rules decisions apply now.
func (a *Adjuster) Rules() *rules.Set { return a.rules.Load() }

// applyRetune runs on the adjusting goroutine. New rules are published
// after the policy planned for them, so that a decision under a new keep
// rule reads its probability (a policy never lacks one: Keep is 1 past
// what it planned).
func (a *Adjuster) applyRetune() {
	r := a.retune.Swap(nil)
	rs := a.nextRules.Swap(nil)
	rareInterval := time.Duration(a.nextRare.Swap(0))
	if r == nil && rs == nil && rareInterval == 0 {
		return
	}
	a.est.setRareInterval(rareInterval)
	if r != nil {
		a.perSecond.Store(math.Float64bits(r.PerSecond))
		a.est.maxShare, a.est.minShare = r.MaxPriorityShare, r.MinBaselineShare
	}
	if rs != nil {
		a.est.setRules(rs)
	}
	if !a.priming.Load() && !a.pinned.Load() && a.est.primed {
		a.policy.Store(a.est.plan(a.Share()))
	}
	if rs != nil {
		a.rules.Store(rs)
	}
}

// Budget is the whole tier's budget in its unit per second, as retuned.
func (a *Adjuster) Budget() float64 { return math.Float64frombits(a.perSecond.Load()) }

// NewAdjuster starts with the keep-everything policy and the budget's
// static instances as peers.
func NewAdjuster(s Settings, rs *rules.Set, drain Drain) *Adjuster {
	u := NewUnit(s.Budget)
	a := &Adjuster{s: s, unit: u, drain: drain, est: newEstimator(s, rs), egress: newEgressMeter(u)}
	a.rules.Store(rs)
	a.peers.Store(int64(s.Budget.Instances))
	a.perSecond.Store(math.Float64bits(u.perSecond))
	a.policy.Store(KeepAll(rs.Len()))
	return a
}

// Unit is the budget's unit.
func (a *Adjuster) Unit() Unit { return a.unit }

// Policy is the policy decisions read now.
func (a *Adjuster) Policy() *Policy { return a.policy.Load() }

// Priming reports whether the policy is set from intake (no full interval
// of decisions measured yet).
func (a *Adjuster) Priming() bool { return a.priming.Load() }

// Egress is what kept traces weigh as they leave.
func (a *Adjuster) Egress() *EgressMeter { return a.egress }

// Peers is how many instances share the budget.
func (a *Adjuster) Peers() int64 { return a.peers.Load() }

// SetPeers sets how many instances share the budget; it reports whether
// that changed.
func (a *Adjuster) SetPeers(n int64) bool { return a.peers.Swap(n) != n }

// Pin sets the policy and keeps it: no priming, no adjustment. For tests
// that need a known policy.
func (a *Adjuster) Pin(p *Policy) {
	a.pinned.Store(true)
	a.priming.Store(false)
	a.policy.Store(p)
}

// The policy comes from the volumes decided over each adjust interval. A
// fresh sampler has decided nothing yet, and one back from an idle spell
// has only stale rates: until a full interval of decisions has been
// measured it primes, setting one probability for all traffic every tick
// from the volume it receives (intake), so it keeps about its budget share
// from its first second instead of everything until its first adjustment.

// Start sets the time measurements start from, and primes.
func (a *Adjuster) Start(now time.Time) {
	if a.pinned.Load() {
		return
	}
	a.lastAdj = now
	a.startPriming(now)
}

func (a *Adjuster) startPriming(now time.Time) {
	a.est.reset()
	a.prime = primeState{lastTick: now, decided: NewVolumes(a.Rules().Len())}
	a.priming.Store(true)
}

// intakeWindow is how many ticks the intake rate is measured over once
// traffic has run that long: SDKs export every 5 s, so a shorter window sees
// only some of the exporters, a longer one still the ramp-up.
const intakeWindow = 5

// primeState is what priming has measured so far.
type primeState struct {
	lastTick time.Time
	// intake is the volume received since from; recent is per tick, the
	// last intakeWindow ticks.
	intake float64
	from   time.Time
	recent []tickIntake
	// decided is the volume decided since decidedFrom (zero: none yet).
	decided     Volumes
	decidedFrom time.Time
}

// TickInterval is how often Tick runs.
func (a *Adjuster) TickInterval() time.Duration { return min(time.Second, a.s.AdjustInterval) }

// Tick runs every TickInterval: it primes, or adjusts when an interval is
// due.
func (a *Adjuster) Tick(now time.Time) {
	a.applyRetune()
	if a.priming.Load() || now.Sub(a.lastAdj) >= a.s.AdjustInterval-a.TickInterval()/2 {
		a.Adjust(now)
	}
}

// Adjust recomputes the policy from the last interval's volumes.
func (a *Adjuster) Adjust(now time.Time) {
	if a.pinned.Load() {
		return
	}
	if a.priming.Load() {
		a.primeTick(now)
		return
	}
	secs := now.Sub(a.lastAdj).Seconds()
	if secs <= 0 {
		return
	}
	v, _, fragments := a.drain()
	v.scaleAll(a.egress.update(a.unit, a.est.smoothing))
	if v.empty() {
		if fragments > 0 {
			// Spans arrived but no decision fell in this interval (SDKs
			// export in bursts): extend the interval rather than learn zero.
			return
		}
		// Nothing arrived and nothing was decided for a whole interval:
		// idle. Rates learned before would be stale when traffic returns;
		// measure afresh.
		a.startPriming(now)
		return
	}
	a.lastAdj = now
	a.est.addRare(now, v.rare)
	a.policy.Store(a.est.update(v, secs, a.Share()))
}

func (a *Adjuster) primeTick(now time.Time) {
	v, intake, _ := a.drain()
	ratio := a.egress.update(a.unit, a.est.smoothing)
	v.scaleAll(ratio)
	intake *= ratio
	ps := &a.prime
	if ps.intake == 0 {
		// Traffic began after the last tick.
		ps.from = ps.lastTick
	}
	ps.intake += intake
	if ps.intake > 0 {
		ps.recent = append(ps.recent, tickIntake{vol: intake, secs: now.Sub(ps.lastTick).Seconds()})
		if len(ps.recent) > intakeWindow {
			ps.recent = ps.recent[1:]
		}
	}
	if !v.empty() && ps.decidedFrom.IsZero() {
		ps.decidedFrom = ps.lastTick
	}
	ps.decided.Add(&v)
	ps.lastTick = now
	share := a.Share()
	if !ps.decidedFrom.IsZero() && now.Sub(ps.decidedFrom) >= a.s.AdjustInterval {
		secs := now.Sub(ps.decidedFrom).Seconds()
		// Decisions lag arrivals by the decision wait: in the first interval
		// of decisions they are still ramping up. Their split by class and
		// service is right; the total is the intake's.
		if total := ps.decided.total(); total > 0 {
			if scale := ps.intakeRate(now) * secs / total; scale > 1 {
				ps.decided.scale(scale)
			}
		}
		a.priming.Store(false)
		a.lastAdj = now
		a.est.addRare(now, ps.decided.rare)
		a.policy.Store(a.est.update(ps.decided, secs, share))
		return
	}
	if rate := ps.intakeRate(now); rate > 0 {
		pr := fraction(share, rate)
		pol := KeepAll(a.Rules().Len())
		pol.newService, pol.other, pol.meanProb = pr, pr, pr.P
		a.policy.Store(pol)
	}
}

type tickIntake struct{ vol, secs float64 }

// intakeRate is the volume received per second: over the last intakeWindow
// ticks, or since traffic began when that is shorter.
func (ps *primeState) intakeRate(now time.Time) float64 {
	if len(ps.recent) < intakeWindow {
		if secs := now.Sub(ps.from).Seconds(); secs > 0 {
			return ps.intake / secs
		}
		return 0
	}
	var vol, secs float64
	for _, r := range ps.recent {
		vol += r.vol
		secs += r.secs
	}
	if secs <= 0 {
		return 0
	}
	return vol / secs
}

// Share is this instance's part of the tier's budget, in units per second.
func (a *Adjuster) Share() float64 {
	return a.Budget() / float64(max(1, a.peers.Load()))
}

// EgressMeter compares what kept traces weigh as they leave with what
// their decisions booked. A decision books a trace's fragments as they were
// buffered, each with its resource and scope; kept fragments leave merged
// per resource and scope (otlpwire.Merger), which SDK clients' traffic, a
// fragment per service and pod, shrinks by a quarter to a third. A bytes or
// money budget would under-spend by that much: the volumes the policy is
// learned from are scaled by the ratio instead.
type EgressMeter struct {
	booked, left, spans atomic.Int64
	// ratio is left/booked in budget units, smoothed (its bits: the adjust
	// goroutine writes it, the metrics read it).
	ratio atomic.Uint64
	// sized: the budget has a bytes part (else forwarded requests are not
	// sized, and the ratio stays 1).
	sized bool
}

func newEgressMeter(u Unit) *EgressMeter {
	m := &EgressMeter{sized: u.perByte > 0}
	m.ratio.Store(math.Float64bits(1))
	return m
}

// Current is the ratio now.
func (m *EgressMeter) Current() float64 { return math.Float64frombits(m.ratio.Load()) }

// Add counts td, about to leave, whose decisions booked booked bytes.
func (m *EgressMeter) Add(td ptrace.Traces, booked int64) {
	if !m.sized {
		return
	}
	m.booked.Add(booked)
	var sizer ptrace.ProtoMarshaler
	m.left.Add(int64(sizer.TracesSize(td)))
	m.spans.Add(int64(td.SpanCount()))
}

// Bounds of the ratio: stamping th and the reason attribute can make a
// trace leave larger than booked; merging cannot shrink it below its spans.
const (
	minEgressRatio = 0.2
	maxEgressRatio = 1.5
)

// update folds what left since the last call into the ratio and returns it.
func (m *EgressMeter) update(u Unit, smoothing float64) float64 {
	booked, left, spans := m.booked.Swap(0), m.left.Swap(0), m.spans.Swap(0)
	if booked <= 0 {
		return m.Current()
	}
	cur := u.Volume(int(spans), left) / u.Volume(int(spans), booked)
	cur = min(max(cur, minEgressRatio), maxEgressRatio)
	ratio := smoothing*cur + (1-smoothing)*m.Current()
	m.ratio.Store(math.Float64bits(ratio))
	return ratio
}
