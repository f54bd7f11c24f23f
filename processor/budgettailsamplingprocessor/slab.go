package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import "sync/atomic"

// slab is one allocation holding the encodings of a request's fragments
// that carry their trace's root, each fragment's chunk a slice of it. One
// object per request instead of one per fragment for the GC: with the
// default waits a sampler holds hundreds of thousands of fragments, and
// every collection marked each of them (a cache miss apiece), the largest
// part of what the sampler cost above the bare receive path
// (docs/BENCHMARKS.md, "What changed").
//
// The memory goes only when the last chunk in it does, so the buffer counts
// a slab whole (max_buffered_bytes bounds memory, not chunk lengths) from
// its creation until its last chunk leaves the buffer; its chunks count
// nothing of their own. Only root-carrying fragments go in, because their
// traces are all decided decision_wait_after_root after the request (or
// sooner): a slab lives that long at most, and its chunks leave together.
// Other fragments may wait the whole decision_wait, or leave whenever their
// root comes: in SDK-like traffic (a service's spans of many traces, whose
// roots come in other requests at other times) a slab of them held 1.3× to
// 2.2× their bytes. They get an allocation of their own, as with
// compression.
type slab struct {
	buf []byte
	// block is the memory buf lies in, counted whole; inArena: it is the
	// arena's, given back when the last hold goes.
	block   []byte
	inArena bool
	// holds are the buffered chunks in it, the keptSets that will forward
	// chunks of it, plus one held by its request while it is taken in (see
	// letGo).
	holds atomic.Int32
}

// heldChunk is a fragment as the buffer holds it, and the slab it lies in;
// slab is nil when the chunk is an allocation of its own (compressed, or
// without its trace's root), counted by its length.
type heldChunk struct {
	data []byte
	slab *slab
}

// stored is what the chunk adds to the buffer's bytes itself.
func (c heldChunk) stored() int64 {
	if c.slab != nil {
		return 0
	}
	return int64(len(c.data))
}

// newSlab allocates the slab of req's root-carrying fragments and counts it
// as buffered; nil with compression, where each chunk is a compressed copy
// of its own, or when no fragment carries a root. The caller lets the
// request's hold go (letGo) once it is taken in.
func (p *budgetTailSampler) newSlab(req *request) *slab {
	if p.codec.compress {
		return nil
	}
	var n int64
	for i := range req.frags {
		if req.frags[i].inSlab() {
			n += req.frags[i].bytes
		}
	}
	if n == 0 {
		return nil
	}
	block, inArena := p.buffered.arena.alloc(n)
	sl := &slab{buf: block[:0:n], block: block, inArena: inArena}
	sl.holds.Store(1)
	size := int64(len(block))
	p.buffered.bytes.Add(size)
	p.buffered.slabBytes.Add(size)
	return sl
}

// inSlab: the fragment goes in its request's slab (see slab).
func (f *fragment) inSlab() bool { return f.hasRoot }

// carve returns the next n bytes of the slab, empty, to append to: a full
// slice (capacity n), so that appending more than n cannot spill into the
// next fragment's bytes.
func (sl *slab) carve(n int64) []byte {
	from := len(sl.buf)
	sl.buf = sl.buf[:from+int(n)]
	return sl.buf[from : from : from+int(n)]
}

// letGo drops one hold on sl (nil: nothing to do); the last uncounts it
// and gives its memory back.
func (t *bufferTotals) letGo(sl *slab) {
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
