package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// decideExpired decides every trace whose wait is over: the shards are
// shared among up to GOMAXPROCS goroutines, each forwarding what it kept in
// one request.
func (p *budgetTailSampler) decideExpired(ctx context.Context) {
	now := p.now()
	workers := min(runtime.GOMAXPROCS(0), len(p.shards))
	if workers == 1 {
		p.decideShards(ctx, p.shards, now)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(p.shards)/workers, (w+1)*len(p.shards)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.decideShards(ctx, p.shards[lo:hi], now)
		}()
	}
	wg.Wait()
}

// decideRun is how many traces a decision pass decides before letting
// intake into the shard.
const decideRun = 64

func (p *budgetTailSampler) decideShards(ctx context.Context, shards []*shard, now time.Time) {
	var out keptSet
	for _, sh := range shards {
		sh.mu.Lock()
		decided := 0
		// Intake waits for the shard while it is decided: let it in between
		// runs of decisions (the lists are read from their heads again).
		yield := func() {
			if decided++; decided%decideRun == 0 {
				sh.flush()
				sh.mu.Unlock()
				sh.mu.Lock()
			}
		}
		for t := sh.head(&sh.arrivals); t != nil && p.since(now, t.arrived) >= p.cfg.DecisionWait; t = sh.head(&sh.arrivals) {
			p.decideOrPassOn(sh, t, now, &out)
			yield()
		}
		for t := sh.head(&sh.roots); t != nil && p.since(now, t.rootArrived) >= p.cfg.DecisionWaitAfterRoot; t = sh.head(&sh.roots) {
			p.decideOrPassOn(sh, t, now, &out)
			yield()
		}
		for t := sh.head(&sh.handed); t != nil; {
			next := sh.next(&sh.handed, t)
			if p.expired(t, now) {
				p.decideOrPassOn(sh, t, now, &out)
			}
			t = next
		}
		sh.compact()
		sh.flush()
		sh.mu.Unlock()
	}
	p.forward(ctx, &out)
}

// decideOrPassOn decides a trace whose wait is over, unless the ring gives
// it to another sampler that takes it (views of the ring agree again by
// now): that sampler decides it, with the fragments it may hold. A sampler
// decides only traces it owns, so a late fragment finds the decision where
// the gateways send it.
func (p *budgetTailSampler) decideOrPassOn(sh *shard, t *trace, now time.Time, out *keptSet) {
	if p.handoff != nil && p.handoff.passOn(sh, t, true) {
		return
	}
	p.decide(sh, t, now, reasonBaseline, out)
}

// expired: the trace's wait is over, counted from when its first span, or
// its root, arrived at whichever sampler first held it.
func (p *budgetTailSampler) expired(t *trace, now time.Time) bool {
	return p.since(now, t.arrived) >= p.cfg.DecisionWait ||
		(t.hasRoot && p.since(now, t.rootArrived) >= p.cfg.DecisionWaitAfterRoot)
}

// decide runs the policy on t, removes it from the buffer and records the
// decision. cause is reasonBaseline for a normal decision, or the reason an
// early one was forced. Called with sh.mu held; t is released.
//
// Classes in order: drop rules, errors, keep rules, latency outliers, then
// sample rules and the baseline. Each class's probability is conditional on
// what arrived: a trace that came head-sampled at T_in is kept at
// T_out = P2T(p · T2P(T_in)) (OTEP 235).
func (p *budgetTailSampler) decide(sh *shard, t *trace, now time.Time, cause reason, out *keptSet) {
	sh.remove(t)
	defer p.tel.DecisionLatency.Record(context.Background(), p.since(now, t.arrived).Seconds())
	defer sh.release(t)
	ruleIdx := p.rules.first(t)
	var matched *rule
	if ruleIdx >= 0 {
		matched = p.rules.rules[ruleIdx]
		if matched.action == actionDrop {
			p.dropByRule(sh, t, ruleIdx, cause, now)
			return
		}
	}
	pol := p.policy.Load()
	names := &sh.held(t).traceNames
	// Every trace teaches its group's durations, errors included.
	outlier := p.groups.observe(names.group, t.dur, tieBreak(t.id), now)
	d := decided{service: pol.bookedService(names.service), class: reasonBaseline, rule: -1, at: now.UnixNano(),
		recent: t.lastFingerprints()}
	prob := pol.baseline(names.service)
	reasonText := reasonNames[reasonBaseline]
	switch {
	case t.hasError:
		d.class, prob, reasonText = reasonError, pol.errorProbability(names.service), reasonNames[reasonError]
	case matched != nil && matched.action == actionKeep:
		d.class, d.rule, prob, reasonText = reasonRule, int16(ruleIdx), higher(pol.keep(ruleIdx), pol.baseline(names.service)), matched.reason
	case outlier:
		d.class, prob, reasonText = reasonOutlier, pol.outlierProbability(names.service), reasonNames[reasonOutlier]
	case matched != nil && matched.weighted:
		// Booked as its own entry of the fair baseline, with its weight.
		d.service, d.rule, prob, reasonText = matched.key, int16(ruleIdx), pol.baseline(matched.key), matched.reason
	case matched != nil:
		d.class, d.rule, prob, reasonText = reasonRule, int16(ruleIdx), matched.prob, matched.reason
	}
	th := otep235Downstream(t.inThreshold(), prob.p)
	keep := th.ShouldSample(t.randomness(t.id))
	switch {
	case keep:
	case d.class == reasonError:
		sh.counters.overflow[classError]++
	case d.class == reasonOutlier:
		sh.counters.overflow[classOutlier]++
	case d.class == reasonRule && matched.action == actionKeep:
		sh.counters.overflow[classRule]++
	}
	sh.volumes.book(d, p.unit.volume(t.spans, t.bytes+t.stampBytes), keep, p.cfg.MaxServices)
	r := d.class
	if d.rule >= 0 {
		r = reasonRule
		rc := &sh.counters.rules[d.rule]
		rc.matched++
		if keep {
			rc.kept++
		} else {
			rc.dropped++
		}
	}
	if cause != reasonBaseline {
		r = cause
	}
	dec := notSampled
	if keep {
		dec = sampled
		d.th = th
		sh.record(t.id, sampled, d, known{ref: t.self}, true)
		if cause != reasonBaseline {
			reasonText = reasonNames[cause]
		}
		out.add(sh.held(t).chunks, th, reasonText, t.bytes+t.stampBytes)
	} else {
		sh.record(t.id, notSampled, d, known{ref: t.self}, true)
	}
	sh.counters.count(dec, r, t.spans, t.bytes)
}

// dropByRule drops a trace a drop rule matched: not kept whatever the
// budget, not booked in it, not learned as an outlier; its late spans are
// dropped too, errors included.
func (p *budgetTailSampler) dropByRule(sh *shard, t *trace, ruleIdx int, cause reason, now time.Time) {
	sh.record(t.id, notSampled, decided{class: reasonRule, rule: int16(ruleIdx), at: now.UnixNano(),
		recent: t.lastFingerprints()}, known{ref: t.self}, true)
	rc := &sh.counters.rules[ruleIdx]
	rc.matched++
	rc.dropped++
	r := reasonRule
	if cause != reasonBaseline {
		r = cause
	}
	sh.counters.count(notSampled, r, t.spans, t.bytes)
}

// enforceBounds decides the oldest traces of the whole processor, whichever
// shard holds them, while max_traces or max_buffered_bytes is exceeded.
// Called without any shard lock.
func (p *budgetTailSampler) enforceBounds(now time.Time, out *keptSet) {
	for p.buffered.traces.Load() > int64(p.cfg.MaxTraces) || p.buffered.bytes.Load() > p.cfg.MaxBufferedBytes {
		sh := p.oldestShard()
		if sh == nil {
			return
		}
		sh.mu.Lock()
		if t := sh.oldest(); t != nil {
			p.decide(sh, t, now, reasonForced, out)
		}
		sh.flush() // the loop reads the totals
		sh.mu.Unlock()
	}
}

// oldestShard is the shard whose head arrived first. It walks every shard:
// only memory pressure brings it here.
func (p *budgetTailSampler) oldestShard() *shard {
	var oldest *shard
	var at instant
	for _, sh := range p.shards {
		sh.mu.Lock()
		if h := sh.oldest(); h != nil && (oldest == nil || h.arrived < at) {
			oldest, at = sh, h.arrived
		}
		sh.mu.Unlock()
	}
	return oldest
}
