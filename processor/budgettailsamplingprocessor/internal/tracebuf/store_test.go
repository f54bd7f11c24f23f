package tracebuf

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
)

// A trace's chunks stay in arrival order; its first needs no allocation,
// and its second makes room for the third and fourth (SDK clients send a
// trace in several parts), so four take one allocation.
func TestChunkListGrowsOnceForFourParts(t *testing.T) {
	chunks := []spanmem.Chunk{{Data: []byte("a")}, {Data: []byte("b")}, {Data: []byte("c")}, {Data: []byte("d")}, {Data: []byte("e")}}
	var h Held
	for _, c := range chunks {
		h.AddChunk(c)
	}
	assert.Equal(t, chunks, h.chunks)

	held := &Held{} // as in the store: allocated once
	for parts, want := range map[int]float64{1: 0, 2: 1, 4: 1, 5: 2} {
		allocs := testing.AllocsPerRun(100, func() {
			*held = Held{}
			for _, c := range chunks[:parts] {
				held.AddChunk(c)
			}
		})
		assert.Equal(t, want, allocs, "allocations for %d parts", parts)
	}
}
