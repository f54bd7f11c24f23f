package handoff // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"

import (
	"encoding/binary"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// A handoff is an OTLP trace request. Each ResourceSpans carries what the
// receiver needs besides the spans in one resource attribute, read and
// removed before the spans go anywhere: which trace, what kind of record,
// how long ago its first span and its root arrived, and for a decision
// (a ResourceSpans without spans) the decision. Ages rather than times, so
// that clock offsets between samplers do not matter.
const Attribute = "otelcol_cost.handoff"

// Kind is what a handoff record carries.
type Kind byte

const (
	// KindTrace: a buffered trace moving to its new owner.
	KindTrace Kind = iota + 1
	// KindFragment: a fragment that arrived at a sampler not owning it.
	KindFragment
	// KindDecision: a decision made by the trace's previous owner.
	KindDecision
)

const wireVersion = 1

// Record is what a ResourceSpans of a handoff says besides its spans.
type Record struct {
	Kind    Kind
	Hops    uint8
	Age     time.Duration // since the trace's first span arrived (decision: since it was made)
	HasRoot bool
	RootAge time.Duration
	Sampled bool
	// Decision is a KindDecision's decision (its At is set on receipt).
	Decision traceinfo.Decided
}

// Item is what waits in a peer's queue.
type Item struct {
	Kind        Kind
	ID          pcommon.TraceID
	Chunks      [][]byte // OTLP encodings: KindTrace, KindFragment
	Arrived     time.Time
	RootArrived time.Time // zero: no root yet
	Spans       int
	Hops        uint8
	Decision    traceinfo.Decided // KindDecision
	Sampled     bool
	// Settled, when set, is called once the item needs this sampler no
	// more: the peer took it, or it came back (Sampler.Receive returned).
	Settled func()
}

// encode appends the item's spans to out, each ResourceSpans marked.
func (it *Item) encode(out ptrace.Traces, now time.Time, u *ptrace.ProtoUnmarshaler) error {
	rec := Record{Kind: it.Kind, Hops: it.Hops, Age: now.Sub(it.Arrived), Sampled: it.Sampled, Decision: it.Decision}
	if !it.RootArrived.IsZero() {
		rec.HasRoot, rec.RootAge = true, now.Sub(it.RootArrived)
	}
	if it.Kind == KindDecision {
		rec.Age = now.Sub(time.Unix(0, it.Decision.At))
	}
	raw := rec.marshal(it.ID)
	mark := func(td ptrace.Traces) {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rss.At(i).Resource().Attributes().PutEmptyBytes(Attribute).FromRaw(raw)
		}
		rss.MoveAndAppendTo(out.ResourceSpans())
	}
	switch {
	case it.Chunks != nil:
		for _, c := range it.Chunks {
			td, err := u.UnmarshalTraces(c)
			if err != nil {
				return err
			}
			mark(td)
		}
	case it.Kind == KindDecision:
		td := ptrace.NewTraces()
		td.ResourceSpans().AppendEmpty()
		mark(td)
	}
	return nil
}

func (r *Record) marshal(id pcommon.TraceID) []byte {
	b := make([]byte, 0, 64)
	b = append(b, wireVersion, byte(r.Kind), r.Hops)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(max(r.Age, 0)))
	rootAge := int64(-1)
	if r.HasRoot {
		rootAge = int64(max(r.RootAge, 0))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(rootAge))
	if r.Kind == KindDecision {
		sampledByte := byte(0)
		if r.Sampled {
			sampledByte = 1
		}
		b = append(b, sampledByte, byte(r.Decision.Class))
		b = binary.BigEndian.AppendUint16(b, uint16(r.Decision.Rule))
		b = binary.BigEndian.AppendUint64(b, r.Decision.Th.Unsigned())
		b = append(b, r.Decision.Service...)
	}
	return b
}

const recordHeader = 3 + 16 + 8 + 8

func unmarshalRecord(b []byte) (pcommon.TraceID, Record, bool) {
	var id pcommon.TraceID
	var r Record
	if len(b) < recordHeader || b[0] != wireVersion {
		return id, r, false
	}
	r.Kind, r.Hops = Kind(b[1]), b[2]
	copy(id[:], b[3:19])
	r.Age = time.Duration(binary.BigEndian.Uint64(b[19:27]))
	if rootAge := int64(binary.BigEndian.Uint64(b[27:35])); rootAge >= 0 {
		r.HasRoot, r.RootAge = true, time.Duration(rootAge)
	}
	if r.Age < 0 || id.IsEmpty() {
		return id, r, false
	}
	switch r.Kind {
	case KindTrace, KindFragment:
		return id, r, len(b) == recordHeader
	case KindDecision:
		rest := b[recordHeader:]
		if len(rest) < 12 || rest[0] > 1 || traceinfo.Reason(rest[1]) >= traceinfo.NumReasons {
			return id, r, false
		}
		r.Sampled = rest[0] == 1
		r.Decision.Class = traceinfo.Reason(rest[1])
		r.Decision.Rule = int16(binary.BigEndian.Uint16(rest[2:4]))
		th, err := sampling.UnsignedToThreshold(binary.BigEndian.Uint64(rest[4:12]))
		if err != nil {
			return id, r, false
		}
		r.Decision.Th = th
		r.Decision.Service = string(rest[12:])
		return id, r, true
	}
	return id, r, false
}

// TakeRecords reads and removes every ResourceSpans' record; decisions'
// empty ResourceSpans go. Spans whose record is missing or unreadable stay
// and count as malformed: they are processed as if they had just arrived.
func TakeRecords(td ptrace.Traces) (map[pcommon.TraceID]Record, int) {
	records := map[pcommon.TraceID]Record{}
	malformed := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		attrs := rs.Resource().Attributes()
		v, ok := attrs.Get(Attribute)
		var id pcommon.TraceID
		var rec Record
		if ok && v.Type() == pcommon.ValueTypeBytes {
			id, rec, ok = unmarshalRecord(v.Bytes().AsRaw())
		} else {
			ok = false
		}
		attrs.Remove(Attribute)
		if !ok {
			malformed += spanCount(rs)
			return false
		}
		if prev, seen := records[id]; !seen || rec.Kind == KindDecision || (prev.Kind != KindDecision && rec.Age > prev.Age) {
			records[id] = rec
		}
		return rec.Kind == KindDecision
	})
	return records, malformed
}

func spanCount(rs ptrace.ResourceSpans) int {
	n := 0
	for i := 0; i < rs.ScopeSpans().Len(); i++ {
		n += rs.ScopeSpans().At(i).Spans().Len()
	}
	return n
}
