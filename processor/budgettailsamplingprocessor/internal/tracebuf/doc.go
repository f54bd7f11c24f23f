// Package tracebuf is the trace buffer of one shard: buffered traces in
// pages that never move (addressed by 32-bit refs, so the GC skips them),
// their FIFO lists (by arrival, by root arrival, handed over by peers), one
// index from trace ID to a buffered trace or a remembered decision, and the
// decision rings that remember the last decisions of each kind.
//
// It owns the shard's data structures and their accounting against the
// processor's bounds (spanmem.Totals). It must not know how traces are
// decided, how spans arrive or where kept spans go, and it has no lock: its
// owner holds one around every call.
package tracebuf
