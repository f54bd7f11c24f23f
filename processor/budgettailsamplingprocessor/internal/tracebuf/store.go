package tracebuf // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"

import (
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// traceRef is a buffered trace's slot in its shard's store; 0 is none, so
// that zeroed links and index entries point nowhere.
type traceRef int32

// traceStore holds a shard's buffered traces in pages that never move. The
// records hold no pointer (links and index entries are traceRefs), so the
// GC neither scans them nor the index; what must hold pointers — names and
// chunks — sits in a parallel page of its own, a few words per trace. A
// trace as an object of its own was 288 bytes with ten pointers, and a
// million of them were marked on every cycle.
//
// Pages stay once grown: a shard's store keeps room for the most traces it
// held at once, which max_traces bounds.
type traceStore struct {
	records [][]Trace
	held    [][]Held
	free    []traceRef
	used    int // slots ever handed out
}

// tracePage is a page's slots: about 60 KB of records.
const tracePage = 256

// Held are a buffered trace's pointers: its names and its chunks.
type Held struct {
	traceinfo.Names
	// chunks are the fragments as the buffer holds them; the first sits in
	// inline, so that a trace arriving whole allocates no slice for them.
	chunks []spanmem.Chunk
	inline [1]spanmem.Chunk
}

// Chunks are the trace's fragments as the buffer holds them, in arrival
// order; the slice is the buffer's, reused once the trace leaves.
func (h *Held) Chunks() []spanmem.Chunk { return h.chunks }

func (st *traceStore) at(r traceRef) *Trace {
	i := int(r - 1)
	return &st.records[i/tracePage][i%tracePage]
}

func (st *traceStore) heldOf(t *Trace) *Held {
	i := int(t.self - 1)
	return &st.held[i/tracePage][i%tracePage]
}

// alloc returns a zeroed record for a new trace.
func (st *traceStore) alloc() *Trace {
	var r traceRef
	if n := len(st.free); n > 0 {
		r = st.free[n-1]
		st.free = st.free[:n-1]
	} else {
		if st.used%tracePage == 0 {
			st.records = append(st.records, make([]Trace, tracePage))
			st.held = append(st.held, make([]Held, tracePage))
		}
		st.used++
		r = traceRef(st.used)
	}
	t := st.at(r)
	*t = Trace{self: r}
	return t
}

// release frees t's slot; its chunks and names are let go for the GC.
// Nothing of t may be used afterwards.
func (st *traceStore) release(t *Trace) {
	*st.heldOf(t) = Held{}
	st.free = append(st.free, t.self)
	t.self = 0
}

// Pages is how many pages of trace slots the buffer holds.
func (s *Buffer) Pages() int { return len(s.store.records) }

// live is how many slots are in use.
func (st *traceStore) live() int { return st.used - len(st.free) }

// AddChunk appends a fragment as the buffer holds it, and holds its slab.
func (h *Held) AddChunk(chunk spanmem.Chunk) {
	chunk.Slab.Hold()
	if h.chunks == nil {
		h.inline[0] = chunk
		h.chunks = h.inline[:1:1]
		return
	}
	if len(h.chunks) == 1 {
		// A trace in parts mostly comes in more than two (SDK clients
		// export each service's spans on their own schedule): room for
		// four saves growing the list twice.
		h.chunks = append(make([]spanmem.Chunk, 0, chunksOnSecondPart), h.chunks[0], chunk)
		return
	}
	h.chunks = append(h.chunks, chunk)
}

// chunksOnSecondPart is the room a trace's chunk list gets when its second
// fragment arrives.
const chunksOnSecondPart = 4

// Compact gives pages back while a quarter of the store's slots or fewer
// are in use: the traces of the last page move to free slots below it and
// the page goes. Pages would otherwise stay at each shard's peak, and peaks
// of different shards need not coincide (a skew of trace IDs moving from
// shard to shard): memory would follow shards × max_traces, not
// max_traces. Called at the end of a decision pass, where no *Trace is
// kept across it: a moved trace's record is at another
// address afterwards.
func (s *Buffer) Compact() {
	st := &s.store
	for len(st.records) > 1 && st.live()*4 <= (len(st.records)-1)*tracePage {
		lastPage := len(st.records) - 1
		first := traceRef(lastPage*tracePage + 1) // the last page's first slot
		// Free slots below the last page receive its traces; those in it go
		// with it.
		below := st.free[:0]
		for _, r := range st.free {
			if r < first {
				below = append(below, r)
			}
		}
		st.free = below
		for r := first; int(r) <= st.used; r++ {
			if t := st.at(r); t.self == r {
				to := st.free[len(st.free)-1]
				st.free = st.free[:len(st.free)-1]
				s.move(t, to)
			}
		}
		st.records[lastPage], st.held[lastPage] = nil, nil
		st.records, st.held = st.records[:lastPage], st.held[:lastPage]
		st.used = lastPage * tracePage
	}
}

// move copies t to the free slot to and points the index and t's lists at
// it; t's old slot is left empty.
func (s *Buffer) move(t *Trace, to traceRef) {
	st := &s.store
	nt := st.at(to)
	*nt = *t
	nt.self = to
	h, nh := st.heldOf(t), st.heldOf(nt)
	*nh = *h
	if len(h.chunks) == 1 && &h.chunks[0] == &h.inline[0] {
		nh.chunks = nh.inline[:1:1]
	}
	*h = Held{}
	t.self = 0
	if nt.handed {
		s.handed.relink(st, nt)
	} else {
		s.arrivals.relink(st, nt)
	}
	if nt.inRootList {
		s.roots.relink(st, nt)
	}
	s.index.Put(nt.ID, Known{ref: to})
}
