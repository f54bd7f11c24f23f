package budgettailsamplingprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// Every test of the package puts its slabs in the arena and poisons blocks
// it takes back, so that a chunk read after its slab was let go reads
// poison instead of the spans it held.
func init() {
	minArenaSlab = 0
	poisonFreedBlocks = true
}

func TestBlockSizesAreClassesAtMostAnEighthAboveTheSlab(t *testing.T) {
	for _, n := range []int64{1, 4096, 4097, 16 << 10, 17 << 10, 100_000, 1 << 20, 1<<20 + 1, 9_999_999} {
		size := blockSize(n)
		assert.GreaterOrEqual(t, size, n)
		assert.LessOrEqual(t, size, max(n+n/8, (n+4095)/4096*4096), "n=%d", n)
		assert.Zero(t, size%4096, "n=%d: whole pages", n)
	}
}

func TestArenaReusesBlocksAndUnmapsBeyondItsFreeBound(t *testing.T) {
	if !canMap {
		t.Skip("no anonymous mappings on this platform")
	}
	a := newSlabArena(8*100<<10, true) // maxFree: 100 KiB
	b1, inArena := a.alloc(60 << 10)
	require.True(t, inArena)
	b2, _ := a.alloc(60 << 10)
	require.Len(t, b1, int(blockSize(60<<10)))
	b1[0] = 1
	a.release(b1)
	assert.Equal(t, byte(poisonByte), b1[0], "poisoned when taken back")
	assert.Equal(t, int64(len(b1)), a.freeBytes)
	again, _ := a.alloc(60 << 10)
	assert.Same(t, &b1[0], &again[0], "a free block of the class is reused")
	assert.Zero(t, a.freeBytes)
	a.release(again)
	a.release(b2) // beyond 100 KiB free: the longest free is unmapped
	assert.Equal(t, int64(len(b1)), a.freeBytes)
	reused, _ := a.alloc(60 << 10)
	assert.Same(t, &b2[0], &reused[0], "the block given back last is the one kept")
	a.close()
	assert.Zero(t, a.freeBytes)
}

// When the sizes asked for change — a burst of large requests, then the
// usual ones — the free blocks follow: the arena maps a block for a while,
// not for every slab from then on. (It kept the old sizes' blocks for ever,
// and mapped and unmapped one block per request.)
func TestArenaFreeBlocksFollowTheSizesAskedFor(t *testing.T) {
	if !canMap {
		t.Skip("no anonymous mappings on this platform")
	}
	const large, usual = 1 << 20, 100 << 10
	a := newSlabArena(8*4<<20, true) // maxFree: 4 MiB, four large blocks
	var burst [][]byte
	for range 4 {
		b, _ := a.alloc(large)
		burst = append(burst, b)
	}
	for _, b := range burst {
		a.release(b)
	}
	require.Equal(t, int64(4*blockSize(large)), a.freeBytes, "the free list is full of large blocks")

	// The buffer's steady state: each request's slab is let go once 50
	// newer ones are held.
	before := a.mappings
	var held [][]byte
	const requests = 1000
	for i := range requests {
		b, inArena := a.alloc(usual + int64(i%3)*4096)
		require.True(t, inArena)
		held = append(held, b)
		if len(held) > 50 {
			a.release(held[0])
			held = held[1:]
		}
	}
	maps := a.mappings - before
	t.Logf("%d blocks mapped for %d requests", maps, requests)
	// 51 held at once, and the free list's 4 MiB: ≈ 41 more of the usual
	// sizes, over three classes.
	assert.LessOrEqual(t, maps, int64(51+41+10), "blocks mapped for %d requests", requests)
	assert.LessOrEqual(t, a.freeBytes, a.maxFree)
	for _, b := range held {
		a.release(b)
	}
	a.close()
	assert.Zero(t, a.freeBytes)
}

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
	c, _, _, _ := ts.p.totals()
	assert.Equal(t, c.spans[sampled], int64(len(want)))
	assert.Zero(t, ts.p.buffered.slabBytes.Load(), "every slab let go")
}
