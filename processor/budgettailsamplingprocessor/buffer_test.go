package budgettailsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
)

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
	assert.Equal(t, 1, ts.p.shards[0].Live())
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
	require.Equal(t, 8, sh.Pages(), "2,040 traces fill 8 pages of 256")

	ts.advance(4 * time.Second) // the first 2,000 are decided
	require.Len(t, ts.keptSpans(), 2000)
	assert.Equal(t, 1, sh.Pages(), "40 traces left: one page")
	assert.Equal(t, 40, sh.Live())
	n := 0
	sh.Each(func(tr *tracebuf.Trace) {
		k, ok := sh.Lookup(tr.ID)
		require.True(t, ok)
		require.Same(t, tr, sh.TraceOf(k), "the index names the moved trace")
		n++
	})
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
	assert.Equal(t, 1, sh.Pages())
	assert.Zero(t, sh.Live())
}
