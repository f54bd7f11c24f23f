package budgettailsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func traceID(i byte) pcommon.TraceID { return pcommon.TraceID{15: i, 0: 1} }

// The index holds buffered traces and decisions in one map; the rings
// forget the oldest decision of their kind, and only it.
func TestDecisionRingsForgetTheOldestOnly(t *testing.T) {
	cfg := testConfig()
	cfg.DecisionCache.SampledSize, cfg.DecisionCache.NotSampledSize = 3, 3
	totals := newBufferTotals(cfg, 1)
	sh := newShard(cfg, 1, &totals, 0)
	decideAs := func(id pcommon.TraceID, which decision) {
		tr := sh.add(id, 0, false)
		k, ok := sh.lookup(id)
		require.True(t, ok)
		require.Same(t, tr, sh.traceOf(k))
		sh.remove(tr)
		sh.record(id, which, decided{service: "s"}, k, ok)
		sh.release(tr)
	}
	for i := byte(1); i <= 4; i++ {
		decideAs(traceID(i), notSampled)
	}
	_, ok := sh.lookup(traceID(1))
	assert.False(t, ok, "the oldest of 3 is forgotten")
	for i := byte(2); i <= 4; i++ {
		k, ok := sh.lookup(traceID(i))
		require.True(t, ok)
		assert.Nil(t, sh.traceOf(k))
		assert.Equal(t, notSampled, k.which)
	}

	// A late error turns trace 2 into a kept one: its dropped decision stays
	// in the ring, stale, and forgetting it must not forget the kept one.
	k, _ := sh.lookup(traceID(2))
	sh.record(traceID(2), sampled, decided{service: "s", class: reasonError}, k, true)
	decideAs(traceID(5), notSampled) // evicts trace 2's stale slot
	k, ok = sh.lookup(traceID(2))
	require.True(t, ok, "trace 2's kept decision survives its stale dropped one")
	assert.Equal(t, sampled, k.which)
	assert.Equal(t, reasonError, sh.decisionOf(k).class)

	var dropped []pcommon.TraceID
	sh.recentDecisions(notSampled, func(id pcommon.TraceID, _ decided) bool { dropped = append(dropped, id); return true })
	assert.Equal(t, []pcommon.TraceID{traceID(5), traceID(4), traceID(3)}, dropped, "newest first")
	assert.Equal(t, 4, sh.index.Len())
	assert.Zero(t, sh.buffered)
}

// A ring larger than a page: pages fill in turn, and once full the oldest
// slot, in whichever page, is the one reused.
func TestDecisionRingAcrossPages(t *testing.T) {
	cfg := testConfig()
	const size, made = 2*ringPage + 100, 3 * ringPage
	cfg.DecisionCache.NotSampledSize = size
	totals := newBufferTotals(cfg, 1)
	sh := newShard(cfg, 1, &totals, 0)
	id := func(i int) pcommon.TraceID {
		return pcommon.TraceID{0: 1, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}
	}
	for i := range made {
		sh.record(id(i), notSampled, decided{at: int64(i)}, known{}, false)
	}
	assert.Len(t, sh.decisions[notSampled].pages, 3)
	assert.Equal(t, size, sh.index.Len())
	for i := range made {
		k, ok := sh.lookup(id(i))
		if i < made-size {
			require.False(t, ok, "decision %d forgotten", i)
			continue
		}
		require.True(t, ok, "decision %d remembered", i)
		assert.Equal(t, int64(i), sh.decisionOf(k).at)
	}
	next := made - 1
	sh.recentDecisions(notSampled, func(_ pcommon.TraceID, d decided) bool {
		require.Equal(t, int64(next), d.at, "newest first")
		next--
		return true
	})
	assert.Equal(t, made-size-1, next, "every remembered decision visited")
}

// Traces forced out while a request is served are forwarded after it: the
// slot a forced trace leaves is taken by the request's next trace at once,
// and what is forwarded must still be the forced trace's spans.
func TestForcedTracesKeepTheirSpansWhenTheirSlotIsReused(t *testing.T) {
	cfg := testConfig()
	cfg.NumShards = 1
	cfg.MaxTraces = 1
	ts := newTestSampler(t, cfg)
	td := ptrace.NewTraces()
	ids := make([]pcommon.TraceID, 4)
	for i := range ids {
		ids[i] = traceIDWithRandomness(uint64(i+1), 0.5)
		oneSpan("api", ids[i], byte(10+i), 0, ts.now, time.Millisecond).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	ts.send(td)
	kept := ts.keptSpans()
	require.Len(t, kept, 3, "all but the last trace were forced out")
	for i, id := range ids[:3] {
		require.Len(t, kept[id], 1, "trace %d", i)
		assert.Equal(t, pcommon.SpanID{byte(10 + i), 1, 1, 1, 1, 1, 1, 1}, kept[id][0].SpanID(), "trace %d carries its own span", i)
	}
	assert.Equal(t, 1, ts.p.shards[0].store.live())
}

// A shard that held many traces gives its pages back once most of them are
// decided; the traces it still holds move to the pages that stay, and
// leave whole afterwards, whichever lists they were in and however many
// chunks they had.
func TestStoreGivesPagesBackAndMovedTracesStayWhole(t *testing.T) {
	cfg := testConfig()
	cfg.NumShards = 1
	cfg.DecisionWaitAfterRoot = 9 * time.Second
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "api", 1)
	start := ts.now
	early := ptrace.NewTraces()
	for i := range 2000 {
		oneSpan("api", traceIDWithRandomness(uint64(i+1), 0.5), 2, 1, ts.now, time.Millisecond).ResourceSpans().MoveAndAppendTo(early.ResourceSpans())
	}
	ts.send(early)
	// 40 traces arrive after them, so they sit in the last page: a child
	// each, then the root of every other one (a second chunk, and the
	// roots list).
	ts.now = start.Add(5 * time.Second)
	late := make([]pcommon.TraceID, 40)
	for i := range late {
		late[i] = traceIDWithRandomness(uint64(100_000+i), 0.5)
		ts.send(oneSpan("api", late[i], 2, 1, ts.now, time.Millisecond))
	}
	ts.now = start.Add(6 * time.Second)
	for i := 0; i < len(late); i += 2 {
		ts.send(oneSpan("api", late[i], 1, 0, ts.now, time.Millisecond))
	}
	sh := ts.p.shards[0]
	require.Len(t, sh.store.records, 8, "2,040 traces fill 8 pages of 256")

	ts.advance(4 * time.Second) // the first 2,000 are decided
	require.Len(t, ts.keptSpans(), 2000)
	assert.Len(t, sh.store.records, 1, "40 traces left: one page")
	assert.Equal(t, 40, sh.store.live())
	n := 0
	for tr := sh.head(&sh.arrivals); tr != nil; tr = sh.next(&sh.arrivals, tr) {
		k, ok := sh.lookup(tr.id)
		require.True(t, ok)
		require.Same(t, tr, sh.traceOf(k), "the index names the moved trace")
		n++
	}
	assert.Equal(t, 40, n)

	ts.advance(5 * time.Second) // the 40 are decided
	kept := ts.keptSpans()
	require.Len(t, kept, 2040)
	for i, id := range late {
		want := []pcommon.SpanID{{2, 1, 1, 1, 1, 1, 1, 1}}
		if i%2 == 0 {
			want = append(want, pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1})
		}
		var got []pcommon.SpanID
		for _, s := range kept[id] {
			got = append(got, s.SpanID())
		}
		assert.ElementsMatch(t, want, got, "late trace %d", i)
	}
	assert.Len(t, sh.store.records, 1)
	assert.Zero(t, sh.store.live())
}

// A trace's chunks stay in arrival order; its first needs no allocation,
// and its second makes room for the third and fourth (SDK clients send a
// trace in several parts), so four take one allocation.
func TestChunkListGrowsOnceForFourParts(t *testing.T) {
	chunks := []heldChunk{{data: []byte("a")}, {data: []byte("b")}, {data: []byte("c")}, {data: []byte("d")}, {data: []byte("e")}}
	var h heldParts
	for _, c := range chunks {
		h.addChunk(c)
	}
	assert.Equal(t, chunks, h.chunks)

	held := &heldParts{} // as in the store: allocated once
	for parts, want := range map[int]float64{1: 0, 2: 1, 4: 1, 5: 2} {
		allocs := testing.AllocsPerRun(100, func() {
			*held = heldParts{}
			for _, c := range chunks[:parts] {
				held.addChunk(c)
			}
		})
		assert.Equal(t, want, allocs, "allocations for %d parts", parts)
	}
}
