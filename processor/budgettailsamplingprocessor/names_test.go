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
	b := n.internString(string([]byte("svc-1\x1fGET /")))
	require.Equal(t, a, b)
	assert.Equal(t, unsafe.StringData(a), unsafe.StringData(b), "one copy of a name")
	assert.Zero(t, testing.AllocsPerRun(100, func() { n.intern([]byte("svc-1\x1fGET /")) }), "a known name costs no allocation")

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50_000 {
				name := fmt.Sprintf("svc-%d-%d", w, i)
				assert.Equal(t, name, n.internString(name))
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
	key := sp.groupKey(rs.Resource().Attributes(), span)
	assert.Equal(t, "cart\x1f/cart/{id}\x1f7\x1fGET", key)
	assert.Equal(t, unsafe.StringData(key), unsafe.StringData(sp.groupKey(rs.Resource().Attributes(), span)), "interned")
}
