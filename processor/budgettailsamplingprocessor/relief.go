package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/recall"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Stress relief (internal/relief) decides a new trace's spans as they
// arrive: kept when the trace's randomness passes relief's threshold, so
// every fragment of the trace, on any sampler, gets the same answer; kept
// whatever the threshold when they carry an error. The decision is
// remembered like a tail decision, so the trace's later fragments follow
// it (and a later error flips it to kept) after relief has ended too.
// Fragments of traces already buffered join them and are decided whole by
// the tail, so the tail never keeps half a trace. The fragments relief
// drops are held a while (stress_relief.recall): when an error arrives
// later in the trace, it recalls them, and the error trace leaves whole.

// decideAtArrival decides f at arrival if its trace is new to the shard;
// it reports false, doing nothing, when the trace is buffered or decided
// (the caller's path handles those). scratch is reused for the encoding of
// a kept fragment, which out copies.
func (p *budgetTailSampler) decideAtArrival(req *split.Request, f *split.Fragment, sh *shard, now time.Time, scratch *[]byte, out *forward.Kept) bool {
	pol := p.adj.Policy()
	pr := p.relief.Probability()
	d := traceinfo.Decided{Service: pol.BookedKey(f.Key), Class: traceinfo.ReasonBaseline, Rule: -1,
		At: now.UnixNano(), Recent: [2]uint64{f.FP}}
	reason := traceinfo.ReasonRelief
	dropped := false
	// Rules match spans, so a fragment's matches are known now; one that
	// matches only a later fragment of the trace is too late for it.
	rs := p.adj.Rules()
	if i := rs.First(&f.Summary); i >= 0 {
		r := rs.Rule(i)
		d.Rule, reason = int16(i), traceinfo.ReasonRule
		switch {
		case r.Action == rules.ActionDrop:
			d.Class, dropped = traceinfo.ReasonRule, true
		case f.HasError:
			d.Rule, d.Class, reason, pr = -1, traceinfo.ReasonError, traceinfo.ReasonError, traceinfo.Always
		case r.Action == rules.ActionKeep:
			d.Class, pr = traceinfo.ReasonRule, traceinfo.Higher(pol.Keep(i), pr)
		case r.Weighted:
			// Booked as its own baseline entry, at relief's threshold.
			d.Service = r.Key
		default:
			d.Class, pr = traceinfo.ReasonRule, r.Prob
		}
	} else if f.HasError {
		d.Class, reason, pr = traceinfo.ReasonError, traceinfo.ReasonError, traceinfo.Always
	}
	th := traceinfo.Downstream(f.InThreshold(), pr.P)
	keep := !dropped && th.ShouldSample(f.Randomness(f.ID))
	var held []byte
	switch {
	case keep || p.cfg.DryRun:
		// Outside the lock; wasted only if the trace turns out known.
		*scratch = req.AppendEncoding((*scratch)[:0], f)
	case !dropped && sh.recall != nil && !p.recallPaused.Load():
		// Held for a later error of the trace to recall (a copy: the
		// request's encoding goes when the call returns).
		held = req.AppendEncoding(make([]byte, 0, f.Bytes), f)
	}
	vol := p.unit.Volume(f.Spans, f.Bytes+f.StampBytes)

	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, known := sh.Lookup(f.ID); known {
		return false
	}
	sh.fragments++
	if p.red != nil {
		w := red.Weigh(f.Spans, f.InThreshold(), keep, th)
		if dropped {
			w = red.Weights{} // out of the sample by design
		}
		p.red.Trace(f.Key, f.Spans, f.HasError, f.Dur, w)
	}
	p.countArrival(sh, f, vol, true)
	sh.arrivals.NewTraces++
	if p.adj.Priming() {
		sh.intake += vol
	}
	dec := traceinfo.NotSampled
	if keep {
		dec = traceinfo.Sampled
		d.Th = th
		out.AddLate(*scratch, th, traceinfo.ReasonNames[reason], f.Bytes+f.StampBytes)
	} else if p.cfg.DryRun {
		out.AddLateNotKept(*scratch, traceinfo.ReasonNames[reason])
	}
	sh.Record(f.ID, dec, d, tracebuf.Known{}, false)
	if held != nil {
		sh.recall.Hold(f.ID, recall.Fragment{Encoded: held, Spans: f.Spans, Bytes: f.Bytes + f.StampBytes}, now.UnixNano())
	}
	if !dropped {
		// Booked like a tail decision, so the policy keeps learning the
		// traffic; a drop rule's traces stay outside the budget.
		sh.volumes.Book(d, vol, keep, p.maxKeys)
	}
	if d.Rule >= 0 {
		sh.counters.Rules[d.Rule].Decided(keep)
	}
	sh.counters.Count(dec, reason, f.Spans, f.Bytes)
	sh.counters.Relief[dec] += int64(f.Spans)
	return true
}

// countArrival measures what arrives, for relief's threshold and arrival
// level; buffered: the fragment starts or joins a buffered trace (or would
// have, but for relief). Called with sh.mu held.
func (p *budgetTailSampler) countArrival(sh *shard, f *split.Fragment, vol float64, buffered bool) {
	a := &sh.arrivals
	a.Volume += vol
	if f.HasError {
		a.ErrorVolume += vol
	}
	if buffered {
		a.NewBytes += f.Bytes
	}
}

// pauseRecallOnMemory lets go what relief holds for recall, and holds no
// more, while the heap is past relief's activation level: the hold is heap,
// and memory_limiter refuses past it (in TestE2EOverloadStressRelief, 40
// MiB, relief starting at 36, a hold of up to 5 MiB refused 30k spans in
// one run of nine).
func (p *budgetTailSampler) pauseRecallOnMemory() {
	if p.shards[0].recall == nil {
		return
	}
	high := p.relief.Levels()[relief.SignalMemory]*100 >= p.relief.ActivationLevel()
	if p.recallPaused.Swap(high) || !high {
		return
	}
	for _, sh := range p.shards {
		sh.mu.Lock()
		sh.recall.Clear()
		sh.mu.Unlock()
	}
}

// shedInterval is the least time between two sheds: a GC must mark the
// heap again before the memory level shows what the last one freed.
const shedInterval = 500 * time.Millisecond

// shedOnMemory decides the oldest buffered traces early while the heap is
// past relief's activation level. Relief alone stops new traces from being
// buffered, but the buffer is most of the heap, and it goes on growing with
// the fragments of traces already in it until they expire (decision_wait):
// in TestE2EOverloadStressRelief the heap passed memory_limiter's soft
// limit seconds after relief started, with the buffer a few percent of
// max_buffered_bytes. The buffer is cut by the heap over
// deactivation_level, as a full buffer is (reason forced): a decided
// trace's late fragments follow its decision, so it is not split.
func (p *budgetTailSampler) shedOnMemory() {
	level := p.relief.Levels()[relief.SignalMemory] * 100
	now := p.now()
	if !p.relief.Active() || level < p.relief.ActivationLevel() || now.Sub(p.lastShed) < shedInterval {
		return
	}
	p.lastShed = now
	// The heap over deactivation_level, taken out of the buffer: the
	// buffer is most of the heap, but not all of it (a cut in proportion
	// to the buffer alone was too small to stop memory_limiter).
	excess := (level - p.relief.DeactivationLevel()) / 100 * p.relief.MemoryBound()
	target := p.totals.Bytes() - int64(excess)
	var out forward.Kept
	p.decideOldestWhile(now, func() bool { return p.totals.Bytes() > target }, &out,
		func(sh *shard, t *tracebuf.Trace) { sh.counters.Shed += int64(t.Spans) })
	p.forward(context.Background(), &out)
}

// reliefLevelInterval is how often relief reads the load levels: a
// fraction of memory_limiter's check interval (1 s in the shipped configs),
// so that relief starts first.
const reliefLevelInterval = 100 * time.Millisecond

// reliefMeasureInterval is how often relief measures the arrivals.
const reliefMeasureInterval = time.Second

// updateRelief reads the buffer's fill and switches relief on or off.
func (p *budgetTailSampler) updateRelief() {
	traces := float64(p.totals.Traces()) / float64(p.cfg.MaxTraces)
	bytes := float64(p.totals.Bytes()) / float64(p.cfg.MaxBufferedBytes)
	switched := p.relief.Update(p.now(), traces, bytes)
	p.pauseRecallOnMemory()
	p.shedOnMemory()
	if !switched {
		return
	}
	lv := p.relief.Levels()
	fields := []zap.Field{zap.Float64("buffer_traces", lv[relief.SignalBufferTraces]), zap.Float64("buffer_bytes", lv[relief.SignalBufferBytes]),
		zap.Float64("arrival_rate", lv[relief.SignalArrivalRate]), zap.Float64("memory", lv[relief.SignalMemory])}
	if p.relief.Active() {
		p.logger.Warn("stress relief on: new traces are decided at arrival", append(fields,
			zap.String("reason", relief.ReasonNames[p.relief.Reason()]), zap.Float64("probability", p.relief.Probability().P))...)
	} else {
		p.logger.Info("stress relief off: traces are buffered and decided whole again", fields...)
	}
}

// measureRelief hands relief the arrivals since the last call, and this
// instance's budget share in what the decisions book (egress is smaller:
// fragments leave merged).
func (p *budgetTailSampler) measureRelief() {
	now := p.now()
	secs := now.Sub(p.reliefMeasured).Seconds()
	p.reliefMeasured = now
	var a relief.Arrivals
	for _, sh := range p.shards {
		sh.mu.Lock()
		s := sh.arrivals
		sh.arrivals = relief.Arrivals{}
		if sh.recall != nil {
			sh.recall.Expire(now.UnixNano())
		}
		sh.mu.Unlock()
		a.Volume += s.Volume
		a.ErrorVolume += s.ErrorVolume
		a.NewTraces += s.NewTraces
		a.NewBytes += s.NewBytes
		a.Decided += s.Decided
		a.Resident += s.Resident
	}
	p.relief.Measure(a, secs, p.adj.Share()/p.adj.Egress().Current())
}
