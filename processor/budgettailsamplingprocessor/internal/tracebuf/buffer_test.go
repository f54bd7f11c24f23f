package tracebuf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func traceID(i byte) pcommon.TraceID { return pcommon.TraceID{15: i, 0: 1} }

// The index holds buffered traces and decisions in one map; the rings
// forget the oldest decision of their kind, and only it.
func TestDecisionRingsForgetTheOldestOnly(t *testing.T) {
	sh := New(3, 3, spanmem.NewTotals(100, 1<<20, 1, false))
	decideAs := func(id pcommon.TraceID, which traceinfo.Decision) {
		tr := sh.Add(id, 0, false)
		k, ok := sh.Lookup(id)
		require.True(t, ok)
		require.Same(t, tr, sh.TraceOf(k))
		sh.Remove(tr)
		sh.Record(id, which, traceinfo.Decided{Service: "s"}, k, ok)
		sh.Release(tr)
	}
	for i := byte(1); i <= 4; i++ {
		decideAs(traceID(i), traceinfo.NotSampled)
	}
	_, ok := sh.Lookup(traceID(1))
	assert.False(t, ok, "the oldest of 3 is forgotten")
	for i := byte(2); i <= 4; i++ {
		k, ok := sh.Lookup(traceID(i))
		require.True(t, ok)
		assert.Nil(t, sh.TraceOf(k))
		assert.Equal(t, traceinfo.NotSampled, k.which)
	}

	// A late error turns trace 2 into a kept one: its dropped decision stays
	// in the ring, stale, and forgetting it must not forget the kept one.
	k, _ := sh.Lookup(traceID(2))
	sh.Record(traceID(2), traceinfo.Sampled, traceinfo.Decided{Service: "s", Class: traceinfo.ReasonError}, k, true)
	decideAs(traceID(5), traceinfo.NotSampled) // evicts trace 2's stale slot
	k, ok = sh.Lookup(traceID(2))
	require.True(t, ok, "trace 2's kept decision survives its stale dropped one")
	assert.Equal(t, traceinfo.Sampled, k.which)
	assert.Equal(t, traceinfo.ReasonError, sh.DecisionOf(k).Class)

	var dropped []pcommon.TraceID
	sh.RecentDecisions(traceinfo.NotSampled, func(id pcommon.TraceID, _ traceinfo.Decided) bool { dropped = append(dropped, id); return true })
	assert.Equal(t, []pcommon.TraceID{traceID(5), traceID(4), traceID(3)}, dropped, "newest first")
	assert.Equal(t, 4, sh.index.Len())
	assert.Zero(t, sh.Len())
}

// A ring larger than a page: pages fill in turn, and once full the oldest
// slot, in whichever page, is the one reused.
func TestDecisionRingAcrossPages(t *testing.T) {
	const size, made = 2*ringPage + 100, 3 * ringPage
	sh := New(1, size, spanmem.NewTotals(100, 1<<20, 1, false))
	id := func(i int) pcommon.TraceID {
		return pcommon.TraceID{0: 1, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}
	}
	for i := range made {
		sh.Record(id(i), traceinfo.NotSampled, traceinfo.Decided{At: int64(i)}, Known{}, false)
	}
	assert.Len(t, sh.decisions[traceinfo.NotSampled].pages, 3)
	assert.Equal(t, size, sh.index.Len())
	for i := range made {
		k, ok := sh.Lookup(id(i))
		if i < made-size {
			require.False(t, ok, "decision %d forgotten", i)
			continue
		}
		require.True(t, ok, "decision %d remembered", i)
		assert.Equal(t, int64(i), sh.DecisionOf(k).At)
	}
	next := made - 1
	sh.RecentDecisions(traceinfo.NotSampled, func(_ pcommon.TraceID, d traceinfo.Decided) bool {
		require.Equal(t, int64(next), d.At, "newest first")
		next--
		return true
	})
	assert.Equal(t, made-size-1, next, "every remembered decision visited")
}
