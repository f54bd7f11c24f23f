package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"encoding/binary"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A handoff is an OTLP trace request. Each ResourceSpans carries what the
// receiver needs besides the spans in one resource attribute, read and
// removed before the spans go anywhere: which trace, what kind of record,
// how long ago its first span and its root arrived, and for a decision
// (a ResourceSpans without spans) the decision. Ages rather than times, so
// that clock offsets between samplers do not matter.
const handoffAttribute = "otelcol_cost.handoff"

type recordKind byte

const (
	// recordTrace: a buffered trace moving to its new owner.
	recordTrace recordKind = iota + 1
	// recordFragment: a fragment that arrived at a sampler not owning it.
	recordFragment
	// recordDecision: a decision made by the trace's previous owner.
	recordDecision
)

const wireVersion = 1

type handoffRecord struct {
	kind    recordKind
	hops    uint8
	age     time.Duration // since the trace's first span arrived (decision: since it was made)
	hasRoot bool
	rootAge time.Duration
	sampled bool
	// decision is a recordDecision's decision (its at is set on receipt).
	decision decided
}

// handoffItem is what waits in a peer's queue.
type handoffItem struct {
	kind        recordKind
	id          pcommon.TraceID
	chunks      [][]byte // OTLP encodings: recordTrace, recordFragment
	arrived     time.Time
	rootArrived time.Time // zero: no root yet
	spans       int
	hops        uint8
	decision    decided // recordDecision
	sampled     bool
}

// encode appends the item's spans to out, each ResourceSpans marked.
func (it *handoffItem) encode(out ptrace.Traces, now time.Time, u *ptrace.ProtoUnmarshaler) error {
	rec := handoffRecord{kind: it.kind, hops: it.hops, age: now.Sub(it.arrived), sampled: it.sampled, decision: it.decision}
	if !it.rootArrived.IsZero() {
		rec.hasRoot, rec.rootAge = true, now.Sub(it.rootArrived)
	}
	if it.kind == recordDecision {
		rec.age = now.Sub(time.Unix(0, it.decision.at))
	}
	raw := rec.marshal(it.id)
	mark := func(td ptrace.Traces) {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rss.At(i).Resource().Attributes().PutEmptyBytes(handoffAttribute).FromRaw(raw)
		}
		rss.MoveAndAppendTo(out.ResourceSpans())
	}
	switch {
	case it.chunks != nil:
		for _, c := range it.chunks {
			td, err := u.UnmarshalTraces(c)
			if err != nil {
				return err
			}
			mark(td)
		}
	case it.kind == recordDecision:
		td := ptrace.NewTraces()
		td.ResourceSpans().AppendEmpty()
		mark(td)
	}
	return nil
}

func (r *handoffRecord) marshal(id pcommon.TraceID) []byte {
	b := make([]byte, 0, 64)
	b = append(b, wireVersion, byte(r.kind), r.hops)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(max(r.age, 0)))
	rootAge := int64(-1)
	if r.hasRoot {
		rootAge = int64(max(r.rootAge, 0))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(rootAge))
	if r.kind == recordDecision {
		sampledByte := byte(0)
		if r.sampled {
			sampledByte = 1
		}
		b = append(b, sampledByte, byte(r.decision.class))
		b = binary.BigEndian.AppendUint16(b, uint16(r.decision.rule))
		b = binary.BigEndian.AppendUint64(b, r.decision.th.Unsigned())
		b = append(b, r.decision.service...)
	}
	return b
}

const recordHeader = 3 + 16 + 8 + 8

func unmarshalRecord(b []byte) (pcommon.TraceID, handoffRecord, bool) {
	var id pcommon.TraceID
	var r handoffRecord
	if len(b) < recordHeader || b[0] != wireVersion {
		return id, r, false
	}
	r.kind, r.hops = recordKind(b[1]), b[2]
	copy(id[:], b[3:19])
	r.age = time.Duration(binary.BigEndian.Uint64(b[19:27]))
	if rootAge := int64(binary.BigEndian.Uint64(b[27:35])); rootAge >= 0 {
		r.hasRoot, r.rootAge = true, time.Duration(rootAge)
	}
	if r.age < 0 || id.IsEmpty() {
		return id, r, false
	}
	switch r.kind {
	case recordTrace, recordFragment:
		return id, r, len(b) == recordHeader
	case recordDecision:
		rest := b[recordHeader:]
		if len(rest) < 12 || rest[0] > 1 || reason(rest[1]) >= numReasons {
			return id, r, false
		}
		r.sampled = rest[0] == 1
		r.decision.class = reason(rest[1])
		r.decision.rule = int16(binary.BigEndian.Uint16(rest[2:4]))
		th, err := sampling.UnsignedToThreshold(binary.BigEndian.Uint64(rest[4:12]))
		if err != nil {
			return id, r, false
		}
		r.decision.th = th
		r.decision.service = string(rest[12:])
		return id, r, true
	}
	return id, r, false
}

// takeRecords reads and removes every ResourceSpans' record; decisions'
// empty ResourceSpans go. Spans whose record is missing or unreadable stay
// and count as malformed: they are processed as if they had just arrived.
func takeRecords(td ptrace.Traces) (map[pcommon.TraceID]handoffRecord, int) {
	records := map[pcommon.TraceID]handoffRecord{}
	malformed := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		attrs := rs.Resource().Attributes()
		v, ok := attrs.Get(handoffAttribute)
		var id pcommon.TraceID
		var rec handoffRecord
		if ok && v.Type() == pcommon.ValueTypeBytes {
			id, rec, ok = unmarshalRecord(v.Bytes().AsRaw())
		} else {
			ok = false
		}
		attrs.Remove(handoffAttribute)
		if !ok {
			malformed += spanCount(rs)
			return false
		}
		if prev, seen := records[id]; !seen || rec.kind == recordDecision || (prev.kind != recordDecision && rec.age > prev.age) {
			records[id] = rec
		}
		return rec.kind == recordDecision
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
