package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
)

// Bytes writing th adds to a span, estimated for the budget: "ot=th:" and a
// threshold of a few hex digits, plus the field's tag and length when the
// span had no tracestate; ";th:…" when it had one.
const (
	stampBytesFresh    = 12
	stampBytesExisting = 8
)

// fragment is the part of one trace that arrived in one request.
type fragment struct {
	summary
	traceNames
	id pcommon.TraceID
	// encoded is the fragment's OTLP encoding (see encode); bytes its size
	// (what the budget counts), whatever the buffer holds of it.
	encoded []byte
	bytes   int64
	// first and last are the fragment's first and last spans in the
	// request's wire index, linked in request order.
	first, last int32
	// namesFrom is the span whose names the fragment takes (see summary).
	namesFrom spanAt
}

// request is a request split into fragments, one per trace; pooled, with
// its wire index, so that splitting allocates little beyond the encodings.
type request struct {
	wire  requestWire
	frags []fragment
	byID  map[pcommon.TraceID]int32
}

// maxPooledTraces is the most traces a pooled request's map keeps room for.
const maxPooledTraces = 4096

var requestPool = sync.Pool{New: func() any { return &request{byID: map[pcommon.TraceID]int32{}} }}

// fragmentOf returns the index of id's fragment, adding it if new.
func (r *request) fragmentOf(id pcommon.TraceID) int32 {
	if i, ok := r.byID[id]; ok {
		return i
	}
	i := int32(len(r.frags))
	r.frags = append(r.frags, fragment{id: id, first: -1, last: -1})
	r.byID[id] = i
	return i
}

// link appends span s of the wire index to f.
func (r *request) link(f *fragment, s int32) {
	if f.last < 0 {
		f.first = s
	} else {
		r.wire.spans[f.last].next = s
	}
	f.last = s
}

// release returns r to the pool; nothing of it may be used afterwards but
// the fragments' encodings, which are the caller's.
func (r *request) release() {
	clear(r.frags)
	r.frags = r.frags[:0]
	if len(r.byID) > maxPooledTraces {
		// Clearing costs the map's capacity: do not make every later
		// request pay for one large one.
		r.byID = make(map[pcommon.TraceID]int32)
	} else {
		clear(r.byID)
	}
	r.wire.buf = nil
	requestPool.Put(r)
}

// splitter carries one request's per-span state: the last tracestate parsed
// (the spans of a trace share one) and the invalid-input tallies.
type splitter struct {
	p       *budgetTailSampler
	lastTS  string
	lastS   otep235.Sampling
	lastBad bool
	invalid [numInvalidCauses]int64
	// ruleErrs counts rule conditions that failed at runtime, per rule.
	ruleErrs []int64
	// key is where name keys are built, to be looked up without allocating;
	// service holds the service name meanwhile.
	key, service []byte
}

// spanAt is a span's place in its request.
type spanAt struct{ rs, ss, span int32 }

// ConsumeTraces splits the request into per-trace fragments and buffers
// them; late spans of decided traces follow their decision at once.
func (p *budgetTailSampler) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	req, err := p.split(td)
	if err != nil {
		return err
	}
	defer req.release()
	now := p.now()
	var out keptSet
	var encoded, scratch []byte
	sl := p.newSlab(req)
	for i := range req.frags {
		f := &req.frags[i]
		sh := p.shardOf(f.id)
		in := p.encode(req, f, sl, &encoded)
		if p.handoff != nil && p.handoff.proxy(sh, f.id, f, now) {
			continue
		}
		// Compressing is most of a fragment's cost then: before the lock.
		chunk := heldChunk{data: p.codec.store(f.encoded, &scratch), slab: in}
		sh.mu.Lock()
		p.ingest(sh, f.id, f, chunk, arrivedNow(now), &out)
		sh.mu.Unlock()
		p.enforceBounds(now, &out)
	}
	p.buffered.letGo(sl)
	p.forward(ctx, &out)
	return nil
}

// encode sets f.encoded, copied out of the request's encoding: into its
// part of the request's slab, into a buffer of its own, or with compression
// (the chunk is then a copy) into reuse, the caller's buffer; it returns
// the slab f.encoded lies in, if any. Whoever keeps f.encoded past the next
// fragment clones it.
func (p *budgetTailSampler) encode(req *request, f *fragment, sl *slab, reuse *[]byte) *slab {
	switch {
	case p.codec.compress:
		*reuse = req.wire.appendEncoding((*reuse)[:0], f.first)
		f.encoded = *reuse
		return nil
	case sl != nil && f.inSlab():
		f.encoded = req.wire.appendEncoding(sl.carve(f.bytes), f.first)
		return sl
	}
	f.encoded = req.wire.appendEncoding(make([]byte, 0, f.bytes), f.first)
	return nil
}

// split cuts td into one fragment per trace, each summarized for the
// policy and sized; td is left as it was. The caller releases the request.
func (p *budgetTailSampler) split(td ptrace.Traces) (*request, error) {
	req := requestPool.Get().(*request)
	w := &req.wire
	rss := td.ResourceSpans()
	// pdata wrote the encoding: a layout the index does not expect is a
	// bug; the request is refused whole (the client sees it) and logged.
	refuse := func() (*request, error) {
		req.release()
		p.logger.Error("cannot index a request's encoding", zap.Int("spans", td.SpanCount()))
		return nil, errUnexpectedEncoding
	}
	if err := w.index(td); err != nil || len(w.rs) != rss.Len() {
		return refuse()
	}
	sp := splitter{p: p}
	if len(p.rules.spanRules) > 0 {
		sp.ruleErrs = make([]int64, len(p.rules.rules))
	}
	cur := int32(-1)
	var curID pcommon.TraceID
	for i := 0; i < rss.Len(); i++ {
		rs, rec := rss.At(i), &w.rs[i]
		missingService := !hasServiceName(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		if rec.numSS != sss.Len() {
			return refuse()
		}
		// A ResourceSpans of one trace (a client batching per trace) is
		// copied into its fragment as one record. Contrib's loadbalancing
		// exporter (v0.161) does not send these: it keeps a source
		// ScopeSpans' spans for one sampler together, many traces in one.
		oneTrace, found := true, false
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			first := w.ss[rec.firstSS+j].firstSpan
			spans := ss.Spans()
			if w.ss[rec.firstSS+j].numSpans != spans.Len() {
				return refuse()
			}
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				id := span.TraceID()
				if id.IsEmpty() {
					sp.invalid[invalidZeroTraceID]++
					oneTrace = false
					continue
				}
				if found && id != curID {
					oneTrace = false
				}
				if cur < 0 || id != curID {
					cur, curID = req.fragmentOf(id), id
				}
				found = true
				f := &req.frags[cur]
				req.link(f, int32(first+k))
				if missingService {
					sp.invalid[invalidMissingServiceName]++
				}
				sp.summarize(f, rs, ss, span, spanAt{int32(i), int32(j), int32(k)})
			}
		}
		rec.whole = oneTrace && found
	}
	if sp.invalid != [numInvalidCauses]int64{} || sp.hasRuleErrors() {
		// Invalid spans and rule errors are rare; count them on the first shard.
		sh := p.shards[0]
		sh.mu.Lock()
		for c, n := range sp.invalid {
			sh.counters.invalid[c] += n
		}
		for i, n := range sp.ruleErrs {
			sh.counters.rules[i].errors += n
		}
		sh.mu.Unlock()
	}
	for i := range req.frags {
		f := &req.frags[i]
		f.bytes = int64(w.encodedSize(f.first))
		rs := rss.At(int(f.namesFrom.rs))
		f.traceNames = sp.traceNames(rs, rs.ScopeSpans().At(int(f.namesFrom.ss)).Spans().At(int(f.namesFrom.span)))
	}
	return req, nil
}

// hasRuleErrors reports whether a rule condition failed in this request.
func (sp *splitter) hasRuleErrors() bool {
	for _, n := range sp.ruleErrs {
		if n != 0 {
			return true
		}
	}
	return false
}

// summarize folds a span into its fragment's summary. The fragment's names
// are looked up once it is complete, from the span that gives them (at).
func (sp *splitter) summarize(f *fragment, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, at spanAt) {
	f.spans++
	id := span.SpanID()
	f.fp += mix64(binary.LittleEndian.Uint64(id[:]))
	sp.p.rules.matchSpan(rs, ss, span, &f.rules, sp.ruleErrs)
	if !f.hasError && sp.p.isError(span) {
		f.hasError = true
	}
	sp.readTraceState(f, span)
	start, end := span.StartTimestamp(), span.EndTimestamp()
	var dur time.Duration
	if end >= start {
		dur = time.Duration(end - start)
	} else {
		sp.invalid[invalidEndBeforeStart]++
	}
	switch {
	case span.ParentSpanID().IsEmpty():
		if !f.hasRoot {
			f.hasRoot = true
			f.dur, f.namesFrom = dur, at
		}
	case !f.hasRoot && (f.spans == 1 || dur > f.dur):
		f.dur, f.namesFrom = dur, at
	}
}

// readTraceState folds the span's OTEP 235 fields into the fragment: the
// largest consistent th (the probability the trace arrived with) and rv.
func (sp *splitter) readTraceState(f *fragment, span ptrace.Span) {
	ts := span.TraceState().AsRaw()
	if ts == "" {
		f.stampBytes += stampBytesFresh
		return
	}
	f.stampBytes += stampBytesExisting
	if ts != sp.lastTS {
		var problem otep235.Problem
		sp.lastTS = ts
		sp.lastS, problem = otep235.Parse(ts)
		sp.lastBad = problem != otep235.OK
	}
	if sp.lastBad {
		sp.invalid[invalidUnparseableTracestate]++
		return
	}
	s, problem := sp.lastS.Consistent(span.TraceID())
	if problem == otep235.Inconsistent {
		sp.invalid[invalidInconsistentThreshold]++
	}
	if s.HasThreshold && (!f.hasTIn || sampling.ThresholdGreater(s.Threshold, f.tIn)) {
		f.tIn, f.hasTIn = s.Threshold, true
	}
	if s.HasRandomness && !f.hasRnd {
		f.rnd, f.hasRnd = s.Randomness, true
	}
}

// isError: status ERROR, or with http_server_errors a SERVER span whose
// http.response.status_code (an int or a numeric string) is ≥ 500.
func (p *budgetTailSampler) isError(span ptrace.Span) bool {
	if span.Status().Code() == ptrace.StatusCodeError {
		return true
	}
	if !p.cfg.Errors.HTTPServerErrors || span.Kind() != ptrace.SpanKindServer {
		return false
	}
	v, ok := span.Attributes().Get(httpStatusKey)
	if !ok {
		return false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int() >= 500
	case pcommon.ValueTypeStr:
		code, err := strconv.Atoi(strings.TrimSpace(v.Str()))
		return err == nil && code >= 500
	case pcommon.ValueTypeDouble:
		return v.Double() >= 500
	}
	return false
}

// hasServiceName reports whether the resource names its service.
func hasServiceName(res pcommon.Map) bool {
	v, ok := res.Get(serviceNameKey)
	return ok && v.AsString() != ""
}

// traceNames are the interned service and outlier group of span: the
// group_by values joined by 0x1f.
func (sp *splitter) traceNames(rs ptrace.ResourceSpans, span ptrace.Span) traceNames {
	res := rs.Resource().Attributes()
	service := sp.service[:0]
	if v, ok := res.Get(serviceNameKey); ok {
		service = appendValue(service, v)
	}
	if len(service) == 0 {
		service = append(service, unknownService...)
	}
	sp.service = service
	b := appendPairKey(sp.key[:0], service)
	for i, key := range sp.p.cfg.Outliers.GroupBy {
		if i > 0 {
			b = append(b, 0x1f)
		}
		if key == groupBySpanName {
			b = append(b, span.Name()...)
			continue
		}
		if v, ok := res.Get(key); ok {
			b = appendValue(b, v)
		} else if v, ok := span.Attributes().Get(key); ok {
			b = appendValue(b, v)
		}
	}
	sp.key = b
	return sp.p.names.pair(b)
}

func appendValue(b []byte, v pcommon.Value) []byte {
	if v.Type() == pcommon.ValueTypeStr {
		return append(b, v.Str()...)
	}
	return append(b, v.AsString()...)
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
// its trace's decision; called with sh.mu held.
func (p *budgetTailSampler) ingest(sh *shard, id pcommon.TraceID, f *fragment, chunk heldChunk, a arrival, out *keptSet) {
	priming := p.priming.Load() && !a.handed
	sh.fragments++
	k, ok := sh.lookup(id)
	if ok && k.ref == 0 {
		d := sh.decisionOf(k)
		if d.seen(f.fp) {
			sh.counters.invalid[invalidDuplicate] += int64(f.spans)
			return
		}
		if k.which == sampled {
			p.followSampled(sh, f, *d, p.lateSize(sh, f, priming), out)
		} else {
			p.followNotSampled(sh, id, f, k, p.lateSize(sh, f, priming), out)
		}
		return
	}
	t := sh.traceOf(k)
	if t != nil && !a.handed && t.seen(f.fp) {
		sh.counters.invalid[invalidDuplicate] += int64(f.spans)
		return
	}
	switch {
	case t == nil:
		t = sh.add(id, p.instant(a.at), a.handed)
		t.recent[0] = f.fp
	case a.handed:
		sh.arrivedEarlier(t, p.instant(a.at))
	}
	t.hops = max(t.hops, a.hops)
	held := sh.held(t)
	held.addChunk(chunk)
	if chunk.slab != nil {
		chunk.slab.holds.Add(1)
	}
	sh.grow(t, f.bytes, chunk.stored())
	if priming {
		sh.intake += p.unit.volume(f.spans, f.bytes+f.stampBytes)
	}
	sh.spans += int64(f.spans)
	rootArrived, takeNames := t.merge(&f.summary)
	if takeNames {
		held.traceNames = f.traceNames
	}
	if rootArrived {
		t.rootArrived = p.instant(a.rootAt)
		if !t.handed {
			sh.addRoot(t)
		}
	}
	if t.spans >= p.cfg.MaxSpansPerTrace {
		p.decide(sh, t, p.now(), reasonSpanLimit, out)
	}
}

// size is a late fragment's OTLP bytes and its volume in budget units.
type size struct {
	bytes int64
	vol   float64
}

// lateSize sizes a late fragment, and counts it as intake while priming.
func (p *budgetTailSampler) lateSize(sh *shard, f *fragment, priming bool) size {
	z := size{bytes: f.bytes, vol: p.unit.volume(f.spans, f.bytes+f.stampBytes)}
	if priming {
		sh.intake += z.vol
	}
	return z
}

// followSampled forwards a late fragment of a kept trace with its threshold;
// it counts against the budget like the rest of the trace.
func (p *budgetTailSampler) followSampled(sh *shard, f *fragment, d decided, z size, out *keptSet) {
	sh.counters.countLate(sampled, reasonLateSpan, f.spans, z.bytes)
	sh.volumes.book(d, z.vol, true, p.cfg.MaxServices)
	out.addLate(f.encoded, d.th, f.bytes+f.stampBytes)
}

// followNotSampled drops a late fragment of a trace decided not-sampled,
// unless it carries an error: then it is decided as an error trace on what
// it holds (a partial error trace beats none), and what follows it too.
func (p *budgetTailSampler) followNotSampled(sh *shard, id pcommon.TraceID, f *fragment, k known, z size, out *keptSet) {
	d := *sh.decisionOf(k)
	if d.rule >= 0 && p.rules.rules[d.rule].action == actionDrop {
		// Dropped by a rule: whatever follows, errors included.
		sh.counters.countLate(notSampled, reasonLateSpan, f.spans, z.bytes)
		return
	}
	if f.hasError {
		prob := p.policy.Load().errorProbability(d.service)
		th := otep235Downstream(f.inThreshold(), prob.p)
		if th.ShouldSample(f.randomness(id)) {
			late := decided{th: th, service: d.service, class: reasonError, rule: -1, at: d.at, recent: d.recent}
			sh.record(id, sampled, late, k, true)
			sh.counters.countLate(sampled, reasonLateError, f.spans, z.bytes)
			sh.volumes.book(late, z.vol, true, p.cfg.MaxServices)
			out.addLate(f.encoded, th, f.bytes+f.stampBytes)
			return
		}
		sh.counters.overflow[classError]++
	}
	sh.counters.countLate(notSampled, reasonLateSpan, f.spans, z.bytes)
	sh.volumes.book(d, z.vol, false, p.cfg.MaxServices)
}

func otep235Downstream(tIn sampling.Threshold, p float64) sampling.Threshold {
	return otep235.Downstream(tIn, p, thresholdPrecision)
}

// mix64 is SplitMix64's finalizer: span IDs are random, but a sum of them
// must not cancel out for IDs that differ in few bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
