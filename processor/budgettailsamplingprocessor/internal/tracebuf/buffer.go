package tracebuf // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"

import (
	"github.com/cockroachdb/swiss"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Trace is what the buffer holds of one undecided trace: the summary the
// policy decides on, gathered as the spans arrived, and its place in the
// buffer's lists. Its spans (encoded OTLP fragments, a fraction of pdata's
// in-memory size) and names are in the store's Held: a record holds no
// pointer (see traceStore). Exported fields are the owner's to read; the
// buffer's methods change them.
type Trace struct {
	traceinfo.Summary
	ID          pcommon.TraceID
	self        traceRef
	Arrived     Instant
	RootArrived Instant
	// Bytes is the OTLP size of the trace's spans (what the budget and the
	// counters count); stored what its chunks hold of their own (what
	// max_buffered_bytes bounds, with the slabs): less with
	// buffer_compression, nothing for chunks in a slab.
	Bytes      int64
	stored     int64
	links      [3]link
	inRootList bool
	// handed: part of the trace came from a peer with an earlier arrival
	// time; it waits in the handed list instead of arrivals.
	handed bool
	// Hops counts the samplers that passed the trace on; past a bound it
	// is decided where it is, whatever the ring says.
	Hops uint8
	// recent are the fingerprints of the last fragments, to drop a fragment
	// that arrives twice: a gateway retrying a request, part of which was
	// delivered, re-sends that part.
	recent [4]uint64
}

// Instant is a time as nanoseconds after the owner's epoch (monotonic
// when the clock is): 8 bytes and no pointer, where a time.Time is 24 with
// a location pointer, and the GC scans a million traces' worth.
type Instant int64

// Seen reports whether a fragment with this fingerprint arrived before, and
// remembers it otherwise.
func (t *Trace) Seen(fp uint64) bool { return traceinfo.SeenBefore(t.recent[:], fp) }

// LastFingerprints are what its decision remembers of t's fragments.
func (t *Trace) LastFingerprints() [2]uint64 { return [2]uint64{t.recent[0], t.recent[1]} }

// Entry is what the index holds of t while it is buffered: the prev of a
// Record that replaces it with its decision.
func (t *Trace) Entry() Known { return Known{ref: t.self} }

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

func (l *traceList) pushBack(st *traceStore, t *Trace) {
	lk := &t.links[l.which]
	lk.prev, lk.next = l.tail, 0
	if l.tail != 0 {
		st.at(l.tail).links[l.which].next = t.self
	} else {
		l.head = t.self
	}
	l.tail = t.self
}

func (l *traceList) remove(st *traceStore, t *Trace) {
	lk := &t.links[l.which]
	l.pointNeighbours(st, *lk, lk.next, lk.prev)
	lk.prev, lk.next = 0, 0
}

// relink points t's neighbours (or the list's ends) at t, just moved to
// a slot of its own with its links as they were.
func (l *traceList) relink(st *traceStore, t *Trace) {
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

// Known is what a buffer knows of one trace ID: the trace while it is
// buffered, then where its decision is. One map holds both, so a fragment
// costs one lookup whatever became of its trace, and a decision overwrites
// the trace's entry instead of deleting one and inserting another.
type Known struct {
	ref traceRef // the buffered trace; 0 once decided
	// slot in decisions[which] holds the decision.
	slot  int32
	which traceinfo.Decision
}

// Decided reports whether the trace was decided (no longer buffered).
func (k Known) Decided() bool { return k.ref == 0 }

// Which is a decided trace's decision.
func (k Known) Which() traceinfo.Decision { return k.which }

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
	d  traceinfo.Decided
	// stale: the trace was decided again (a late error, a decision from a
	// peer); its entry is elsewhere, so evicting this one keeps the index.
	stale bool
}

// Buffer is one shard of the trace buffer: its traces, their FIFO lists,
// the index of buffered and decided trace IDs, and the decision rings. The
// bounds (max_traces, max_buffered_bytes) are the processor's: changes go
// to the shared Totals in steps. A Buffer has no lock: its owner holds one
// around every call.
type Buffer struct {
	// index has every buffered trace and every remembered decision. Each
	// new trace ID is looked up, inserted, overwritten when decided and
	// deleted when its decision is forgotten, each time in cold memory: a
	// swiss.Map keeps its tables' headers in the directory itself, so an
	// operation misses the cache once where Go's map misses twice (the
	// table's header, then its group).
	index    *swiss.Map[pcommon.TraceID, Known]
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
	totals    *spanmem.Totals
	pending   spanmem.Pending
}

// account records a change of the buffer.
func (s *Buffer) account(traces, bytes int64) { s.totals.Account(&s.pending, traces, bytes) }

// PendingBytes is what the buffer has not yet added to the totals.
func (s *Buffer) PendingBytes() int64 { return s.pending.Bytes() }

// Flush adds the buffer's pending changes to the totals.
func (s *Buffer) Flush() { s.totals.Flush(&s.pending) }

// New returns an empty buffer remembering up to sampled and notSampled
// decisions of each kind.
func New(sampled, notSampled int, totals *spanmem.Totals) *Buffer {
	return &Buffer{
		index:    swiss.New[pcommon.TraceID, Known](0),
		arrivals: traceList{which: arrivalList},
		roots:    traceList{which: rootList},
		handed:   traceList{which: handedList},
		totals:   totals,
		decisions: [2]decisionRing{
			traceinfo.Sampled:    {size: max(1, sampled)},
			traceinfo.NotSampled: {size: max(1, notSampled)},
		},
	}
}

// Len is how many traces are buffered.
func (s *Buffer) Len() int { return s.buffered }

// Spans is how many spans are buffered.
func (s *Buffer) Spans() int64 { return s.spans }

// Bytes is what the buffered chunks hold of their own (slabs aside).
func (s *Buffer) Bytes() int64 { return s.bytes }

// Live is how many trace slots are in use: Len, unless a slot leaked.
func (s *Buffer) Live() int { return s.store.live() }

// FirstArrived is the trace that arrived first among those not handed
// over, or nil: the next whose decision_wait ends.
func (s *Buffer) FirstArrived() *Trace { return s.head(&s.arrivals) }

// FirstRoot is the trace whose root arrived first, or nil: the next whose
// decision_wait_after_root ends.
func (s *Buffer) FirstRoot() *Trace { return s.head(&s.roots) }

// EachHanded calls f with every trace handed over by a peer (not in
// arrival order); f may remove it.
func (s *Buffer) EachHanded(f func(*Trace)) {
	for t := s.head(&s.handed); t != nil; {
		next := s.next(&s.handed, t)
		f(t)
		t = next
	}
}

// Lookup is what the shard knows of id.
func (s *Buffer) Lookup(id pcommon.TraceID) (Known, bool) {
	return s.index.Get(id)
}

// TraceOf is k's buffered trace, or nil once decided.
func (s *Buffer) TraceOf(k Known) *Trace {
	if k.ref == 0 {
		return nil
	}
	return s.store.at(k.ref)
}

// head is l's first trace, or nil.
func (s *Buffer) head(l *traceList) *Trace {
	if l.head == 0 {
		return nil
	}
	return s.store.at(l.head)
}

// next is the trace after t in l, or nil.
func (s *Buffer) next(l *traceList, t *Trace) *Trace {
	if n := t.links[l.which].next; n != 0 {
		return s.store.at(n)
	}
	return nil
}

// Held is what of t holds pointers: its names and chunks.
func (s *Buffer) Held(t *Trace) *Held { return s.store.heldOf(t) }

// DecisionOf is k's decision, to read or update in place; k.ref must be 0.
func (s *Buffer) DecisionOf(k Known) *traceinfo.Decided {
	return &s.decisions[k.which].at(k.slot).d
}

// Record remembers id's decision; prev is what the index held of id (a
// buffered trace, an earlier decision, or nothing). The oldest decision of
// the kind is forgotten when the ring is full.
func (s *Buffer) Record(id pcommon.TraceID, which traceinfo.Decision, d traceinfo.Decided, prev Known, hadPrev bool) {
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
	s.index.Put(id, Known{slot: int32(slot), which: which})
}

// RecentDecisions calls f with the decisions of one kind, newest first,
// until f returns false.
func (s *Buffer) RecentDecisions(which traceinfo.Decision, f func(pcommon.TraceID, traceinfo.Decided) bool) {
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

// Each calls f with every buffered trace; f may remove it.
func (s *Buffer) Each(f func(*Trace)) {
	for _, l := range []*traceList{&s.arrivals, &s.handed} {
		for t := s.head(l); t != nil; {
			next := s.next(l, t)
			f(t)
			t = next
		}
	}
}

// Remove takes t out of the buffer's lists and figures; the index keeps
// its entry for the decision that replaces it (record), or forget deletes
// it. t stays readable until release.
func (s *Buffer) Remove(t *Trace) {
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
	s.spans -= int64(t.Spans)
	s.account(-1, -t.stored)
}

// Release frees a removed trace's slot and lets its slabs go (a keptSet
// forwarding its chunks took holds of its own); nothing of t may be used
// after.
func (s *Buffer) Release(t *Trace) {
	for _, c := range s.Held(t).chunks {
		s.totals.LetGo(c.Slab)
	}
	s.store.release(t)
}

// Forget deletes the index entry of a trace that left undecided.
func (s *Buffer) Forget(id pcommon.TraceID) { s.index.Delete(id) }

// Add buffers a new trace; a handed one (from a peer) waits in the handed
// list.
func (s *Buffer) Add(id pcommon.TraceID, arrived Instant, handed bool) *Trace {
	t := s.store.alloc()
	t.ID, t.Arrived = id, arrived
	s.index.Put(id, Known{ref: t.self})
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

// AddRoot puts t, whose root arrived, in the roots list; a trace handed
// over by a peer stays in the handed list, which is scanned whole.
func (s *Buffer) AddRoot(t *Trace) {
	if t.handed {
		return
	}
	t.inRootList = true
	s.roots.pushBack(&s.store, t)
}

// Oldest is the trace to decide first when the buffer must shrink.
func (s *Buffer) Oldest() *Trace {
	if t := s.head(&s.arrivals); t != nil {
		return t
	}
	return s.head(&s.handed)
}

// ArrivedEarlier moves t to the handed list with an earlier arrival time
// (a peer held part of it first).
func (s *Buffer) ArrivedEarlier(t *Trace, at Instant) {
	if at >= t.Arrived {
		return
	}
	t.Arrived = at
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

// Grow accounts a chunk of spans appended to t: bytes of OTLP, stored in
// the buffer by the chunk itself.
func (s *Buffer) Grow(t *Trace, spans int, bytes, stored int64) {
	s.spans += int64(spans)
	t.Bytes += bytes
	t.stored += stored
	s.bytes += stored
	s.account(0, stored)
}
