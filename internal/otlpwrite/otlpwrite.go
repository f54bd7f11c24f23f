// Package otlpwrite writes the OTLP protobuf encoding of pdata spans and of
// their resource and scope, one message at a time, so that a span can be
// written straight into the buffer that keeps it instead of being marshaled
// with its whole request and copied out.
//
// Fields are written in field-number order (pdata writes them in reverse;
// both are valid encodings of the same message). Sizes equal pdata's for
// every field its API shows. pdata also holds fields its API does not show
// (a resource's entity references, a profiles string index on a key or a
// value): those are not written, and the sizes then differ from
// ptrace.ProtoMarshaler's. Callers compare the two to know (see
// ResourceSpansSize).
package otlpwrite // import "github.com/otelcol-cost/otelcol-cost/internal/otlpwrite"

import (
	"encoding/binary"
	"math"
	"math/bits"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Wire types and the tags this package writes: field number << 3 | type.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func tag(field, wire int) uint64 { return uint64(field<<3 | wire) }

// VarintSize is the size of x as a protobuf varint.
func VarintSize(x uint64) int { return (bits.Len64(x|1)*9 + 64) / 64 }

// FieldSize is the size of a length-delimited field with a one-byte tag
// whose body is n bytes.
func FieldSize(n int) int { return 1 + VarintSize(uint64(n)) + n }

func appendVarint(b []byte, x uint64) []byte {
	if x < 0x80 {
		return append(b, byte(x))
	}
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// AppendHeader appends the tag and length of field, a length-delimited
// field whose body is n bytes.
func AppendHeader(b []byte, field, n int) []byte {
	b = appendVarint(b, tag(field, wireBytes))
	return appendVarint(b, uint64(n))
}

func appendString(b []byte, field int, s string) []byte {
	if s == "" {
		return b
	}
	b = AppendHeader(b, field, len(s))
	return append(b, s...)
}

func stringSize(s string) int {
	if s == "" {
		return 0
	}
	return FieldSize(len(s))
}

func appendUint(b []byte, field int, x uint64) []byte {
	if x == 0 {
		return b
	}
	b = appendVarint(b, tag(field, wireVarint))
	return appendVarint(b, x)
}

func uintSize(x uint64) int {
	if x == 0 {
		return 0
	}
	return 1 + VarintSize(x)
}

func appendFixed64(b []byte, field int, x uint64) []byte {
	if x == 0 {
		return b
	}
	b = appendVarint(b, tag(field, wireFixed64))
	return binary.LittleEndian.AppendUint64(b, x)
}

func fixed64Size(x uint64) int {
	if x == 0 {
		return 0
	}
	return 9
}

// appendID writes an ID field; an empty ID is written as an empty field,
// as pdata does.
func appendID(b []byte, field int, id []byte, empty bool) []byte {
	if empty {
		return AppendHeader(b, field, 0)
	}
	b = AppendHeader(b, field, len(id))
	return append(b, id...)
}

func idSize(n int, empty bool) int {
	if empty {
		return 2
	}
	return FieldSize(n)
}

// Span fields.
const (
	spanTraceID       = 1
	spanSpanID        = 2
	spanTraceState    = 3
	spanParentSpanID  = 4
	spanName          = 5
	spanKind          = 6
	spanStart         = 7
	spanEnd           = 8
	spanAttributes    = 9
	spanDroppedAttrs  = 10
	spanEvents        = 11
	spanDroppedEvents = 12
	spanLinks         = 13
	spanDroppedLinks  = 14
	spanStatus        = 15
	spanFlags         = 16
)

// SpanSize is the size of span's encoding (its body, without tag and
// length).
func SpanSize(span ptrace.Span) int {
	tid, sid, pid := span.TraceID(), span.SpanID(), span.ParentSpanID()
	n := idSize(len(tid), tid.IsEmpty()) + idSize(len(sid), sid.IsEmpty()) + idSize(len(pid), pid.IsEmpty())
	n += stringSize(span.TraceState().AsRaw())
	n += stringSize(span.Name())
	n += uintSize(uint64(span.Kind()))
	n += fixed64Size(uint64(span.StartTimestamp())) + fixed64Size(uint64(span.EndTimestamp()))
	n += attributesSize(span.Attributes())
	n += uintSize(uint64(span.DroppedAttributesCount()))
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		n += FieldSize(eventSize(events.At(i)))
	}
	n += uintSize(uint64(span.DroppedEventsCount()))
	links := span.Links()
	for i := 0; i < links.Len(); i++ {
		n += FieldSize(linkSize(links.At(i)))
	}
	n += uintSize(uint64(span.DroppedLinksCount()))
	n += FieldSize(statusSize(span.Status()))
	if span.Flags() != 0 {
		n += 2 + 4 // a two-byte tag
	}
	return n
}

// AppendSpan appends span's encoding (its body: the caller writes the tag
// and length, size being SpanSize's).
func AppendSpan(b []byte, span ptrace.Span) []byte {
	tid, sid, pid := span.TraceID(), span.SpanID(), span.ParentSpanID()
	b = appendID(b, spanTraceID, tid[:], tid.IsEmpty())
	b = appendID(b, spanSpanID, sid[:], sid.IsEmpty())
	b = appendString(b, spanTraceState, span.TraceState().AsRaw())
	b = appendID(b, spanParentSpanID, pid[:], pid.IsEmpty())
	b = appendString(b, spanName, span.Name())
	b = appendUint(b, spanKind, uint64(span.Kind()))
	b = appendFixed64(b, spanStart, uint64(span.StartTimestamp()))
	b = appendFixed64(b, spanEnd, uint64(span.EndTimestamp()))
	b = appendAttributes(b, spanAttributes, span.Attributes())
	b = appendUint(b, spanDroppedAttrs, uint64(span.DroppedAttributesCount()))
	events := span.Events()
	for i := 0; i < events.Len(); i++ {
		b = appendEvent(b, events.At(i))
	}
	b = appendUint(b, spanDroppedEvents, uint64(span.DroppedEventsCount()))
	links := span.Links()
	for i := 0; i < links.Len(); i++ {
		b = appendLink(b, links.At(i))
	}
	b = appendUint(b, spanDroppedLinks, uint64(span.DroppedLinksCount()))
	st := span.Status()
	b = AppendHeader(b, spanStatus, statusSize(st))
	b = appendString(b, 2, st.Message())
	b = appendUint(b, 3, uint64(st.Code()))
	if f := span.Flags(); f != 0 {
		b = appendVarint(b, tag(spanFlags, wireFixed32))
		b = binary.LittleEndian.AppendUint32(b, f)
	}
	return b
}

func statusSize(st ptrace.Status) int {
	return stringSize(st.Message()) + uintSize(uint64(st.Code()))
}

// Event fields: time 1, name 2, attributes 3, dropped attributes 4.
func eventSize(e ptrace.SpanEvent) int {
	return fixed64Size(uint64(e.Timestamp())) + stringSize(e.Name()) +
		attributesSize(e.Attributes()) + uintSize(uint64(e.DroppedAttributesCount()))
}

func appendEvent(b []byte, e ptrace.SpanEvent) []byte {
	b = AppendHeader(b, spanEvents, eventSize(e))
	b = appendFixed64(b, 1, uint64(e.Timestamp()))
	b = appendString(b, 2, e.Name())
	b = appendAttributes(b, 3, e.Attributes())
	return appendUint(b, 4, uint64(e.DroppedAttributesCount()))
}

// Link fields: trace ID 1, span ID 2, trace state 3, attributes 4,
// dropped attributes 5, flags 6 (fixed32).
func linkSize(l ptrace.SpanLink) int {
	tid, sid := l.TraceID(), l.SpanID()
	n := idSize(len(tid), tid.IsEmpty()) + idSize(len(sid), sid.IsEmpty())
	n += stringSize(l.TraceState().AsRaw()) + attributesSize(l.Attributes()) + uintSize(uint64(l.DroppedAttributesCount()))
	if l.Flags() != 0 {
		n += 5
	}
	return n
}

func appendLink(b []byte, l ptrace.SpanLink) []byte {
	b = AppendHeader(b, spanLinks, linkSize(l))
	tid, sid := l.TraceID(), l.SpanID()
	b = appendID(b, 1, tid[:], tid.IsEmpty())
	b = appendID(b, 2, sid[:], sid.IsEmpty())
	b = appendString(b, 3, l.TraceState().AsRaw())
	b = appendAttributes(b, 4, l.Attributes())
	b = appendUint(b, 5, uint64(l.DroppedAttributesCount()))
	if f := l.Flags(); f != 0 {
		b = appendVarint(b, tag(6, wireFixed32))
		b = binary.LittleEndian.AppendUint32(b, f)
	}
	return b
}

// attributesSize is the size of m as a repeated KeyValue field.
func attributesSize(m pcommon.Map) int {
	n := 0
	for k, v := range m.All() {
		n += FieldSize(keyValueSize(k, v))
	}
	return n
}

func appendAttributes(b []byte, field int, m pcommon.Map) []byte {
	for k, v := range m.All() {
		b = appendKeyValue(b, field, k, v)
	}
	return b
}

// KeyValue fields: key 1, value 2 (always written, an AnyValue).
func keyValueSize(k string, v pcommon.Value) int {
	return stringSize(k) + FieldSize(valueSize(v))
}

func appendKeyValue(b []byte, field int, k string, v pcommon.Value) []byte {
	if v.Type() == pcommon.ValueTypeStr {
		// Most attributes: one look at the value.
		s := v.Str()
		vs := FieldSize(len(s))
		b = AppendHeader(b, field, stringSize(k)+FieldSize(vs))
		b = appendString(b, 1, k)
		b = AppendHeader(b, 2, vs)
		b = AppendHeader(b, 1, len(s))
		return append(b, s...)
	}
	vs := valueSize(v)
	b = AppendHeader(b, field, stringSize(k)+FieldSize(vs))
	b = appendString(b, 1, k)
	b = AppendHeader(b, 2, vs)
	return appendValue(b, v)
}

// AnyValue fields, one of: string 1, bool 2, int 3, double 4, array 5,
// key-value list 6, bytes 7. A value of each kind is written even when it
// is its kind's zero, as pdata does.
func valueSize(v pcommon.Value) int {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return FieldSize(len(v.Str()))
	case pcommon.ValueTypeBool:
		return 2
	case pcommon.ValueTypeInt:
		return 1 + VarintSize(uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		return 9
	case pcommon.ValueTypeSlice:
		return FieldSize(sliceSize(v.Slice()))
	case pcommon.ValueTypeMap:
		return FieldSize(attributesSize(v.Map()))
	case pcommon.ValueTypeBytes:
		return FieldSize(v.Bytes().Len())
	}
	return 0
}

func appendValue(b []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		s := v.Str()
		b = AppendHeader(b, 1, len(s))
		return append(b, s...)
	case pcommon.ValueTypeBool:
		b = appendVarint(b, tag(2, wireVarint))
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case pcommon.ValueTypeInt:
		b = appendVarint(b, tag(3, wireVarint))
		return appendVarint(b, uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		b = appendVarint(b, tag(4, wireFixed64))
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Double()))
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		b = AppendHeader(b, 5, sliceSize(s))
		for i := 0; i < s.Len(); i++ {
			e := s.At(i)
			b = AppendHeader(b, 1, valueSize(e))
			b = appendValue(b, e)
		}
		return b
	case pcommon.ValueTypeMap:
		m := v.Map()
		b = AppendHeader(b, 6, attributesSize(m))
		return appendAttributes(b, 1, m)
	case pcommon.ValueTypeBytes:
		bs := v.Bytes()
		b = AppendHeader(b, 7, bs.Len())
		for _, c := range bs.All() {
			b = append(b, c)
		}
		return b
	}
	return b
}

// sliceSize is the size of an ArrayValue: repeated AnyValue, field 1.
func sliceSize(s pcommon.Slice) int {
	n := 0
	for i := 0; i < s.Len(); i++ {
		n += FieldSize(valueSize(s.At(i)))
	}
	return n
}

// ResourceSize is the size of res's encoding: attributes 1, dropped
// attributes 2 (entity references, 3, are not visible: see the package
// comment).
func ResourceSize(res pcommon.Resource) int {
	return attributesSize(res.Attributes()) + uintSize(uint64(res.DroppedAttributesCount()))
}

// AppendResourceField appends res as field, with its tag and length.
func AppendResourceField(b []byte, field int, res pcommon.Resource) []byte {
	b = AppendHeader(b, field, ResourceSize(res))
	b = appendAttributes(b, 1, res.Attributes())
	return appendUint(b, 2, uint64(res.DroppedAttributesCount()))
}

// ScopeSize is the size of an InstrumentationScope: name 1, version 2,
// attributes 3, dropped attributes 4.
func ScopeSize(s pcommon.InstrumentationScope) int {
	return stringSize(s.Name()) + stringSize(s.Version()) +
		attributesSize(s.Attributes()) + uintSize(uint64(s.DroppedAttributesCount()))
}

// AppendScopeField appends s as field, with its tag and length.
func AppendScopeField(b []byte, field int, s pcommon.InstrumentationScope) []byte {
	b = AppendHeader(b, field, ScopeSize(s))
	b = appendString(b, 1, s.Name())
	b = appendString(b, 2, s.Version())
	b = appendAttributes(b, 3, s.Attributes())
	return appendUint(b, 4, uint64(s.DroppedAttributesCount()))
}

// AppendStringField appends a string field; nothing when s is empty.
func AppendStringField(b []byte, field int, s string) []byte { return appendString(b, field, s) }
