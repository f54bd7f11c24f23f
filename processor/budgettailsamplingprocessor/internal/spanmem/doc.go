// Package spanmem owns the memory that holds buffered span encodings: how a
// fragment is stored (Codec: as is, or S2-compressed), the slabs that hold a
// request's root-carrying fragments in one allocation (Slab, Chunk), the
// arena that keeps slabs outside the Go heap with buffer_memory: mapped
// (Arena), and the processor-wide totals that max_traces and
// max_buffered_bytes bound (Totals).
//
// It knows bytes, holds and bounds. It must not know traces, decisions or
// OTLP: what a chunk's bytes mean is the caller's.
package spanmem
