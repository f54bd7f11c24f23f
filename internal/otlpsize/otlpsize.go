// Package otlpsize attributes a request's OTLP protobuf bytes to its spans
// with pdata's size API, so that the bytes of all spans add up exactly to
// ptrace.ProtoMarshaler.TracesSize of the request.
package otlpsize

import "go.opentelemetry.io/collector/pdata/ptrace"

var marshaler ptrace.ProtoMarshaler

// Field is the encoded size of an embedded message of size n: one tag byte,
// the length varint, the message.
func Field(n int) int {
	return 1 + varintSize(uint64(n)) + n
}

func varintSize(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// ResourceSpansField is what rs adds to the request it is in.
func ResourceSpansField(rs ptrace.ResourceSpans) int {
	return Field(marshaler.ResourceSpansSize(rs))
}

// SpanField is what span adds to its ScopeSpans.
func SpanField(span ptrace.Span) int {
	return Field(marshaler.SpanSize(span))
}

// Scratch holds buffers reused across calls; not safe for concurrent use.
type Scratch struct {
	spanBytes  []int
	scopeBytes []int
}

// Attribute calls f for every span of rs with the span's bytes: its own
// encoded size plus an even share of its scope's and its resource's
// envelope (the remainder of an uneven split goes to the first spans).
// Envelope bytes of scopes without spans are shared by the resource's spans.
func (s *Scratch) Attribute(rs ptrace.ResourceSpans, f func(span ptrace.Span, bytes int)) {
	sss := rs.ScopeSpans()
	total := 0
	scopesTotal := 0
	s.scopeBytes = s.scopeBytes[:0]
	for j := 0; j < sss.Len(); j++ {
		b := 0
		if n := sss.At(j).Spans().Len(); n > 0 {
			total += n
			b = Field(marshaler.ScopeSpansSize(sss.At(j)))
			scopesTotal += b
		}
		s.scopeBytes = append(s.scopeBytes, b)
	}
	if total == 0 {
		return
	}
	resShare := evenSplit{overhead: ResourceSpansField(rs) - scopesTotal, n: total}
	idx := 0
	for j := 0; j < sss.Len(); j++ {
		ss := sss.At(j)
		spans := ss.Spans()
		if spans.Len() == 0 {
			continue
		}
		s.spanBytes = s.spanBytes[:0]
		direct := 0
		for k := 0; k < spans.Len(); k++ {
			b := SpanField(spans.At(k))
			s.spanBytes = append(s.spanBytes, b)
			direct += b
		}
		scopeShare := evenSplit{overhead: s.scopeBytes[j] - direct, n: spans.Len()}
		for k := 0; k < spans.Len(); k++ {
			f(spans.At(k), s.spanBytes[k]+scopeShare.at(k)+resShare.at(idx))
			idx++
		}
	}
}

type evenSplit struct{ overhead, n int }

func (e evenSplit) at(i int) int {
	share := e.overhead / e.n
	if i < e.overhead%e.n {
		share++
	}
	return share
}
