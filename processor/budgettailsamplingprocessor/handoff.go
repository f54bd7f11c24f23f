package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"bytes"
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// The sampler's side of handoff (internal/handoff owns the ring, the peers
// and the server): which buffered traces and decisions move on a ring
// change, fragments passed on to their owner, and what peers send merged
// into the buffer.

// handoffGlue is the sampler as handoff.Sampler sees it.
type handoffGlue budgetTailSampler

func (g *handoffGlue) Rebalance() { (*budgetTailSampler)(g).rebalance() }

func (g *handoffGlue) Receive(ctx context.Context, td ptrace.Traces, from string) {
	(*budgetTailSampler)(g).receive(ctx, td, from)
}

// rebalance sends every buffered trace this sampler does not own to its
// owner, and the decisions of the last window whose traces moved. A trace
// whose owner cannot take it now stays; it is offered again when its wait
// is over (decideOrPassOn).
//
// Nothing else moves traces between samplers: a sampler holding a trace it
// does not own, because a peer with another view of the ring sent it, keeps
// it until its own view changes or the trace's wait is over — sending it
// back at once would bounce it while the views differ.
func (p *budgetTailSampler) rebalance() {
	h := p.handoff
	cutoff := p.now().Add(-h.Window()).UnixNano()
	rs := p.adj.Rules()
	for _, sh := range p.shards {
		sh.mu.Lock()
		sh.Each(func(t *tracebuf.Trace) { p.passOn(sh, t, false) })
		for _, which := range []traceinfo.Decision{traceinfo.Sampled, traceinfo.NotSampled} {
			sh.RecentDecisions(which, func(id pcommon.TraceID, d traceinfo.Decided) bool {
				if d.At < cutoff {
					return false
				}
				if owner, mine := h.OwnerOf(id); !mine {
					d.Rule = rs.Portable(d.Rule)
					h.Send(owner, handoff.Item{Kind: handoff.KindDecision, ID: id, Decision: d, Sampled: which == traceinfo.Sampled})
				}
				return true
			})
		}
		sh.mu.Unlock()
	}
}

// passOn sends a buffered trace to its owner when that is another sampler
// and takes it out of the buffer; false: it stays here. expired: its wait
// is over, and this is a hop. Called with sh.mu held.
func (p *budgetTailSampler) passOn(sh *shard, t *tracebuf.Trace, expired bool) bool {
	owner, mine := p.handoff.OwnerOf(t.ID)
	if mine || (expired && t.Hops >= handoff.MaxHops) {
		return false
	}
	it := handoff.Item{Kind: handoff.KindTrace, ID: t.ID, Chunks: p.fwd.EncodedChunks(sh.Held(t).Chunks()),
		Arrived: p.timeAt(t.Arrived), Spans: t.Spans, Hops: t.Hops}
	if expired {
		it.Hops++
	}
	if t.HasRoot {
		it.RootArrived = p.timeAt(t.RootArrived)
	}
	h := p.hand(t.ID, p.timeAt(t.Arrived), false, &it)
	if !p.handoff.Send(owner, it) {
		h.Cancel()
		return false
	}
	sh.Remove(t)
	sh.Forget(t.ID)
	sh.Release(t)
	return true
}

// owns reports whether the ring gives the trace to this sampler (always
// without handoff).
func (p *budgetTailSampler) owns(id pcommon.TraceID) bool {
	if p.handoff == nil {
		return true
	}
	_, mine := p.handoff.OwnerOf(id)
	return mine
}

// proxy sends a fragment of a trace this sampler does not own, and has not
// decided, to its owner; false: it stays here. With the durable log, the
// fragment (arrived at now; on replay, when it first arrived) holds its
// segment until the peer has taken it, and is replayed after a crash
// meanwhile: a new one is written as handed (logged) before the request is
// acknowledged, a replayed one is in its old segment already.
func (p *budgetTailSampler) proxy(sh *shard, f *split.Fragment, now time.Time, logged *requestLog) bool {
	owner, mine := p.handoff.OwnerOf(f.ID)
	if mine {
		return false
	}
	sh.mu.Lock()
	k, ok := sh.Lookup(f.ID)
	sh.mu.Unlock()
	if ok && k.Decided() { // decided here: its late spans follow the decision here
		return false
	}
	it := handoff.Item{Kind: handoff.KindFragment, ID: f.ID, Chunks: [][]byte{bytes.Clone(f.Encoded)}, Arrived: now, Spans: f.Spans}
	h := p.hand(f.ID, now, true, &it)
	if !p.handoff.Send(owner, it) {
		h.Cancel()
		return false
	}
	logged.handed(f, now)
	p.handoff.CountProxied(f.Spans)
	return true
}

// receive merges what a peer handed over (or what this sampler could not
// send) into the buffer: traces keep the arrival times they had there,
// fragments and decisions follow the trace's decision when it has one.
// from is the sending peer's ring endpoint, "" for what this sampler's own
// sends gave back.
func (p *budgetTailSampler) receive(ctx context.Context, td ptrace.Traces, from string) {
	h := p.handoff
	now := p.now()
	records, malformed := handoff.TakeRecords(td)
	if malformed > 0 {
		h.CountMalformed(malformed)
	}
	if from != "" {
		h.CountReceived(records, td)
	}
	req, err := p.splitRequest(td)
	if err != nil {
		h.CountMalformed(td.SpanCount())
		return
	}
	defer req.Release()
	var out forward.Kept
	var encoded, scratch []byte
	logged := p.newRequestLog()
	sl := p.newSlab(req)
	for i := range req.Frags {
		f := &req.Frags[i]
		rec := records[f.ID]
		a := arrival{at: now.Add(-rec.Age), rootAt: now, handed: rec.Kind == handoff.KindTrace, hops: rec.Hops}
		if rec.HasRoot {
			a.rootAt = now.Add(-rec.RootAge)
		}
		sh := p.shardOf(f.ID)
		in := p.encode(req, f, sl, &encoded)
		chunk := spanmem.Chunk{Data: p.codec.Store(f.Encoded, &scratch), Slab: in}
		sh.mu.Lock()
		buffered := p.ingest(sh, f, chunk, a, &out)
		sh.mu.Unlock()
		if buffered {
			// Logged with the arrival it came with, no later than the
			// trace's: the segment is kept while the trace is buffered.
			logged.add(f, a.at)
		}
	}
	// Nothing is handed on from here: a failed write decides at once.
	_ = logged.commit(now, &out)
	p.totals.LetGo(sl)
	for id, rec := range records {
		if rec.Kind != handoff.KindDecision {
			continue
		}
		sh := p.shardOf(id)
		sh.mu.Lock()
		p.adoptDecision(sh, id, rec, now, from, &out)
		sh.mu.Unlock()
	}
	p.enforceBounds(now, &out)
	p.forward(ctx, &out)
}

// adoptDecision records a decision made by the trace's previous owner
// (from). What this sampler already holds of the trace goes back to it, so
// that the whole trace leaves through the sampler that decided it; if that
// fails, it follows the decision here, as late spans do. Called with sh.mu
// held.
func (p *budgetTailSampler) adoptDecision(sh *shard, id pcommon.TraceID, rec handoff.Record, now time.Time, from string, out *forward.Kept) {
	d := rec.Decision
	d.At = now.Add(-rec.Age).UnixNano()
	which := traceinfo.NotSampled
	if rec.Sampled {
		which = traceinfo.Sampled
	}
	k, ok := sh.Lookup(id)
	if t := sh.TraceOf(k); t != nil {
		d.Recent = t.LastFingerprints()
		chunks := sh.Held(t).Chunks()
		it := handoff.Item{Kind: handoff.KindFragment, ID: id, Chunks: p.fwd.EncodedChunks(chunks), Arrived: p.timeAt(t.Arrived), Spans: t.Spans}
		h := p.hand(t.ID, p.timeAt(t.Arrived), false, &it)
		if from != "" && p.handoff.Send(from, it) {
			sh.Remove(t)
		} else {
			h.Cancel()
			sh.Remove(t)
			dec := traceinfo.NotSampled
			if rec.Sampled {
				dec = traceinfo.Sampled
				out.Add(chunks, d.Th, "", t.Bytes+t.StampBytes)
			}
			sh.counters.CountLate(dec, traceinfo.ReasonLateSpan, t.Spans, t.Bytes)
			sh.volumes.Book(d, p.unit.Volume(t.Spans, t.Bytes+t.StampBytes), rec.Sampled, p.maxKeys)
			if p.red != nil {
				// They follow the decision here, as late spans.
				p.red.Spans(d.Service, t.Spans, red.Weigh(t.Spans, t.InThreshold(), rec.Sampled, d.Th))
			}
		}
		sh.Release(t)
	}
	sh.Record(id, which, d, k, ok)
}
