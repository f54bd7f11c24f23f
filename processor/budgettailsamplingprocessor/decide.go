package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"time"
)

// decideExpired decides every trace whose wait is over.
func (p *budgetTailSampler) decideExpired(ctx context.Context) {
	now := p.now()
	for _, sh := range p.shards {
		var out keptSet
		sh.mu.Lock()
		for t := sh.arrivals.head; t != nil && now.Sub(t.arrived) >= p.cfg.DecisionWait; t = sh.arrivals.head {
			p.decide(sh, t, now, reasonBaseline, &out)
		}
		for t := sh.roots.head; t != nil && now.Sub(t.rootArrived) >= p.cfg.DecisionWaitAfterRoot; t = sh.roots.head {
			p.decide(sh, t, now, reasonBaseline, &out)
		}
		sh.mu.Unlock()
		p.forward(ctx, &out)
	}
}

// decide runs the policy on t, removes it from the buffer and records the
// decision. cause is reasonBaseline for a normal decision, or the reason an
// early one was forced. Called with sh.mu held.
//
// Classes in order: errors, then latency outliers, then the baseline. Each
// class's probability is conditional on what arrived: a trace that came
// head-sampled at T_in is kept at T_out = P2T(p · T2P(T_in)) (OTEP 235).
func (p *budgetTailSampler) decide(sh *shard, t *trace, now time.Time, cause reason, out *keptSet) {
	sh.remove(t)
	pol := p.policy.Load()
	// Every trace teaches its group's durations, errors included.
	outlier := p.groups.observe(t.group, t.dur, tieBreak(t.id), now)
	service := pol.bookedService(t.service)
	class, prob := reasonBaseline, pol.baseline(t.service)
	switch {
	case t.hasError:
		class, prob = reasonError, pol.errorProbability(t.service)
	case outlier:
		class, prob = reasonOutlier, pol.outlierProbability(t.service)
	}
	th := otep235Downstream(t.inThreshold(), prob.p)
	keep := th.ShouldSample(t.randomness(t.id))
	if !keep && class != reasonBaseline {
		sh.counters.overflow[class]++
	}
	sh.volumes.book(class, service, p.unit.volume(t.spans, t.bytes+t.stampBytes), keep, p.cfg.MaxServices)
	r := class
	if cause != reasonBaseline {
		r = cause
	}
	d := notSampled
	if keep {
		d = sampled
		sh.sampled.put(t.id, decided{th: th, service: service, class: class})
		out.add(t, th, reasonNames[r])
	} else {
		sh.notSampled.put(t.id, decided{service: service, class: class})
	}
	sh.counters.traces[d][r]++
	sh.counters.spans[d] += int64(t.spans)
	sh.counters.bytes[d] += t.bytes
	p.tel.DecisionLatency.Record(context.Background(), now.Sub(t.arrived).Seconds())
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
		if t := sh.arrivals.head; t != nil {
			p.decide(sh, t, now, reasonForced, out)
		}
		sh.mu.Unlock()
	}
}

// oldestShard is the shard whose head arrived first. It walks every shard:
// only memory pressure brings it here.
func (p *budgetTailSampler) oldestShard() *shard {
	var oldest *shard
	var seq uint64
	for _, sh := range p.shards {
		sh.mu.Lock()
		if h := sh.arrivals.head; h != nil && (oldest == nil || h.seq < seq) {
			oldest, seq = sh, h.seq
		}
		sh.mu.Unlock()
	}
	return oldest
}
