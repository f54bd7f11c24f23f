package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/recall"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// ConsumeTraces splits the request into per-trace fragments and buffers
// them; late spans of decided traces follow their decision at once. With
// durable on, what it buffered is in the log when it returns.
func (p *budgetTailSampler) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return p.consume(ctx, td, time.Time{})
}

// consume is ConsumeTraces; replayedAt, when set, is when td (read back
// from the log) arrived before a restart: it arrives then, and is not
// written again.
func (p *budgetTailSampler) consume(ctx context.Context, td ptrace.Traces, replayedAt time.Time) error {
	if p.wal != nil && replayedAt.IsZero() && p.wal.log.Failing() {
		// Acknowledged, it would be only in memory; maintainWAL probes the
		// log until it can be written again.
		return p.wal.log.Refuse(nil)
	}
	req, err := p.splitRequest(td)
	if err != nil {
		return err
	}
	defer req.Release()
	now := p.now()
	arrived := arrivedNow(now)
	if !replayedAt.IsZero() {
		arrived = arrivedNow(replayedAt)
	}
	var logged *requestLog
	if replayedAt.IsZero() {
		logged = p.newRequestLog()
	}
	var out forward.Kept
	var encoded, scratch []byte
	// While relief is on, most fragments are decided at arrival and never
	// buffered: no slab is cut for them.
	relieving := p.relief.Active()
	var sl *spanmem.Slab
	if !relieving {
		sl = p.newSlab(req)
	}
	for i := range req.Frags {
		f := &req.Frags[i]
		sh := p.shardOf(f.ID)
		// With handoff, a trace another sampler owns goes there first: it
		// may hold the trace buffered.
		if relieving && p.owns(f.ID) && p.decideAtArrival(req, f, sh, now, &encoded, &out) {
			continue
		}
		in := p.encode(req, f, sl, &encoded)
		if p.handoff != nil && p.proxy(sh, f, arrived.at, logged) {
			continue
		}
		// Compressing is most of a fragment's cost then: before the lock.
		chunk := spanmem.Chunk{Data: p.codec.Store(f.Encoded, &scratch), Slab: in}
		sh.mu.Lock()
		buffered := p.ingest(sh, f, chunk, arrived, &out)
		sh.mu.Unlock()
		if buffered {
			logged.add(f, now)
		}
		p.enforceBounds(now, &out)
	}
	err = logged.commit(now, &out)
	p.totals.LetGo(sl)
	p.forward(ctx, &out)
	return err
}

// splitRequest splits td and counts its invalid spans and rule errors (rare: on
// the first shard). A request pdata encoded in a layout the wire index
// does not expect is a bug: refused whole (the client sees it) and logged.
func (p *budgetTailSampler) splitRequest(td ptrace.Traces) (*split.Request, error) {
	req, err := p.splitter.Split(td)
	if err != nil {
		p.logger.Error("cannot index a request's encoding", zap.Int("spans", td.SpanCount()), zap.Error(err))
		return nil, err
	}
	if req.Invalid != [traceinfo.NumInvalidCauses]int64{} || req.RuleErrors != nil {
		sh := p.shards[0]
		sh.mu.Lock()
		for c, n := range req.Invalid {
			sh.counters.Invalid[c] += n
		}
		for i, n := range req.RuleErrors {
			sh.counters.Rules[i].Errors += n
		}
		sh.mu.Unlock()
	}
	return req, nil
}

// newSlab allocates the slab of req's root-carrying fragments (see
// spanmem.Slab); nil with compression, where each chunk is a compressed
// copy of its own, or when no fragment carries a root. The caller lets the
// request's hold go once it is taken in.
func (p *budgetTailSampler) newSlab(req *split.Request) *spanmem.Slab {
	if p.codec.Compresses() {
		return nil
	}
	var n int64
	for i := range req.Frags {
		if req.Frags[i].InSlab() {
			n += req.Frags[i].Bytes
		}
	}
	return p.totals.NewSlab(n)
}

// encode sets f.Encoded, copied out of the request's encoding: into its
// part of the request's slab, into a buffer of its own, or with compression
// (the chunk is then a copy) into reuse, the caller's buffer; it returns
// the slab f.Encoded lies in, if any. Whoever keeps f.Encoded past the next
// fragment clones it.
func (p *budgetTailSampler) encode(req *split.Request, f *split.Fragment, sl *spanmem.Slab, reuse *[]byte) *spanmem.Slab {
	switch {
	case p.codec.Compresses():
		*reuse = req.AppendEncoding((*reuse)[:0], f)
		f.Encoded = *reuse
		return nil
	case sl != nil && f.InSlab():
		f.Encoded = req.AppendEncoding(sl.Carve(f.Bytes), f)
		return sl
	}
	f.Encoded = req.AppendEncoding(make([]byte, 0, f.Bytes), f)
	return nil
}

// arrival is when a fragment's trace, and its root, first arrived: now for
// what a gateway sends, earlier for what a peer hands over.
type arrival struct {
	at, rootAt time.Time
	// handed: from a peer, which counted the volume as intake already.
	handed bool
	hops   uint8
}

func arrivedNow(now time.Time) arrival { return arrival{at: now, rootAt: now} }

// ingest buffers one fragment (chunk is its encoding), or lets it follow
// its trace's decision; it reports whether the fragment is in the buffer
// (or left it with its trace, decided at once). Called with sh.mu held.
func (p *budgetTailSampler) ingest(sh *shard, f *split.Fragment, chunk spanmem.Chunk, a arrival, out *forward.Kept) (buffered bool) {
	priming := p.adj.Priming() && !a.handed
	sh.fragments++
	k, ok := sh.Lookup(f.ID)
	if !a.handed {
		p.countArrival(sh, f, p.unit.Volume(f.Spans, f.Bytes+f.StampBytes), !ok || !k.Decided())
		if !ok {
			sh.arrivals.NewTraces++
		}
	}
	if ok && k.Decided() {
		d := sh.DecisionOf(k)
		if d.Seen(f.FP) {
			sh.counters.Invalid[traceinfo.InvalidDuplicate] += int64(f.Spans)
			return false
		}
		// An error that arrives after the decision makes the trace an error
		// trace: what follows is booked as one, and RED counts the request
		// as an error, once.
		lateError := f.HasError && d.Class != traceinfo.ReasonError
		if p.red != nil {
			// Weighed as made here, as kept where it is forwarded.
			var w red.Weights
			if !p.adj.Rules().Drops(d.Rule) {
				w.Made = float64(f.Spans) * f.InThreshold().AdjustedCount()
			}
			p.red.Spans(d.Service, f.Spans, w)
			if lateError {
				p.red.Error(d.Service)
			}
		}
		if lateError {
			d.Class = traceinfo.ReasonError
		}
		if k.Which() == traceinfo.Sampled {
			p.followSampled(sh, f, *d, p.lateSize(sh, f, priming), out)
		} else {
			p.followNotSampled(sh, f, k, p.lateSize(sh, f, priming), out)
		}
		return false
	}
	t := sh.TraceOf(k)
	if t != nil && !a.handed && t.Seen(f.FP) {
		sh.counters.Invalid[traceinfo.InvalidDuplicate] += int64(f.Spans)
		return false
	}
	switch {
	case t == nil:
		t = sh.Add(f.ID, p.instant(a.at), a.handed)
		t.Seen(f.FP)
	case a.handed:
		sh.ArrivedEarlier(t, p.instant(a.at))
	}
	t.Hops = max(t.Hops, a.hops)
	held := sh.Held(t)
	held.AddChunk(chunk)
	sh.Grow(t, f.Spans, f.Bytes, chunk.Stored())
	if priming {
		sh.intake += p.unit.Volume(f.Spans, f.Bytes+f.StampBytes)
	}
	rootArrived, takeNames := t.Merge(&f.Summary)
	if takeNames {
		held.Names = f.Names
	}
	if rootArrived {
		t.RootArrived = p.instant(a.rootAt)
		sh.AddRoot(t)
	}
	if t.Spans >= p.cfg.MaxSpansPerTrace {
		p.decide(sh, t, p.now(), traceinfo.ReasonSpanLimit, out)
	}
	return true
}

// size is a late fragment's OTLP bytes and its volume in budget units.
type size struct {
	bytes int64
	vol   float64
}

// lateSize sizes a late fragment, and counts it as intake while priming.
func (p *budgetTailSampler) lateSize(sh *shard, f *split.Fragment, priming bool) size {
	z := size{bytes: f.Bytes, vol: p.unit.Volume(f.Spans, f.Bytes+f.StampBytes)}
	if priming {
		sh.intake += z.vol
	}
	return z
}

// followSampled forwards a late fragment of a kept trace with its threshold;
// it counts against the budget like the rest of the trace.
func (p *budgetTailSampler) followSampled(sh *shard, f *split.Fragment, d traceinfo.Decided, z size, out *forward.Kept) {
	sh.counters.CountLate(traceinfo.Sampled, traceinfo.ReasonLateSpan, f.Spans, z.bytes)
	sh.volumes.Book(d, z.vol, true, p.maxKeys)
	out.AddLate(f.Encoded, d.Th, traceinfo.ReasonNames[traceinfo.ReasonLateSpan], f.Bytes+f.StampBytes)
	p.representKept(d.Service, f.Spans, d.Th)
}

// representKept weighs spans kept after their count as made.
func (p *budgetTailSampler) representKept(key string, spans int, th sampling.Threshold) {
	if p.red != nil {
		p.red.Kept(key, float64(spans)*th.AdjustedCount())
	}
}

// followNotSampled drops a late fragment of a trace decided not-sampled,
// unless it carries an error: then it is decided as an error trace on what
// it holds (a partial error trace beats none), and what follows it too.
func (p *budgetTailSampler) followNotSampled(sh *shard, f *split.Fragment, k tracebuf.Known, z size, out *forward.Kept) {
	d := *sh.DecisionOf(k)
	if p.adj.Rules().Drops(d.Rule) {
		// Dropped by a rule: whatever follows, errors included.
		sh.counters.CountLate(traceinfo.NotSampled, traceinfo.ReasonLateSpan, f.Spans, z.bytes)
		p.dryRunNotKept(f, out)
		return
	}
	if f.HasError {
		prob := p.adj.Policy().ErrorProbability(d.Service)
		if p.relief.Active() {
			// Relief keeps every error, in the budget (its threshold makes
			// room for them).
			prob = traceinfo.Always
		}
		th := traceinfo.Downstream(f.InThreshold(), prob.P)
		if th.ShouldSample(f.Randomness(f.ID)) {
			late := traceinfo.Decided{Th: th, Service: d.Service, Class: traceinfo.ReasonError, Rule: -1, At: d.At, Recent: d.Recent}
			sh.Record(f.ID, traceinfo.Sampled, late, k, true)
			sh.counters.CountLate(traceinfo.Sampled, traceinfo.ReasonLateError, f.Spans, z.bytes)
			sh.volumes.Book(late, z.vol, true, p.maxKeys)
			out.AddLate(f.Encoded, th, traceinfo.ReasonNames[traceinfo.ReasonLateError], f.Bytes+f.StampBytes)
			p.representKept(d.Service, f.Spans, th)
			p.recallDropped(sh, f, late, th, out)
			return
		}
		sh.counters.Overflow[traceinfo.ClassError]++
	}
	sh.counters.CountLate(traceinfo.NotSampled, traceinfo.ReasonLateSpan, f.Spans, z.bytes)
	sh.volumes.Book(d, z.vol, false, p.maxKeys)
	p.dryRunNotKept(f, out)
	if sh.recall != nil && p.relief.Active() && !p.recallPaused.Load() {
		// Held too: the trace's error may come later still.
		sh.recall.Hold(f.ID, recall.Fragment{Encoded: append([]byte(nil), f.Encoded...), Spans: f.Spans, Bytes: f.Bytes + f.StampBytes}, p.now().UnixNano())
	}
}

// dryRunNotKept forwards, in a dry run, a fragment that would not be kept.
func (p *budgetTailSampler) dryRunNotKept(f *split.Fragment, out *forward.Kept) {
	if p.cfg.DryRun {
		out.AddLateNotKept(f.Encoded, traceinfo.ReasonNames[traceinfo.ReasonLateSpan])
	}
}

// recallDropped sends on, with the late error's threshold, the fragments
// of f's trace that relief dropped and still holds: the error trace leaves
// whole. They are booked like the rest of the trace; spans_total counted
// them once already (not_sampled, at arrival): they are counted in
// recalled_spans only.
func (p *budgetTailSampler) recallDropped(sh *shard, f *split.Fragment, d traceinfo.Decided, th sampling.Threshold, out *forward.Kept) {
	if sh.recall == nil {
		return
	}
	for _, r := range sh.recall.Recall(f.ID) {
		sh.volumes.Book(d, p.unit.Volume(r.Spans, r.Bytes), true, p.maxKeys)
		sh.counters.Recalled += int64(r.Spans)
		out.AddLate(r.Encoded, th, traceinfo.ReasonNames[traceinfo.ReasonLateError], r.Bytes)
		p.representKept(d.Service, r.Spans, th)
	}
}
