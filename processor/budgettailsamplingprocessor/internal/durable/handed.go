package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

// Handed is what a sampler queued for another one (a fragment proxied to
// the sampler that owns its trace, or a buffered trace passed on) until
// the peer took it or it came back. It holds the log at its arrival
// meanwhile (Retain keeps its segment), so that a crash replays it.
type Handed struct {
	l    *Log
	id   [16]byte
	at   int64
	mark bool
}

// Hand holds the log at arrived (Unix ns) for what of trace id is queued
// for a peer. With mark (a fragment the caller writes with AddHanded),
// Settled marks it so that replay leaves it out. Without (a buffered trace
// passed on, whose fragments are in the log already: a done mark would
// also hide them should the trace come back with its old arrivals), it is
// replayed while its segments remain: sent at least once.
func (l *Log) Hand(id [16]byte, arrived int64, mark bool) *Handed {
	h := &Handed{l: l, id: id, at: arrived, mark: mark}
	l.handed.Hold(h, arrived)
	return h
}

// Settled: the peer took it, or it came back into the buffer and was
// written again. The mark goes with the next write: lost in a crash, the
// fragment is replayed and handed on again.
func (h *Handed) Settled() {
	if h.mark {
		b := h.l.NewBatch()
		b.AddSettled(h.id, h.at)
		h.l.Append(b)
		h.l.Free(b)
	}
	h.l.handed.Release(h)
}

// Cancel lets go of the hold of what was not queued after all; nil does
// nothing.
func (h *Handed) Cancel() {
	if h != nil {
		h.l.handed.Release(h)
	}
}
