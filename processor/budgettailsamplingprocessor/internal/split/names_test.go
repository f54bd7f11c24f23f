package split

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/names"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func TestGroupKeyJoinsResourceAndSpanValuesOfAnyType(t *testing.T) {
	tbl := names.New()
	sp := New(Settings{GroupBy: []string{"service.name", "http.route", "shard", GroupBySpanName}, Names: tbl}).start()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "cart")
	rs.Resource().Attributes().PutInt("shard", 7)
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("GET")
	span.Attributes().PutStr("http.route", "/cart/{id}")
	got := sp.traceNames(rs, span)
	assert.Equal(t, traceinfo.Names{Key: "cart", Group: "cart\x1f/cart/{id}\x1f7\x1fGET"}, got)
	again := sp.traceNames(rs, span)
	assert.Equal(t, unsafe.StringData(got.Group), unsafe.StringData(again.Group), "interned")
	assert.Equal(t, unsafe.StringData(got.Key), unsafe.StringData(tbl.Intern([]byte("cart"))), "the pair's names are the interned names")
	assert.Zero(t, testing.AllocsPerRun(100, func() { sp.traceNames(rs, span) }), "a known pair costs no allocation")

	rs.Resource().Attributes().PutStr("service.name", "")
	assert.Equal(t, UnknownService, sp.traceNames(rs, span).Key, "an empty service name is unknown")
	rs.Resource().Attributes().Remove("service.name")
	assert.Equal(t, traceinfo.Names{Key: UnknownService, Group: "\x1f/cart/{id}\x1f7\x1fGET"}, sp.traceNames(rs, span))
}

func TestKeysReadTheRootsAttributesAndFields(t *testing.T) {
	keys, err := ParseKeys("baseline.keys", []string{"service.name", "http.route", KeySpanName, KeySpanKind, KeyStatusCode, "absent"})
	require.NoError(t, err)
	sp := New(Settings{Keys: keys, Names: names.New()}).start()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "cart")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("GET")
	span.SetKind(ptrace.SpanKindServer)
	span.Status().SetCode(ptrace.StatusCodeError)
	span.Attributes().PutStr("http.route", "/cart/{id}")
	assert.Equal(t, "cart|/cart/{id}|GET|Server|Error|", sp.traceNames(rs, span).Key)
	rs.Resource().Attributes().Remove("service.name")
	assert.Equal(t, "unknown|/cart/{id}|GET|Server|Error|", sp.traceNames(rs, span).Key, "service.name keeps its fallback")
	only, err := ParseKeys("k", []string{"service.name"})
	require.NoError(t, err)
	dflt, explicit := New(Settings{Names: names.New()}).start(), New(Settings{Keys: only, Names: names.New()}).start()
	assert.Equal(t, dflt.traceNames(rs, span).Key, explicit.traceNames(rs, span).Key, "no keys means [service.name]")
}

func TestKeysOfATraceWithoutRootAreTheLongestSpans(t *testing.T) {
	keys, err := ParseKeys("baseline.keys", []string{"service.name", "http.route"})
	require.NoError(t, err)
	rs, err := rules.Compile(nil, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	x := New(Settings{Keys: keys, Names: names.New(), Rules: rs})
	td := ptrace.NewTraces()
	for i, svc := range []string{"db", "api", "cache"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.SetTraceID(pcommon.TraceID{1})
		span.SetSpanID(pcommon.SpanID{byte(i + 1)})
		span.SetParentSpanID(pcommon.SpanID{9}) // the root never arrives
		span.Attributes().PutStr("http.route", "/"+svc)
		span.SetStartTimestamp(1000)
		span.SetEndTimestamp(pcommon.Timestamp(1000 + []int{10, 500, 20}[i]))
	}
	req, err := x.Split(td)
	require.NoError(t, err)
	defer req.Release()
	require.Len(t, req.Frags, 1)
	assert.Equal(t, "api|/api", req.Frags[0].Key, "without a root, the longest span's key")
}
