package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"math"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The policy comes from the volumes decided over each adjust interval. A
// fresh sampler has decided nothing yet, and one back from an idle spell
// has only stale rates: until a full interval of decisions has been
// measured it primes, setting one probability for all traffic every tick
// from the volume it receives (intake), so it keeps about its budget share
// from its first second instead of everything until its first adjustment.

// startClock sets the time the sampler's measurements start from.
func (p *budgetTailSampler) startClock(now time.Time) {
	p.lastAdj = now
	p.startPriming(now)
}

func (p *budgetTailSampler) startPriming(now time.Time) {
	p.est.reset()
	p.prime = primeState{lastTick: now, decided: newVolumes(len(p.rules.rules))}
	p.priming.Store(true)
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
	decided     volumes
	decidedFrom time.Time
}

// tickAdjust runs every second: it primes, or adjusts when an interval is due.
func (p *budgetTailSampler) tickAdjust() {
	tick := min(time.Second, p.cfg.AdjustInterval)
	if p.priming.Load() || p.now().Sub(p.lastAdj) >= p.cfg.AdjustInterval-tick/2 {
		p.adjust()
	}
}

// adjust recomputes the policy from the last interval's volumes.
func (p *budgetTailSampler) adjust() {
	now := p.now()
	if p.priming.Load() {
		p.primeTick(now)
		return
	}
	secs := now.Sub(p.lastAdj).Seconds()
	if secs <= 0 {
		return
	}
	v, _, fragments := p.drain()
	v.scaleAll(p.egress.update(p.unit, p.est.smoothing))
	if v.empty() {
		if fragments > 0 {
			// Spans arrived but no decision fell in this interval (SDKs
			// export in bursts): extend the interval rather than learn zero.
			return
		}
		// Nothing arrived and nothing was decided for a whole interval:
		// idle. Rates learned before would be stale when traffic returns;
		// measure afresh.
		p.startPriming(now)
		return
	}
	p.lastAdj = now
	p.policy.Store(p.est.update(v, secs, p.share()))
}

func (p *budgetTailSampler) primeTick(now time.Time) {
	v, intake, _ := p.drain()
	ratio := p.egress.update(p.unit, p.est.smoothing)
	v.scaleAll(ratio)
	intake *= ratio
	ps := &p.prime
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
	ps.decided.addAll(&v)
	ps.lastTick = now
	share := p.share()
	if !ps.decidedFrom.IsZero() && now.Sub(ps.decidedFrom) >= p.cfg.AdjustInterval {
		secs := now.Sub(ps.decidedFrom).Seconds()
		// Decisions lag arrivals by the decision wait: in the first interval
		// of decisions they are still ramping up. Their split by class and
		// service is right; the total is the intake's.
		if total := ps.decided.total(); total > 0 {
			if scale := ps.intakeRate(now) * secs / total; scale > 1 {
				ps.decided.scale(scale)
			}
		}
		p.priming.Store(false)
		p.lastAdj = now
		p.policy.Store(p.est.update(ps.decided, secs, share))
		return
	}
	if rate := ps.intakeRate(now); rate > 0 {
		pr := fraction(share, rate)
		pol := keepAllPolicy(len(p.rules.rules))
		pol.newService, pol.other, pol.meanProb = pr, pr, pr.p
		p.policy.Store(pol)
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

// drain takes the shards' decided volumes, intake and fragment counts since
// the last call.
func (p *budgetTailSampler) drain() (v volumes, intake float64, fragments int64) {
	v = newVolumes(len(p.rules.rules))
	for _, sh := range p.shards {
		sh.mu.Lock()
		cur := sh.volumes
		sh.volumes = newVolumes(len(p.rules.rules))
		intake += sh.intake
		sh.intake = 0
		fragments += sh.fragments
		sh.fragments = 0
		sh.mu.Unlock()
		v.addAll(&cur)
	}
	return v, intake, fragments
}

// share is this instance's part of the tier's budget, in units per second.
func (p *budgetTailSampler) share() float64 {
	return p.unit.perSecond / float64(max(1, p.peers.Load()))
}

// egressMeter compares what kept traces weigh as they leave with what
// their decisions booked. A decision books a trace's fragments as they were
// buffered, each with its resource and scope; kept fragments leave merged
// per resource and scope (keptMerger), which SDK clients' traffic, a
// fragment per service and pod, shrinks by a quarter to a third. A bytes or
// money budget would under-spend by that much: the volumes the policy is
// learned from are scaled by the ratio instead.
type egressMeter struct {
	booked, left, spans atomic.Int64
	// ratio is left/booked in budget units, smoothed (its bits: the adjust
	// goroutine writes it, the metrics read it).
	ratio atomic.Uint64
	// sized: the budget has a bytes part (else forwarded requests are not
	// sized, and the ratio stays 1).
	sized bool
}

func newEgressMeter(u budgetUnit) *egressMeter {
	m := &egressMeter{sized: u.perByte > 0}
	m.ratio.Store(math.Float64bits(1))
	return m
}

func (m *egressMeter) current() float64 { return math.Float64frombits(m.ratio.Load()) }

// add counts td, about to leave, whose decisions booked booked bytes.
func (m *egressMeter) add(td ptrace.Traces, booked int64) {
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
func (m *egressMeter) update(u budgetUnit, smoothing float64) float64 {
	booked, left, spans := m.booked.Swap(0), m.left.Swap(0), m.spans.Swap(0)
	if booked <= 0 {
		return m.current()
	}
	cur := u.volume(int(spans), left) / u.volume(int(spans), booked)
	cur = min(max(cur, minEgressRatio), maxEgressRatio)
	ratio := smoothing*cur + (1-smoothing)*m.current()
	m.ratio.Store(math.Float64bits(ratio))
	return ratio
}
