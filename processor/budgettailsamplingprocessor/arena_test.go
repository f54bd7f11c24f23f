package budgettailsamplingprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
)

// Every test of the package puts its slabs in the arena and poisons blocks
// it takes back, so that a chunk read after its slab was let go reads
// poison instead of the spans it held.
func init() { spanmem.StrictForTests() }

// Kept traces are forwarded after the decision let their trace's slabs go:
// the keptSet must hold them until the spans are decoded, or the spans
// forwarded are whatever the arena put there next (poison here).
func TestKeptSpansAreIntactAfterTheirSlabsAreLetGo(t *testing.T) {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 1e9 // keep everything
	ts := newTestSampler(t, cfg)
	g := workload.NewGenerator(workload.Options{Services: 5, Seed: 3})
	want := map[string]int{}
	for range 20 {
		td, _ := g.Batch(30)
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, span ptrace.Span) { want[span.SpanID().String()]++ })
		ts.send(td)
	}
	ts.advance(time.Minute)
	ts.p.decideExpired(context.Background())
	got := map[string]int{}
	for _, td := range ts.sink.AllTraces() {
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, span ptrace.Span) { got[span.SpanID().String()]++ })
	}
	assert.Equal(t, want, got, "every span forwarded once, intact")
	c, _, _, _ := ts.p.tally()
	assert.Equal(t, c.Spans[sampled], int64(len(want)))
	assert.Zero(t, ts.p.totals.SlabBytes(), "every slab let go")
}
