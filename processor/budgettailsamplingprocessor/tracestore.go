package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

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
	records [][]trace
	held    [][]heldParts
	free    []traceRef
	used    int // slots ever handed out
}

// tracePage is a page's slots: about 60 KB of records.
const tracePage = 256

// heldParts are a buffered trace's pointers: its names and its chunks.
type heldParts struct {
	traceNames
	// chunks are the fragments as the buffer holds them; the first sits in
	// inline, so that a trace arriving whole allocates no slice for them.
	chunks [][]byte
	inline [1][]byte
}

// traceNames are what the policy books a trace under: the root span's
// service and outlier group, else the longest span's.
type traceNames struct {
	service string
	group   string
}

func (st *traceStore) at(r traceRef) *trace {
	i := int(r - 1)
	return &st.records[i/tracePage][i%tracePage]
}

func (st *traceStore) heldOf(t *trace) *heldParts {
	i := int(t.self - 1)
	return &st.held[i/tracePage][i%tracePage]
}

// alloc returns a zeroed record for a new trace.
func (st *traceStore) alloc() *trace {
	var r traceRef
	if n := len(st.free); n > 0 {
		r = st.free[n-1]
		st.free = st.free[:n-1]
	} else {
		if st.used%tracePage == 0 {
			st.records = append(st.records, make([]trace, tracePage))
			st.held = append(st.held, make([]heldParts, tracePage))
		}
		st.used++
		r = traceRef(st.used)
	}
	t := st.at(r)
	*t = trace{self: r}
	return t
}

// release frees t's slot; its chunks and names are let go for the GC.
// Nothing of t may be used afterwards.
func (st *traceStore) release(t *trace) {
	*st.heldOf(t) = heldParts{}
	st.free = append(st.free, t.self)
	t.self = 0
}

// live is how many slots are in use.
func (st *traceStore) live() int { return st.used - len(st.free) }

// addChunk appends a fragment as the buffer holds it.
func (h *heldParts) addChunk(chunk []byte) {
	if h.chunks == nil {
		h.inline[0] = chunk
		h.chunks = h.inline[:1:1]
		return
	}
	h.chunks = append(h.chunks, chunk)
}
