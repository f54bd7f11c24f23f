package otlpwire

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
)

// Fragments that differ in their resource or scope stay apart; equal ones
// join whatever their order, and no span is lost or doubled.
func TestKeptMergerGroupsByResourceAndScope(t *testing.T) {
	build := func(service, scope string, spans ...byte) []byte {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		for _, b := range spans {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{b})
			s.SetSpanID(pcommon.SpanID{b})
		}
		var m ptrace.ProtoMarshaler
		out, err := m.MarshalTraces(td)
		require.NoError(t, err)
		return out
	}
	m := NewMerger()
	m.Add(build("a", "http", 1, 2))
	m.Add(build("b", "http", 3))
	m.Add(build("a", "db", 4))
	m.Add(build("a", "http", 5))
	encoded, from, err := m.Merged()
	require.NoError(t, err)
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(encoded)
	require.NoError(t, err)

	var got []string
	i := 0
	spanwalk.Traces(td, func(rs ptrace.ResourceSpans, s ptrace.Span) {
		svc, _ := rs.Resource().Attributes().Get("service.name")
		got = append(got, svc.Str()+"/"+string('0'+rune(s.TraceID()[0]))+"/"+fmt.Sprint(from[i]+1))
		i++
	})
	assert.Equal(t, []string{"a/1/1", "a/2/1", "a/5/4", "a/4/3", "b/3/2"}, got)
	assert.Equal(t, 2, td.ResourceSpans().Len())
	assert.Equal(t, 2, td.ResourceSpans().At(0).ScopeSpans().Len(), "a's http and db scopes")
}
