package rules

import (
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func mustRules(t *testing.T, cfgs ...Config) *Set {
	t.Helper()
	rs, err := Compile(cfgs, component.TelemetrySettings{Logger: zap.NewNop()})
	require.NoError(t, err)
	return rs
}

// oneSpan is a request of one root span of service.
func oneSpan(service string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span.SetSpanID(pcommon.SpanID{1})
	span.SetName("GET /")
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Unix(0, 0)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Unix(0, int64(time.Millisecond))))
	return td
}

func TestTraceConditionVocabulary(t *testing.T) {
	s := &traceinfo.Summary{Spans: 600, Dur: 2500 * time.Millisecond}
	for text, want := range map[string]bool{
		"trace.duration > 2s":        true,
		"trace.duration >= 2500ms":   true,
		"trace.duration < 1s":        false,
		"trace.span_count > 500":     true,
		"trace.span_count == 600":    true,
		"trace.span_count != 600":    false,
		" trace.span_count <= 599 ":  false,
		"trace.duration == 2.5s":     true,
		"trace.duration != 2500ms  ": false,
	} {
		c, err := parseTraceCondition(text)
		require.NoError(t, err, text)
		assert.Equal(t, want, c.holds(s), text)
	}
}

// The native matcher answers exactly as OTTL does, on every shape it takes.
func TestFastMatcherAgreesWithOTTL(t *testing.T) {
	conds := []string{
		`attributes["k"] == "v"`, `span.attributes["k"] == "v"`, `attributes["k"] != "v"`,
		`resource.attributes["r"] == "x"`, `resource.attributes["r"] != "x"`,
		`name == "GET /"`, `span.name != "GET /"`, `attributes["k"] == ""`, `attributes["k"] != ""`,
		`attributes["n"] == "5"`, `attributes["missing"] != "v"`,
	}
	td := ptrace.NewTraces()
	var spans []ptrace.Span
	var owners []ptrace.ResourceSpans
	for i, setup := range []func(r pcommon.Map, s ptrace.Span){
		func(r pcommon.Map, s ptrace.Span) {
			s.Attributes().PutStr("k", "v")
			r.PutStr("r", "x")
			s.SetName("GET /")
		},
		func(r pcommon.Map, s ptrace.Span) {
			s.Attributes().PutStr("k", "w")
			r.PutStr("r", "y")
			s.SetName("POST /")
		},
		func(r pcommon.Map, s ptrace.Span) { s.Attributes().PutInt("n", 5); r.PutInt("r", 1) },
		func(r pcommon.Map, s ptrace.Span) { s.Attributes().PutStr("k", "") },
		func(r pcommon.Map, s ptrace.Span) { s.Attributes().PutBool("k", true) },
		func(r pcommon.Map, s ptrace.Span) {},
	} {
		rs := td.ResourceSpans().AppendEmpty()
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		setup(rs.Resource().Attributes(), span)
		span.SetSpanID(pcommon.SpanID{byte(i + 1)})
		spans = append(spans, span)
		owners = append(owners, rs)
	}
	for _, text := range conds {
		fast := compileFast(text)
		require.NotNil(t, fast, text)
		rs := mustRules(t, Config{Name: "r", Action: "drop", Conditions: []string{text}})
		slow := rs.rules[0].spanConds[0]
		for i, span := range spans {
			tc := ottlspanContext(owners[i], span)
			want, err := slow.Eval(t.Context(), tc)
			require.NoError(t, err)
			assert.Equal(t, want, fast.matches(owners[i], span), "%s on span %d", text, i)
		}
	}
	for _, text := range []string{`attributes["k"] == 5`, `IsMatch(name, "x")`, `name == "a" and attributes["k"] == "v"`, `attributes["k"]["x"] == "v"`} {
		assert.Nil(t, compileFast(text), "%s is left to OTTL", text)
	}
}

func ottlspanContext(rs ptrace.ResourceSpans, span ptrace.Span) *ottlspan.TransformContext {
	return ottlspan.NewTransformContext(rs, rs.ScopeSpans().At(0), span)
}

// The conditions the README's migration guide shows parse and run.
func TestMigrationGuideConditionsParse(t *testing.T) {
	rs := mustRules(t,
		Config{Name: "numeric", Action: "keep", Conditions: []string{`attributes["k"] >= 500 and attributes["k"] <= 599`}},
		Config{Name: "boolean", Action: "keep", Conditions: []string{`attributes["debug"] == true`}},
		Config{Name: "regex", Action: "keep", Conditions: []string{`IsMatch(attributes["url.path"], "^/api/")`}},
		Config{Name: "tracestate", Action: "keep", Conditions: []string{`IsMatch(trace_state, "vendor=")`, `trace_state["vendor"] == "x"`}},
		Config{Name: "invert", Action: "drop", Conditions: []string{`not (attributes["k"] == "v")`}},
		Config{Name: "and", Action: "keep", Conditions: []string{`resource.attributes["service.name"] == "web" and kind == SPAN_KIND_SERVER`},
			TraceConditions: []string{"trace.span_count >= 10"}},
		Config{Name: "always", Action: "keep", TraceConditions: []string{"trace.span_count > 0"}},
	)
	td := oneSpan("web")
	rss := td.ResourceSpans().At(0)
	span := rss.ScopeSpans().At(0).Spans().At(0)
	span.Attributes().PutInt("k", 503)
	span.Attributes().PutBool("debug", true)
	span.Attributes().PutStr("url.path", "/api/orders")
	span.TraceState().FromRaw("vendor=x")
	span.SetKind(ptrace.SpanKindServer)
	var matched uint64
	errs := make([]int64, len(rs.rules))
	rs.MatchSpan(rss, rss.ScopeSpans().At(0), span, &matched, errs)
	assert.Equal(t, uint64(0b0111111), matched, "every span condition matches this span")
	assert.Equal(t, make([]int64, len(rs.rules)), errs)
}

func mustRulesB(b *testing.B, cfgs ...Config) *Set {
	b.Helper()
	rs, err := Compile(cfgs, component.TelemetrySettings{Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	return rs
}
