package spanmem // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"

import "sync/atomic"

// Totals are the whole processor's buffered traces and bytes, the figures
// max_traces and max_buffered_bytes bound, and the arena slabs come from.
// Owners of parts of the buffer (shards) add their changes in steps
// (FlushTraces, FlushBytes), so the totals trail them by at most a step
// each: at most 1/64 of either bound over all of them.
type Totals struct {
	traces atomic.Int64
	bytes  atomic.Int64
	// slabBytes is what slabs hold (counted in bytes too): added and taken
	// away once per request, not per fragment.
	slabBytes atomic.Int64
	// The steps: at most 32 traces and 64 KiB, at least 1.
	flushTraces, flushBytes int64
	arena                   *Arena
}

// NewTotals sizes the steps for parts owners sharing bounds of maxTraces
// and maxBytes; mapped puts slabs in an arena outside the Go heap.
func NewTotals(maxTraces int, maxBytes int64, parts int, mapped bool) *Totals {
	step := func(bound, most int64) int64 { return min(max(bound/int64(parts*64), 1), most) }
	return &Totals{flushTraces: step(int64(maxTraces), 32), flushBytes: step(maxBytes, 64<<10),
		arena: newArena(maxBytes, mapped)}
}

// Traces is the buffered traces counted so far.
func (t *Totals) Traces() int64 { return t.traces.Load() }

// Bytes is the buffered bytes counted so far, slabs included.
func (t *Totals) Bytes() int64 { return t.bytes.Load() }

// SlabBytes is what slabs hold.
func (t *Totals) SlabBytes() int64 { return t.slabBytes.Load() }

// Arena is where slabs come from.
func (t *Totals) Arena() *Arena { return t.arena }

// Pending is an owner's changes not yet added to the totals: adding every
// trace's to counters all cores share would make every core wait on the
// same cache line. Its owner serializes calls.
type Pending struct {
	traces, bytes int64
}

// Bytes is the bytes pending.
func (p *Pending) Bytes() int64 { return p.bytes }

// Account records a change; it reaches the totals once a step's worth
// is pending.
func (t *Totals) Account(p *Pending, traces, bytes int64) {
	p.traces += traces
	p.bytes += bytes
	if p.traces >= t.flushTraces || p.traces <= -t.flushTraces ||
		p.bytes >= t.flushBytes || p.bytes <= -t.flushBytes {
		t.Flush(p)
	}
}

// Flush adds what is pending to the totals.
func (t *Totals) Flush(p *Pending) {
	if p.traces != 0 {
		t.traces.Add(p.traces)
	}
	if p.bytes != 0 {
		t.bytes.Add(p.bytes)
	}
	p.traces, p.bytes = 0, 0
}

// NewSlab allocates a slab of n bytes and counts it as buffered, with one
// hold for the request that fills it: the caller lets it go (LetGo) once
// the request is taken in. nil when n is 0.
func (t *Totals) NewSlab(n int64) *Slab {
	if n == 0 {
		return nil
	}
	block, inArena := t.arena.alloc(n)
	sl := &Slab{buf: block[:0:n], block: block, inArena: inArena}
	sl.holds.Store(1)
	size := int64(len(block))
	t.bytes.Add(size)
	t.slabBytes.Add(size)
	return sl
}

// LetGo drops one hold on sl (nil: nothing to do); the last uncounts it
// and gives its memory back.
func (t *Totals) LetGo(sl *Slab) {
	if sl == nil || sl.holds.Add(-1) > 0 {
		return
	}
	n := int64(len(sl.block))
	t.bytes.Add(-n)
	t.slabBytes.Add(-n)
	if sl.inArena {
		t.arena.release(sl.block)
	}
	sl.buf, sl.block = nil, nil
}
