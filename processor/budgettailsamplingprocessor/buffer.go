package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/swiss"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// trace is what the buffer holds of one undecided trace: the summary the
// policy decides on, gathered as the spans arrived, and its place in the
// shard's lists. Its spans (marshaled OTLP fragments, a fraction of pdata's
// in-memory size) and names are in the store's heldParts: a record holds no
// pointer (see traceStore).
type trace struct {
	summary
	id          pcommon.TraceID
	self        traceRef
	arrived     instant
	rootArrived instant
	// bytes is the OTLP size of the trace's spans (what the budget and the
	// counters count); stored what its chunks hold of their own (what
	// max_buffered_bytes bounds, with the slabs: see slab): less with
	// buffer_compression, nothing for chunks in a slab.
	bytes      int64
	stored     int64
	links      [3]link
	inRootList bool
	// handed: part of the trace came from a peer with an earlier arrival
	// time; it waits in the shard's handed list instead of arrivals.
	handed bool
	// hops counts the samplers that passed the trace on; past maxHops it is
	// decided where it is, whatever the ring says.
	hops uint8
	// recent are the fingerprints of the last fragments, to drop a fragment
	// that arrives twice: a gateway retrying a request, part of which was
	// delivered, re-sends that part.
	recent [4]uint64
}

// instant is a time as nanoseconds after the processor's epoch (monotonic
// when the clock is): 8 bytes and no pointer, where a time.Time is 24 with
// a location pointer, and the GC scans a million traces' worth.
type instant int64

func (p *budgetTailSampler) instant(t time.Time) instant { return instant(t.Sub(p.epoch)) }

func (p *budgetTailSampler) timeAt(i instant) time.Time { return p.epoch.Add(time.Duration(i)) }

// since is how long before now the instant was.
func (p *budgetTailSampler) since(now time.Time, i instant) time.Duration {
	return now.Sub(p.epoch) - time.Duration(i)
}

// seen reports whether a fragment with this fingerprint arrived before, and
// remembers it otherwise.
func (t *trace) seen(fp uint64) bool { return seenBefore(t.recent[:], fp) }

// lastFingerprints are what its decision remembers of t's fragments.
func (t *trace) lastFingerprints() [2]uint64 { return [2]uint64{t.recent[0], t.recent[1]} }

// seenBefore reports whether fp is among the recent fingerprints, newest
// first; if not, it becomes the newest and the oldest goes.
func seenBefore(recent []uint64, fp uint64) bool {
	if slices.Contains(recent, fp) {
		return true
	}
	copy(recent[1:], recent[:len(recent)-1])
	recent[0] = fp
	return false
}

// summary is what the policy decides on, gathered as spans arrive: per
// fragment while a request is split, then merged into the trace.
type summary struct {
	spans int
	// dur is the root span's own duration, or, while no root has arrived, the
	// longest span's: one host's clock, so skew between hosts cannot make a
	// trace look slow.
	dur time.Duration
	// The trace's names (traceNames) go with dur: the root span's, else the
	// longest span's (the top-most one present when a proxy never exports
	// the root). They are kept apart: a summary holds no pointer.
	// tIn is the largest consistent th among the spans: the probability the
	// trace arrived with (head sampling); hasTIn false means 1.
	tIn sampling.Threshold
	// rnd is an explicit rv, when a span carried one (hasRnd).
	rnd sampling.Randomness
	// stampBytes estimates what writing th will add to the spans.
	stampBytes int64
	// rules has a bit per rule some span of the trace matched.
	rules uint64
	// fp fingerprints a fragment's spans (order-independent), so that the
	// same fragment delivered twice is recognised.
	fp uint64
	// The flags last, together: a trace is buffered by the hundred thousand.
	hasError bool
	hasRoot  bool
	hasTIn   bool
	hasRnd   bool
}

// merge folds a fragment's summary in; it reports whether o brought the
// trace's root span, and whether the trace now takes o's names.
func (s *summary) merge(o *summary) (rootArrived, takeNames bool) {
	first := s.spans == 0
	s.spans += o.spans
	s.hasError = s.hasError || o.hasError
	s.stampBytes += o.stampBytes
	s.rules |= o.rules
	if o.hasTIn && (!s.hasTIn || sampling.ThresholdGreater(o.tIn, s.tIn)) {
		s.tIn, s.hasTIn = o.tIn, true
	}
	if o.hasRnd && !s.hasRnd {
		s.rnd, s.hasRnd = o.rnd, true
	}
	switch {
	case o.hasRoot && !s.hasRoot:
		s.hasRoot = true
		s.dur = o.dur
		return true, true
	case !s.hasRoot && (first || o.dur > s.dur):
		s.dur = o.dur
		return false, true
	}
	return false, false
}

// randomness is the trace's OTEP 235 randomness: rv, else the trace ID's.
func (s *summary) randomness(id pcommon.TraceID) sampling.Randomness {
	if s.hasRnd {
		return s.rnd
	}
	return sampling.TraceIDToRandomness(id)
}

// inThreshold is the threshold the trace arrived with.
func (s *summary) inThreshold() sampling.Threshold {
	if s.hasTIn {
		return s.tIn
	}
	return sampling.AlwaysSampleThreshold
}

type link struct{ prev, next traceRef }

const (
	arrivalList = iota
	rootList
	handedList
)

// traceList is an intrusive FIFO: traces are appended in arrival order, so
// the head is always the next to time out, and removal is O(1).
type traceList struct {
	head, tail traceRef
	which      int
}

func (l *traceList) pushBack(st *traceStore, t *trace) {
	lk := &t.links[l.which]
	lk.prev, lk.next = l.tail, 0
	if l.tail != 0 {
		st.at(l.tail).links[l.which].next = t.self
	} else {
		l.head = t.self
	}
	l.tail = t.self
}

func (l *traceList) remove(st *traceStore, t *trace) {
	lk := &t.links[l.which]
	l.pointNeighbours(st, *lk, lk.next, lk.prev)
	lk.prev, lk.next = 0, 0
}

// relink points t's neighbours (or the list's ends) at t, just moved to
// a slot of its own with its links as they were.
func (l *traceList) relink(st *traceStore, t *trace) {
	l.pointNeighbours(st, t.links[l.which], t.self, t.self)
}

// pointNeighbours sets what follows lk's predecessor (the head if none)
// and what precedes its successor (the tail if none).
func (l *traceList) pointNeighbours(st *traceStore, lk link, afterPrev, beforeNext traceRef) {
	if lk.prev != 0 {
		st.at(lk.prev).links[l.which].next = afterPrev
	} else {
		l.head = afterPrev
	}
	if lk.next != 0 {
		st.at(lk.next).links[l.which].prev = beforeNext
	} else {
		l.tail = beforeNext
	}
}

// known is what a shard knows of one trace ID: the trace while it is
// buffered, then where its decision is. One map holds both, so a fragment
// costs one lookup whatever became of its trace, and a decision overwrites
// the trace's entry instead of deleting one and inserting another.
type known struct {
	ref traceRef // the buffered trace; 0 once decided
	// slot in decisions[which] holds the decision.
	slot  int32
	which decision
}

// decisionRing remembers the last size decisions of one kind (FIFO). It
// grows by pages, never copying what it holds (a shard's ring reaches tens
// of megabytes).
type decisionRing struct {
	pages [][]decisionEntry
	len   int // slots in use
	next  int // the slot to overwrite once full
	size  int
}

const ringPage = 4096

func (r *decisionRing) at(slot int32) *decisionEntry {
	return &r.pages[slot/ringPage][slot%ringPage]
}

// grow adds a slot, a page at a time, and returns it.
func (r *decisionRing) grow() int {
	if r.len%ringPage == 0 {
		r.pages = append(r.pages, make([]decisionEntry, min(ringPage, r.size-r.len)))
	}
	r.len++
	return r.len - 1
}

type decisionEntry struct {
	id pcommon.TraceID
	d  decided
	// stale: the trace was decided again (a late error, a decision from a
	// peer); its entry is elsewhere, so evicting this one keeps the index.
	stale bool
}

// decided is what the decision rings remember of a trace, so that its late
// spans follow the decision, are booked to the class and service the trace
// was decided in, and a late error can still be kept.
type decided struct {
	th      sampling.Threshold
	service string // the key its volume is booked under
	class   reason // the volume class: error, outlier, baseline or rule
	rule    int16  // the rule that decided it, or -1
	at      int64  // when, in Unix nanoseconds: recent decisions travel on handoff
	// recent fingerprints the trace's last fragments, so that one delivered
	// again after the decision is dropped rather than followed twice.
	recent [2]uint64
}

// seen reports whether a late fragment with this fingerprint arrived
// before, and remembers it otherwise.
func (d *decided) seen(fp uint64) bool { return seenBefore(d.recent[:], fp) }

// shard is one slice of the buffer, chosen by trace ID. The bounds
// (max_traces, max_buffered_bytes) are the processor's, not the shard's.
type shard struct {
	mu sync.Mutex
	// index has every buffered trace and every remembered decision. Each
	// new trace ID is looked up, inserted, overwritten when decided and
	// deleted when its decision is forgotten, each time in cold memory: a
	// swiss.Map keeps its tables' headers in the directory itself, so an
	// operation misses the cache once where Go's map misses twice (the
	// table's header, then its group).
	index    *swiss.Map[pcommon.TraceID, known]
	store    traceStore
	buffered int // traces in the buffer
	arrivals traceList
	roots    traceList
	// handed holds traces whose first part arrived at another sampler:
	// not in arrival order, so decideExpired scans it whole (it only holds
	// what moved in the last ring change).
	handed    traceList
	bytes     int64
	spans     int64
	decisions [2]decisionRing // by decision: sampled, not sampled
	counters  counters
	volumes   volumes
	// intake is the volume received while the sampler measures its first
	// rates (priming); unused otherwise.
	intake float64
	// fragments counts what arrived since the last adjustment: an interval
	// with fragments but no decision is not idle, only between bursts.
	fragments int64
	totals    *bufferTotals
	// pendingTraces and pendingBytes are changes not yet added to totals:
	// adding every trace's to counters all cores share would make every
	// core wait on the same cache line.
	pendingTraces int64
	pendingBytes  int64
}

// bufferTotals are the whole processor's buffered traces and bytes, the
// figures max_traces and max_buffered_bytes bound. Shards add their changes
// in steps (flushTraces, flushBytes), so the totals trail the shards by at
// most a step per shard: at most 1/64 of either bound over all shards.
type bufferTotals struct {
	traces atomic.Int64
	bytes  atomic.Int64
	// slabBytes is what slabs hold (counted in bytes too, not in any
	// shard's): added and taken away once per request, not per fragment.
	slabBytes atomic.Int64
	// The steps: at most 32 traces and 64 KiB, at least 1.
	flushTraces, flushBytes int64
	// arena holds the slabs' memory.
	arena *slabArena
}

func newBufferTotals(cfg *Config, shards int) bufferTotals {
	step := func(bound, most int64) int64 { return min(max(bound/int64(shards*64), 1), most) }
	return bufferTotals{flushTraces: step(int64(cfg.MaxTraces), 32), flushBytes: step(cfg.MaxBufferedBytes, 64<<10),
		arena: newSlabArena(cfg.MaxBufferedBytes, cfg.BufferMemory == bufferMemoryMapped)}
}

// account records a change of the shard's buffer; called with s.mu held.
func (s *shard) account(traces, bytes int64) {
	s.pendingTraces += traces
	s.pendingBytes += bytes
	t := s.totals
	if s.pendingTraces >= t.flushTraces || s.pendingTraces <= -t.flushTraces ||
		s.pendingBytes >= t.flushBytes || s.pendingBytes <= -t.flushBytes {
		s.flush()
	}
}

// flush adds the shard's pending changes to the totals; called with s.mu held.
func (s *shard) flush() {
	if s.pendingTraces != 0 {
		s.totals.traces.Add(s.pendingTraces)
	}
	if s.pendingBytes != 0 {
		s.totals.bytes.Add(s.pendingBytes)
	}
	s.pendingTraces, s.pendingBytes = 0, 0
}

func newShard(cfg *Config, n int, totals *bufferTotals, rules int) *shard {
	per := func(total int) int { return max(1, (total+n-1)/n) }
	return &shard{
		index:    swiss.New[pcommon.TraceID, known](0),
		arrivals: traceList{which: arrivalList},
		roots:    traceList{which: rootList},
		handed:   traceList{which: handedList},
		volumes:  newVolumes(rules),
		totals:   totals,
		counters: counters{rules: make([]ruleCounters, rules)},
		decisions: [2]decisionRing{
			sampled:    {size: per(cfg.DecisionCache.SampledSize)},
			notSampled: {size: per(cfg.DecisionCache.NotSampledSize)},
		},
	}
}

// lookup is what the shard knows of id; called with s.mu held.
func (s *shard) lookup(id pcommon.TraceID) (known, bool) {
	return s.index.Get(id)
}

// traceOf is k's buffered trace, or nil once decided.
func (s *shard) traceOf(k known) *trace {
	if k.ref == 0 {
		return nil
	}
	return s.store.at(k.ref)
}

// head is l's first trace, or nil.
func (s *shard) head(l *traceList) *trace {
	if l.head == 0 {
		return nil
	}
	return s.store.at(l.head)
}

// next is the trace after t in l, or nil.
func (s *shard) next(l *traceList, t *trace) *trace {
	if n := t.links[l.which].next; n != 0 {
		return s.store.at(n)
	}
	return nil
}

// held is what of t holds pointers: its names and chunks.
func (s *shard) held(t *trace) *heldParts { return s.store.heldOf(t) }

// decisionOf is k's decision, to read or update in place; k.ref must be 0.
func (s *shard) decisionOf(k known) *decided {
	return &s.decisions[k.which].at(k.slot).d
}

// record remembers id's decision; prev is what the index held of id (a
// buffered trace, an earlier decision, or nothing). The oldest decision of
// the kind is forgotten when the ring is full.
func (s *shard) record(id pcommon.TraceID, which decision, d decided, prev known, hadPrev bool) {
	if hadPrev && prev.ref == 0 {
		s.decisions[prev.which].at(prev.slot).stale = true
	}
	r := &s.decisions[which]
	slot := r.next
	if r.len < r.size {
		slot = r.grow()
	} else {
		if e := r.at(int32(slot)); !e.stale {
			s.index.Delete(e.id)
		}
		r.next = (r.next + 1) % r.size
	}
	*r.at(int32(slot)) = decisionEntry{id: id, d: d}
	s.index.Put(id, known{slot: int32(slot), which: which})
}

// recentDecisions calls f with the decisions of one kind, newest first,
// until f returns false.
func (s *shard) recentDecisions(which decision, f func(pcommon.TraceID, decided) bool) {
	r := &s.decisions[which]
	n := r.len
	newest := n - 1
	if n == r.size {
		newest = (r.next - 1 + n) % n
	}
	for i := range n {
		e := r.at(int32((newest - i + n) % n))
		if e.stale {
			continue
		}
		if !f(e.id, e.d) {
			return
		}
	}
}

// each calls f with every buffered trace; f may remove it.
func (s *shard) each(f func(*trace)) {
	for _, l := range []*traceList{&s.arrivals, &s.handed} {
		for t := s.head(l); t != nil; {
			next := s.next(l, t)
			f(t)
			t = next
		}
	}
}

// remove takes t out of the buffer's lists and figures; the index keeps
// its entry for the decision that replaces it (record), or forget deletes
// it. t stays readable until release.
func (s *shard) remove(t *trace) {
	s.buffered--
	if t.handed {
		s.handed.remove(&s.store, t)
	} else {
		s.arrivals.remove(&s.store, t)
	}
	if t.inRootList {
		s.roots.remove(&s.store, t)
		t.inRootList = false
	}
	s.bytes -= t.stored
	s.spans -= int64(t.spans)
	s.account(-1, -t.stored)
}

// release frees a removed trace's slot and lets its slabs go (a keptSet
// forwarding its chunks took holds of its own); nothing of t may be used
// after.
func (s *shard) release(t *trace) {
	for _, c := range s.held(t).chunks {
		s.totals.letGo(c.slab)
	}
	s.store.release(t)
}

// forget deletes the index entry of a trace that left undecided.
func (s *shard) forget(id pcommon.TraceID) { s.index.Delete(id) }

// add buffers a new trace; a handed one (from a peer) waits in the handed
// list.
func (s *shard) add(id pcommon.TraceID, arrived instant, handed bool) *trace {
	t := s.store.alloc()
	t.id, t.arrived = id, arrived
	s.index.Put(id, known{ref: t.self})
	s.buffered++
	t.handed = handed
	if handed {
		s.handed.pushBack(&s.store, t)
	} else {
		s.arrivals.pushBack(&s.store, t)
	}
	s.account(1, 0)
	return t
}

// addRoot puts t, whose root arrived, in the roots list.
func (s *shard) addRoot(t *trace) {
	t.inRootList = true
	s.roots.pushBack(&s.store, t)
}

// oldest is the trace to decide first when the buffer must shrink.
func (s *shard) oldest() *trace {
	if t := s.head(&s.arrivals); t != nil {
		return t
	}
	return s.head(&s.handed)
}

// arrivedEarlier moves t to the handed list with an earlier arrival time
// (a peer held part of it first).
func (s *shard) arrivedEarlier(t *trace, at instant) {
	if at >= t.arrived {
		return
	}
	t.arrived = at
	if !t.handed {
		s.arrivals.remove(&s.store, t)
		if t.inRootList {
			s.roots.remove(&s.store, t)
			t.inRootList = false
		}
		t.handed = true
		s.handed.pushBack(&s.store, t)
	}
}

// grow accounts a chunk appended to t: bytes of OTLP, stored in the buffer
// by the chunk itself.
func (s *shard) grow(t *trace, bytes, stored int64) {
	t.bytes += bytes
	t.stored += stored
	s.bytes += stored
	s.account(0, stored)
}
