package budgettailsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
)

// A request's root-carrying fragments share one slab: its memory stays
// until the last of them leaves, and so must its count, or
// max_buffered_bytes would bound less than the memory held.
func TestSlabStaysCountedUntilItsLastChunkLeaves(t *testing.T) {
	ts := newTestSampler(t, testConfig()) // waits: 10s, 2s after the root
	early, fresh := traceIDWithRandomness(1, 0.5), traceIDWithRandomness(2, 0.5)
	ts.send(oneSpan("db", early, 2, 1, ts.now, time.Millisecond))
	ts.advance(9 * time.Second)
	// Both roots in one request: early's wait ends in 1s, fresh's in 2s.
	td := oneSpan("api", early, 1, 0, ts.now, time.Millisecond)
	oneSpan("api", fresh, 1, 0, ts.now, time.Millisecond).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	var m ptrace.ProtoMarshaler
	slab := int64(m.TracesSize(td))
	if spanmem.CanMap {
		slab = spanmem.BlockSize(slab) // its block in the arena, counted whole
	}
	ts.send(td)
	require.EqualValues(t, slab, ts.p.totals.SlabBytes(), "the two roots' fragments are in one slab")

	ts.advance(1500 * time.Millisecond)
	assert.Equal(t, 1.0, ts.metric(metadata.MetricBufferedTraces), "early is decided, fresh waits")
	assert.EqualValues(t, slab, ts.metric(metadata.MetricBufferedBytes), "the slab is held by the trace still buffered")
	assert.EqualValues(t, slab, ts.p.totals.Bytes(), "the bounds see it too")

	ts.advance(time.Second)
	assert.Zero(t, ts.metric(metadata.MetricBufferedTraces))
	assert.Zero(t, ts.metric(metadata.MetricBufferedBytes))
	assert.Zero(t, ts.p.totals.Bytes())
}

// On SDK-like traffic (each pod exports its spans every 5 s, roots in other
// requests than most of their traces' spans) the buffer holds what it
// counts of its traces: slabs cost no memory beyond their chunks. (A slab
// of every fragment held 1.3–2.2× these bytes; one of every fragment of a
// trace whose root had arrived, 1.4–1.5×.)
func TestSlabsHoldNoMoreThanTheirChunksOnSDKTraffic(t *testing.T) {
	for _, waits := range [][2]time.Duration{{10 * time.Second, 2 * time.Second}, {15 * time.Second, 7 * time.Second}} {
		cfg := testConfig()
		cfg.DecisionWait, cfg.DecisionWaitAfterRoot = waits[0], waits[1]
		ts := newTestSampler(t, cfg)
		r := newFleetRun(ts, workload.FleetOptions{Seed: 3}, 500)
		r.run(15)
		var slabs int64
		for s := 0; s < 20; s++ {
			r.run(1)
			var otlp int64
			for _, sh := range ts.p.shards {
				sh.mu.Lock()
				sh.Each(func(tr *tracebuf.Trace) { otlp += tr.Bytes })
				sh.mu.Unlock()
			}
			held := ts.metric(metadata.MetricBufferedBytes)
			assert.LessOrEqual(t, held, 1.05*float64(otlp), "waits %v, second %d: held vs the buffered traces' bytes", waits, s)
			slabs = max(slabs, ts.p.totals.SlabBytes())
		}
		assert.Positive(t, slabs, "waits %v: slabs are in use", waits)
	}
}

// With compression every chunk is a copy of its own, counted by its length:
// no slab is made.
func TestCompressedChunksAreCountedByTheirLength(t *testing.T) {
	cfg := testConfig()
	cfg.BufferCompression = compressionS2
	ts := newTestSampler(t, cfg)
	id := traceIDWithRandomness(1, 0.5)
	ts.send(oneSpan("api", id, 1, 0, ts.now, time.Millisecond))
	assert.Zero(t, ts.p.totals.SlabBytes())
	assert.Positive(t, ts.metric(metadata.MetricBufferedBytes))
	ts.advance(3 * time.Second)
	assert.Zero(t, ts.metric(metadata.MetricBufferedBytes))
}
