package otlpwrite

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// randomValue fills v with a value of a random kind, nesting maps and
// slices up to depth.
func randomValue(r *rand.Rand, v pcommon.Value, depth int) {
	kinds := 8
	if depth <= 0 {
		kinds = 6
	}
	switch r.IntN(kinds) {
	case 0:
		v.SetStr(randomString(r))
	case 1:
		v.SetBool(r.IntN(2) == 0)
	case 2:
		v.SetInt(r.Int64() - math.MaxInt64/2)
	case 3:
		v.SetDouble(r.NormFloat64())
	case 4:
		v.SetEmptyBytes().FromRaw([]byte(randomString(r)))
	case 5:
		// an empty value
	case 6:
		m := v.SetEmptyMap()
		randomMap(r, m, r.IntN(4), depth-1)
	case 7:
		s := v.SetEmptySlice()
		for range r.IntN(4) {
			randomValue(r, s.AppendEmpty(), depth-1)
		}
	}
}

func randomString(r *rand.Rand) string {
	// Lengths across the one- and two-byte varint boundary.
	n := []int{0, 1, 5, 127, 128, 300}[r.IntN(6)]
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

func randomMap(r *rand.Rand, m pcommon.Map, n, depth int) {
	for i := range n {
		key := randomString(r)
		if r.IntN(2) == 0 {
			key = string(rune('a'+i)) + key
		}
		randomValue(r, m.PutEmpty(key), depth)
	}
}

func randomID(r *rand.Rand, id []byte) {
	if r.IntN(5) == 0 {
		return // empty
	}
	for i := range id {
		id[i] = byte(r.Uint32())
	}
}

func randomSpan(r *rand.Rand, span ptrace.Span) {
	var tid pcommon.TraceID
	var sid, pid pcommon.SpanID
	randomID(r, tid[:])
	randomID(r, sid[:])
	randomID(r, pid[:])
	span.SetTraceID(tid)
	span.SetSpanID(sid)
	span.SetParentSpanID(pid)
	if r.IntN(2) == 0 {
		span.TraceState().FromRaw("ot=th:8;rv:" + randomString(r))
	}
	span.SetName(randomString(r))
	span.SetKind(ptrace.SpanKind(r.IntN(6)))
	if r.IntN(4) > 0 {
		span.SetStartTimestamp(pcommon.Timestamp(r.Uint64()))
		span.SetEndTimestamp(pcommon.Timestamp(r.Uint64()))
	}
	randomMap(r, span.Attributes(), r.IntN(8), 2)
	span.SetDroppedAttributesCount(uint32(r.IntN(3)) * uint32(r.IntN(300)))
	for range r.IntN(3) {
		e := span.Events().AppendEmpty()
		e.SetName(randomString(r))
		e.SetTimestamp(pcommon.Timestamp(r.Uint64() * uint64(r.IntN(2))))
		randomMap(r, e.Attributes(), r.IntN(3), 1)
		e.SetDroppedAttributesCount(uint32(r.IntN(2)))
	}
	span.SetDroppedEventsCount(uint32(r.IntN(2)))
	for range r.IntN(3) {
		l := span.Links().AppendEmpty()
		randomID(r, tid[:])
		randomID(r, sid[:])
		l.SetTraceID(tid)
		l.SetSpanID(sid)
		l.TraceState().FromRaw(randomString(r))
		randomMap(r, l.Attributes(), r.IntN(3), 1)
		l.SetDroppedAttributesCount(uint32(r.IntN(2)))
		l.SetFlags(uint32(r.IntN(2)) * r.Uint32())
	}
	span.SetDroppedLinksCount(uint32(r.IntN(2)))
	span.Status().SetCode(ptrace.StatusCode(r.IntN(3)))
	span.Status().SetMessage(randomString(r))
	span.SetFlags(uint32(r.IntN(2)) * r.Uint32())
}

func randomTraces(r *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	for range 1 + r.IntN(2) {
		rs := td.ResourceSpans().AppendEmpty()
		randomMap(r, rs.Resource().Attributes(), r.IntN(5), 1)
		rs.Resource().SetDroppedAttributesCount(uint32(r.IntN(2)))
		rs.SetSchemaUrl(randomString(r))
		for range 1 + r.IntN(2) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(randomString(r))
			ss.Scope().SetVersion(randomString(r))
			randomMap(r, ss.Scope().Attributes(), r.IntN(3), 1)
			ss.Scope().SetDroppedAttributesCount(uint32(r.IntN(2)))
			ss.SetSchemaUrl(randomString(r))
			for range r.IntN(4) {
				randomSpan(r, ss.Spans().AppendEmpty())
			}
		}
	}
	return td
}

// encode writes td as a TracesData with this package.
func encode(td ptrace.Traces) []byte {
	var out []byte
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var body []byte
		body = AppendResourceField(body, 1, rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			var ssBody []byte
			ssBody = AppendScopeField(ssBody, 1, ss.Scope())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				ssBody = AppendHeader(ssBody, 2, SpanSize(spans.At(k)))
				ssBody = AppendSpan(ssBody, spans.At(k))
			}
			ssBody = AppendStringField(ssBody, 3, ss.SchemaUrl())
			body = AppendHeader(body, 2, len(ssBody))
			body = append(body, ssBody...)
		}
		body = AppendStringField(body, 3, rs.SchemaUrl())
		out = AppendHeader(out, 1, len(body))
		out = append(out, body...)
	}
	return out
}

// TestEncodingMatchesPdata: for random traces with every kind of field,
// what this package writes decodes (with pdata) to the same traces, and
// every size it reports is pdata's.
func TestEncodingMatchesPdata(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m ptrace.ProtoMarshaler
	var u ptrace.ProtoUnmarshaler
	for i := range 2000 {
		td := randomTraces(r)
		ours := encode(td)
		if got, want := len(ours), m.TracesSize(td); got != want {
			t.Fatalf("case %d: wrote %d bytes, pdata's size %d", i, got, want)
		}
		rss := td.ResourceSpans()
		for j := 0; j < rss.Len(); j++ {
			ss := rss.At(j).ScopeSpans()
			for k := 0; k < ss.Len(); k++ {
				spans := ss.At(k).Spans()
				for s := 0; s < spans.Len(); s++ {
					if got, want := SpanSize(spans.At(s)), m.SpanSize(spans.At(s)); got != want {
						t.Fatalf("case %d: span size %d, pdata's %d", i, got, want)
					}
				}
			}
		}
		back, err := u.UnmarshalTraces(ours)
		if err != nil {
			t.Fatalf("case %d: pdata cannot decode what was written: %v", i, err)
		}
		want, _ := m.MarshalTraces(td)
		got, _ := m.MarshalTraces(back)
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: decoded traces differ from the written ones", i)
		}
	}
}

// TestHiddenFieldsChangePdataSize: a field pdata keeps but does not show
// (a key's profiles string index) is not written, and pdata's size then
// differs from this package's: the difference callers check for.
func TestHiddenFieldsChangePdataSize(t *testing.T) {
	// A span whose one attribute carries key_strindex (KeyValue field 3).
	var kv []byte
	kv = protowire.AppendTag(kv, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "k")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendVarint(kv, 0)
	kv = protowire.AppendTag(kv, 3, protowire.VarintType)
	kv = protowire.AppendVarint(kv, 7)
	var span []byte
	span = protowire.AppendTag(span, 9, protowire.BytesType)
	span = protowire.AppendBytes(span, kv)
	var ss, rs, req []byte
	ss = protowire.AppendTag(ss, 2, protowire.BytesType)
	ss = protowire.AppendBytes(ss, span)
	rs = protowire.AppendTag(rs, 2, protowire.BytesType)
	rs = protowire.AppendBytes(rs, ss)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, rs)
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(req)
	if err != nil {
		t.Fatal(err)
	}
	var m ptrace.ProtoMarshaler
	s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	if SpanSize(s) == m.SpanSize(s) {
		t.Fatalf("a hidden field went unnoticed: both sizes %d", SpanSize(s))
	}
	if len(encode(td)) == m.TracesSize(td) {
		t.Fatal("a hidden field went unnoticed in the request's size")
	}
}

func TestVarintSize(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 16383, 16384, 1<<63 - 1, math.MaxUint64} {
		if got, want := VarintSize(x), protowire.SizeVarint(x); got != want {
			t.Errorf("VarintSize(%d) = %d, want %d", x, got, want)
		}
	}
}
