package spanmem // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"

import "sync/atomic"

// Slab is one allocation holding the encodings of a request's fragments
// that carry their trace's root, each fragment's chunk a slice of it. One
// object per request instead of one per fragment for the GC: with the
// default waits a sampler holds hundreds of thousands of fragments, and
// every collection marked each of them (a cache miss apiece), the largest
// part of what the sampler cost above the bare receive path.
//
// The memory goes only when the last chunk in it does, so the buffer counts
// a slab whole (max_buffered_bytes bounds memory, not chunk lengths) from
// its creation until its last hold goes; its chunks count nothing of their
// own. Only root-carrying fragments go in (the caller's choice), because
// their traces are all decided decision_wait_after_root after the request
// or sooner: a slab lives that long at most, and its chunks leave
// together. Other fragments may wait the whole decision_wait, or leave
// whenever their root comes: in SDK-like traffic a slab of them held 1.3×
// to 2.2× their bytes.
type Slab struct {
	buf []byte
	// block is the memory buf lies in, counted whole; inArena: it is the
	// arena's, given back when the last hold goes.
	block   []byte
	inArena bool
	// holds are the buffered chunks in it, the forwarders that will read
	// chunks of it, plus one held by its request while it is taken in.
	holds atomic.Int32
}

// Chunk is a fragment as the buffer holds it, and the slab it lies in;
// Slab is nil when the chunk is an allocation of its own (compressed, or
// without its trace's root), counted by its length.
type Chunk struct {
	Data []byte
	Slab *Slab
}

// Stored is what the chunk adds to the buffer's bytes itself.
func (c Chunk) Stored() int64 {
	if c.Slab != nil {
		return 0
	}
	return int64(len(c.Data))
}

// Carve returns the next n bytes of the slab, empty, to append to: a full
// slice (capacity n), so that appending more than n cannot spill into the
// next fragment's bytes.
func (sl *Slab) Carve(n int64) []byte {
	from := len(sl.buf)
	sl.buf = sl.buf[:from+int(n)]
	return sl.buf[from : from : from+int(n)]
}

// Full reports whether every byte of the slab was carved.
func (sl *Slab) Full() bool { return len(sl.buf) == cap(sl.buf) }

// Hold adds a hold on sl (nil: nothing to do); Totals.LetGo drops it.
func (sl *Slab) Hold() {
	if sl != nil {
		sl.holds.Add(1)
	}
}
