// Package recall holds, for a short while, the encoded fragments stress
// relief dropped, so that an error arriving later in the same trace can
// recall them and the error trace leaves whole.
//
// It owns a bounded first-in-first-out store of fragments by trace ID:
// bytes and age bound it, the oldest go first. It must not know sampling
// decisions, thresholds, budgets or where recalled fragments go: the
// processor decides what to hold and what a recall means.
package recall // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/recall"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Fragment is one held fragment.
type Fragment struct {
	// Encoded is its OTLP encoding (a TracesData), owned by the store
	// until recalled.
	Encoded []byte
	// Spans and Bytes are its span count and its OTLP bytes as the budget
	// counts them.
	Spans int
	Bytes int64
}

type entry struct {
	id pcommon.TraceID
	at int64 // Unix ns
	Fragment
	gone bool // recalled
}

// Store is one shard's hold; its owner serializes calls (the shard lock).
type Store struct {
	maxBytes int64
	window   int64 // ns
	queue    []*entry
	head     int
	byTrace  map[pcommon.TraceID][]*entry
	bytes    int64
	// Evicted counts the spans let go unrecalled (too old or no room).
	Evicted int64
}

// New is a store of at most maxBytes of encodings, each held for window ns.
func New(maxBytes, window int64) *Store {
	return &Store{maxBytes: maxBytes, window: window, byTrace: map[pcommon.TraceID][]*entry{}}
}

// Bytes is what the store holds.
func (s *Store) Bytes() int64 { return s.bytes }

// Hold keeps f of trace id, arrived at now (Unix ns); older fragments go
// first to make room. A fragment larger than the whole store is not held.
func (s *Store) Hold(id pcommon.TraceID, f Fragment, now int64) {
	s.Expire(now)
	size := int64(len(f.Encoded))
	if size > s.maxBytes {
		s.Evicted += int64(f.Spans)
		return
	}
	for s.bytes+size > s.maxBytes {
		s.evictOldest()
	}
	e := &entry{id: id, at: now, Fragment: f}
	s.queue = append(s.queue, e)
	s.byTrace[id] = append(s.byTrace[id], e)
	s.bytes += size
}

// Recall takes every fragment held for trace id, oldest first.
func (s *Store) Recall(id pcommon.TraceID) []Fragment {
	es, ok := s.byTrace[id]
	if !ok {
		return nil
	}
	delete(s.byTrace, id)
	out := make([]Fragment, 0, len(es))
	for _, e := range es {
		out = append(out, e.Fragment)
		s.bytes -= int64(len(e.Encoded))
		e.gone, e.Encoded = true, nil
	}
	return out
}

// Clear lets go everything held (counted).
func (s *Store) Clear() {
	for s.head < len(s.queue) {
		s.evictOldest()
	}
}

// Expire lets go what was held longer than the window.
func (s *Store) Expire(now int64) {
	for s.head < len(s.queue) && (s.queue[s.head].gone || now-s.queue[s.head].at > s.window) {
		s.evictOldest()
	}
}

// evictOldest lets the oldest entry go (counted unless it was recalled).
func (s *Store) evictOldest() {
	e := s.queue[s.head]
	s.queue[s.head] = nil
	s.head++
	if s.head > len(s.queue)/2 && s.head > 64 {
		s.queue = append(s.queue[:0], s.queue[s.head:]...)
		s.head = 0
	}
	if e.gone {
		return
	}
	s.bytes -= int64(len(e.Encoded))
	s.Evicted += int64(e.Spans)
	es := s.byTrace[e.id]
	for i, x := range es {
		if x == e {
			es = append(es[:i], es[i+1:]...)
			break
		}
	}
	if len(es) == 0 {
		delete(s.byTrace, e.id)
	} else {
		s.byTrace[e.id] = es
	}
}
