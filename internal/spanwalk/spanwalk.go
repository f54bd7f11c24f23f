// Package spanwalk visits the spans of pdata traces.
package spanwalk

import "go.opentelemetry.io/collector/pdata/ptrace"

// ResourceSpans calls f for every span of rs, in order.
func ResourceSpans(rs ptrace.ResourceSpans, f func(ptrace.Span)) {
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len(); j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			f(spans.At(k))
		}
	}
}

// Traces calls f for every span of td with its ResourceSpans, in order.
func Traces(td ptrace.Traces, f func(ptrace.ResourceSpans, ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		ResourceSpans(rs, func(s ptrace.Span) { f(rs, s) })
	}
}
