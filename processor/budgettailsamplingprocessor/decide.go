package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/outliers"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
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

// testThresholdOverride, set only by tests, replaces the th written on a
// kept trace after its decision: represented_ratio must catch weights
// written wrong.
var testThresholdOverride func(sampling.Threshold) sampling.Threshold

// decideRun is how many traces a decision pass decides before letting
// intake into the shard.
const decideRun = 64

func (p *budgetTailSampler) decideShards(ctx context.Context, shards []*shard, now time.Time) {
	var out forward.Kept
	for _, sh := range shards {
		sh.mu.Lock()
		decided := 0
		// Intake waits for the shard while it is decided: let it in between
		// runs of decisions (the lists are read from their heads again).
		yield := func() {
			if decided++; decided%decideRun == 0 {
				sh.Flush()
				sh.mu.Unlock()
				sh.mu.Lock()
			}
		}
		for t := sh.FirstArrived(); t != nil && p.since(now, t.Arrived) >= p.cfg.DecisionWait; t = sh.FirstArrived() {
			p.decideOrPassOn(sh, t, now, &out)
			yield()
		}
		for t := sh.FirstRoot(); t != nil && p.since(now, t.RootArrived) >= p.cfg.DecisionWaitAfterRoot; t = sh.FirstRoot() {
			p.decideOrPassOn(sh, t, now, &out)
			yield()
		}
		sh.EachHanded(func(t *tracebuf.Trace) {
			if p.expired(t, now) {
				p.decideOrPassOn(sh, t, now, &out)
			}
		})
		sh.Compact()
		sh.Flush()
		sh.mu.Unlock()
	}
	p.forward(ctx, &out)
}

// decideOrPassOn decides a trace whose wait is over, unless the ring gives
// it to another sampler that takes it (views of the ring agree again by
// now): that sampler decides it, with the fragments it may hold. A sampler
// decides only traces it owns, so a late fragment finds the decision where
// the gateways send it.
func (p *budgetTailSampler) decideOrPassOn(sh *shard, t *tracebuf.Trace, now time.Time, out *forward.Kept) {
	// A trace passed on is not marked in the durable log: the send is
	// queued, and a restart that replays it sends it again rather than
	// lose it.
	if p.handoff != nil && p.passOn(sh, t, true) {
		return
	}
	p.decide(sh, t, now, traceinfo.ReasonBaseline, out)
}

// expired: the trace's wait is over, counted from when its first span, or
// its root, arrived at whichever sampler first held it.
func (p *budgetTailSampler) expired(t *tracebuf.Trace, now time.Time) bool {
	return p.since(now, t.Arrived) >= p.cfg.DecisionWait ||
		(t.HasRoot && p.since(now, t.RootArrived) >= p.cfg.DecisionWaitAfterRoot)
}

// decide runs the policy on t, removes it from the buffer and records the
// decision. cause is ReasonBaseline for a normal decision, or the reason an
// early one was forced. Called with sh.mu held; t is released.
//
// Classes in order: drop rules, errors, keep rules, latency outliers, then
// sample rules and the baseline; with rare on, a key's first trace in the
// interval is kept whatever its class gave it. Each class's probability is
// conditional on what arrived: a trace that came head-sampled at T_in is
// kept at T_out = P2T(p · T2P(T_in)) (OTEP 235).
func (p *budgetTailSampler) decide(sh *shard, t *tracebuf.Trace, now time.Time, cause traceinfo.Reason, out *forward.Kept) {
	sh.Remove(t)
	p.noteLeft(t, out)
	resident := p.since(now, t.Arrived)
	sh.arrivals.Decided++
	sh.arrivals.Resident += resident
	defer p.tel.DecisionLatency.Record(context.Background(), resident.Seconds())
	defer sh.Release(t)
	held := sh.Held(t)
	rs := p.adj.Rules()
	ruleIdx := rs.First(&t.Summary)
	var matched *rules.Rule
	if ruleIdx >= 0 {
		matched = rs.Rule(ruleIdx)
		if matched.Action == rules.ActionDrop {
			if p.red != nil {
				p.red.Trace(held.Key, t.Spans, t.HasError, t.Dur, red.Weights{})
			}
			p.dropByRule(sh, t, ruleIdx, cause, now)
			if p.cfg.DryRun {
				out.AddNotKept(held.Chunks(), matched.Reason)
			}
			return
		}
	}
	pol := p.adj.Policy()
	// Every trace teaches its group's durations, errors included.
	outlier := p.groups.Observe(held.Group, t.Dur, outliers.TieBreak(t.ID), now)
	key := pol.BookedKey(held.Key)
	traits := policy.Traits{Key: held.Key, Booked: key, Error: t.HasError, Outlier: outlier, Rule: ruleIdx, Matched: matched}
	if key == policy.OtherKeys && held.Key != policy.OtherKeys {
		sh.counters.KeyFolds++
	}
	if p.rare != nil {
		// Asked whatever the class: which trace is a key's first in the
		// interval must not depend on its randomness, or th would not weigh
		// the kept ones right (internal/rare).
		due, tracked := p.rare.Due(key, now.UnixNano())
		if !tracked {
			sh.counters.KeyFolds++
		}
		traits.RareDue = due
	}
	c := pol.Classify(traits)
	d := traceinfo.Decided{Service: c.Service, Class: c.Reason, Rule: int16(c.Rule), At: now.UnixNano(), Recent: t.LastFingerprints()}
	prob, reasonText := c.Prob, c.Text
	th := traceinfo.Downstream(t.InThreshold(), prob.P)
	keep := th.ShouldSample(t.Randomness(t.ID))
	if testThresholdOverride != nil {
		th = testThresholdOverride(th)
	}
	if p.red != nil {
		// Every trace, whatever becomes of it: RED reads the whole traffic,
		// and represented_ratio weighs what is kept against it.
		p.red.Trace(held.Key, t.Spans, t.HasError, t.Dur, red.Weigh(t.Spans, t.InThreshold(), keep, th))
	}
	switch {
	case keep:
	case d.Class == traceinfo.ReasonError:
		sh.counters.Overflow[traceinfo.ClassError]++
	case d.Class == traceinfo.ReasonOutlier:
		sh.counters.Overflow[traceinfo.ClassOutlier]++
	case d.Class == traceinfo.ReasonRule && matched.Action == rules.ActionKeep:
		sh.counters.Overflow[traceinfo.ClassRule]++
	}
	vol := p.unit.Volume(t.Spans, t.Bytes+t.StampBytes)
	p.shadow.Decide(sh.index, traits, t.InThreshold(), t.Randomness(t.ID), t.Spans, t.Bytes, vol, now.UnixNano())
	if sh.volumes.Book(d, vol, keep, p.maxKeys) {
		sh.counters.KeyFolds++
	}
	r := d.Class
	if d.Rule >= 0 {
		r = traceinfo.ReasonRule
		sh.counters.Rules[d.Rule].Decided(keep)
	}
	if cause != traceinfo.ReasonBaseline {
		r = cause
	}
	dec := traceinfo.NotSampled
	if keep {
		if p.rare != nil {
			p.rare.Kept(key, now.UnixNano())
		}
		dec = traceinfo.Sampled
		d.Th = th
		sh.Record(t.ID, traceinfo.Sampled, d, t.Entry(), true)
		if cause != traceinfo.ReasonBaseline {
			reasonText = traceinfo.ReasonNames[cause]
		}
		out.Add(held.Chunks(), th, reasonText, t.Bytes+t.StampBytes)
	} else {
		sh.Record(t.ID, traceinfo.NotSampled, d, t.Entry(), true)
		if p.cfg.DryRun {
			out.AddNotKept(held.Chunks(), reasonText)
		}
	}
	sh.counters.Count(dec, r, t.Spans, t.Bytes)
}

// dropByRule drops a trace a drop rule matched: not kept whatever the
// budget, not booked in it, not learned as an outlier; its late spans are
// dropped too, errors included.
func (p *budgetTailSampler) dropByRule(sh *shard, t *tracebuf.Trace, ruleIdx int, cause traceinfo.Reason, now time.Time) {
	sh.Record(t.ID, traceinfo.NotSampled, traceinfo.Decided{Class: traceinfo.ReasonRule, Rule: int16(ruleIdx), At: now.UnixNano(),
		Recent: t.LastFingerprints()}, t.Entry(), true)
	sh.counters.Rules[ruleIdx].Decided(false)
	r := traceinfo.ReasonRule
	if cause != traceinfo.ReasonBaseline {
		r = cause
	}
	sh.counters.Count(traceinfo.NotSampled, r, t.Spans, t.Bytes)
}

// enforceBounds decides the oldest traces of the whole processor, whichever
// shard holds them, while max_traces or max_buffered_bytes is exceeded.
// Called without any shard lock.
func (p *budgetTailSampler) enforceBounds(now time.Time, out *forward.Kept) {
	p.decideOldestWhile(now, func() bool {
		return p.totals.Traces() > int64(p.cfg.MaxTraces) || p.totals.Bytes() > p.cfg.MaxBufferedBytes
	}, out, nil)
}

// decideOldestWhile decides the oldest trace of the whole processor
// (reason forced) while more() holds; each trace and its shard are shown
// to counted first, when set. Called without any shard lock.
func (p *budgetTailSampler) decideOldestWhile(now time.Time, more func() bool, out *forward.Kept, counted func(*shard, *tracebuf.Trace)) {
	for more() {
		sh := p.oldestShard()
		if sh == nil {
			return
		}
		sh.mu.Lock()
		if t := sh.Oldest(); t != nil {
			if counted != nil {
				counted(sh, t)
			}
			p.decide(sh, t, now, traceinfo.ReasonForced, out)
		}
		sh.Flush() // more() reads the totals
		sh.mu.Unlock()
	}
}

// oldestShard is the shard whose head arrived first. It walks every shard:
// only memory pressure brings it here.
func (p *budgetTailSampler) oldestShard() *shard {
	var oldest *shard
	var at tracebuf.Instant
	for _, sh := range p.shards {
		sh.mu.Lock()
		if h := sh.Oldest(); h != nil && (oldest == nil || h.Arrived < at) {
			oldest, at = sh, h.Arrived
		}
		sh.mu.Unlock()
	}
	return oldest
}
