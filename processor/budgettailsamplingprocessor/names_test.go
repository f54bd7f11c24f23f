package budgettailsamplingprocessor

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestNamesInternOneCopyAndStayBounded(t *testing.T) {
	n := newNames()
	a := n.intern([]byte("svc-1\x1fGET /"))
	b := n.intern([]byte(string([]byte("svc-1\x1fGET /"))))
	require.Equal(t, a, b)
	assert.Equal(t, unsafe.StringData(a), unsafe.StringData(b), "one copy of a name")
	assert.Zero(t, testing.AllocsPerRun(100, func() { n.intern([]byte("svc-1\x1fGET /")) }), "a known name costs no allocation")

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50_000 {
				name := fmt.Sprintf("svc-%d-%d", w, i)
				assert.Equal(t, name, n.intern([]byte(name)))
			}
		})
	}
	wg.Wait()
	total := 0
	for i := range n.stripes {
		total += len(n.stripes[i].m)
		assert.LessOrEqual(t, len(n.stripes[i].m), maxNamesPerStripe)
	}
	assert.LessOrEqual(t, total, nameStripes*maxNamesPerStripe)
}

func TestGroupKeyJoinsResourceAndSpanValuesOfAnyType(t *testing.T) {
	cfg := testConfig()
	cfg.Outliers.GroupBy = []string{"service.name", "http.route", "shard", groupBySpanName}
	p := newTestSampler(t, cfg).p
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "cart")
	rs.Resource().Attributes().PutInt("shard", 7)
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("GET")
	span.Attributes().PutStr("http.route", "/cart/{id}")
	sp := splitter{p: p}
	names := sp.traceNames(rs, span)
	assert.Equal(t, traceNames{service: "cart", group: "cart\x1f/cart/{id}\x1f7\x1fGET"}, names)
	again := sp.traceNames(rs, span)
	assert.Equal(t, unsafe.StringData(names.group), unsafe.StringData(again.group), "interned")
	assert.Equal(t, unsafe.StringData(names.service), unsafe.StringData(p.names.intern([]byte("cart"))), "the pair's names are the interned names")
	assert.Zero(t, testing.AllocsPerRun(100, func() { sp.traceNames(rs, span) }), "a known pair costs no allocation")

	rs.Resource().Attributes().PutStr("service.name", "")
	assert.Equal(t, unknownService, sp.traceNames(rs, span).service, "an empty service name is unknown")
	rs.Resource().Attributes().Remove("service.name")
	assert.Equal(t, traceNames{service: unknownService, group: "\x1f/cart/{id}\x1f7\x1fGET"}, sp.traceNames(rs, span))
}

// A pair key holds the service's length: a service name and a group key
// that share a separator byte cannot be confused with another pair.
func TestNamePairsKeepServiceAndGroupApart(t *testing.T) {
	n := newNames()
	key := func(service, group string) []byte { return append(appendPairKey(nil, []byte(service)), group...) }
	a := n.pair(key("a\x1fb", "c"))
	b := n.pair(key("a", "b\x1fc"))
	assert.Equal(t, traceNames{service: "a\x1fb", group: "c"}, a)
	assert.Equal(t, traceNames{service: "a", group: "b\x1fc"}, b)
	assert.Equal(t, a, n.pair(key("a\x1fb", "c")))

	for i := range 200_000 {
		n.pair(key(fmt.Sprintf("svc-%d", i%3000), fmt.Sprintf("grp-%d", i)))
	}
	for i := range n.pairs {
		assert.LessOrEqual(t, len(n.pairs[i].m), maxNamesPerStripe)
	}
}
