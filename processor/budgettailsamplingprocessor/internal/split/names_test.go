package split

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/names"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func TestGroupKeyJoinsResourceAndSpanValuesOfAnyType(t *testing.T) {
	tbl := names.New()
	s := Settings{GroupBy: []string{"service.name", "http.route", "shard", GroupBySpanName}, Names: tbl}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "cart")
	rs.Resource().Attributes().PutInt("shard", 7)
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("GET")
	span.Attributes().PutStr("http.route", "/cart/{id}")
	sp := splitter{s: &s}
	got := sp.traceNames(rs, span)
	assert.Equal(t, traceinfo.Names{Service: "cart", Group: "cart\x1f/cart/{id}\x1f7\x1fGET"}, got)
	again := sp.traceNames(rs, span)
	assert.Equal(t, unsafe.StringData(got.Group), unsafe.StringData(again.Group), "interned")
	assert.Equal(t, unsafe.StringData(got.Service), unsafe.StringData(tbl.Intern([]byte("cart"))), "the pair's names are the interned names")
	assert.Zero(t, testing.AllocsPerRun(100, func() { sp.traceNames(rs, span) }), "a known pair costs no allocation")

	rs.Resource().Attributes().PutStr("service.name", "")
	assert.Equal(t, UnknownService, sp.traceNames(rs, span).Service, "an empty service name is unknown")
	rs.Resource().Attributes().Remove("service.name")
	assert.Equal(t, traceinfo.Names{Service: UnknownService, Group: "\x1f/cart/{id}\x1f7\x1fGET"}, sp.traceNames(rs, span))
}
