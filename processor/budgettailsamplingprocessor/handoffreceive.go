package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The receiving side of handoff: what peers send is merged into this
// sampler's buffer, and decisions made elsewhere are adopted.

// receive merges what a peer handed over (or what this sampler could not
// send) into the buffer: traces keep the arrival times they had there,
// fragments and decisions follow the trace's decision when it has one.
// from is the sending peer's ring endpoint, "" for what this sampler's own
// sends gave back.
func (h *handoff) receive(ctx context.Context, td ptrace.Traces, from string) {
	p := h.p
	now := p.now()
	records, malformed := takeRecords(td)
	if malformed > 0 {
		h.stats.failedSpans[failureMalformed].Add(int64(malformed))
	}
	if from != "" {
		h.countReceived(records, td)
	}
	req, err := p.split(td)
	if err != nil {
		h.stats.failedSpans[failureMalformed].Add(int64(td.SpanCount()))
		return
	}
	defer req.release()
	var out keptSet
	var encoded, scratch []byte
	sl := p.newSlab(req)
	for i := range req.frags {
		f := &req.frags[i]
		id := f.id
		rec := records[id]
		a := arrival{at: now.Add(-rec.age), rootAt: now, handed: rec.kind == recordTrace, hops: rec.hops}
		if rec.hasRoot {
			a.rootAt = now.Add(-rec.rootAge)
		}
		sh := p.shardOf(id)
		in := p.encode(req, f, sl, &encoded)
		chunk := heldChunk{data: p.codec.store(f.encoded, &scratch), slab: in}
		sh.mu.Lock()
		p.ingest(sh, id, f, chunk, a, &out)
		sh.mu.Unlock()
	}
	p.buffered.letGo(sl)
	for id, rec := range records {
		if rec.kind != recordDecision {
			continue
		}
		sh := p.shardOf(id)
		sh.mu.Lock()
		h.adoptDecision(sh, id, rec, now, from, &out)
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
func (h *handoff) adoptDecision(sh *shard, id pcommon.TraceID, rec handoffRecord, now time.Time, from string, out *keptSet) {
	p := h.p
	d := rec.decision
	d.at = now.Add(-rec.age).UnixNano()
	which := notSampled
	if rec.sampled {
		which = sampled
	}
	k, ok := sh.lookup(id)
	if t := sh.traceOf(k); t != nil {
		d.recent = t.lastFingerprints()
		chunks := sh.held(t).chunks
		if from != "" && h.send(from, handoffItem{kind: recordFragment, id: id, chunks: p.encodedChunks(chunks), arrived: p.timeAt(t.arrived), spans: t.spans}) {
			sh.remove(t)
		} else {
			sh.remove(t)
			dec := notSampled
			if rec.sampled {
				dec = sampled
				out.add(chunks, d.th, "", t.bytes+t.stampBytes)
			}
			sh.counters.countLate(dec, reasonLateSpan, t.spans, t.bytes)
			sh.volumes.book(d, p.unit.volume(t.spans, t.bytes+t.stampBytes), rec.sampled, p.cfg.MaxServices)
		}
		sh.release(t)
	}
	sh.record(id, which, d, k, ok)
}

func (h *handoff) countReceived(records map[pcommon.TraceID]handoffRecord, td ptrace.Traces) {
	for _, rec := range records {
		h.stats.received.count(rec.kind, 0)
	}
	h.stats.received.spans.Add(int64(td.SpanCount()))
}
