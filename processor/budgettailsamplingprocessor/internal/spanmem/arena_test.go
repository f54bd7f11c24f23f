package spanmem

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() { StrictForTests() }

func TestBlockSizesAreClassesAtMostAnEighthAboveTheSlab(t *testing.T) {
	for _, n := range []int64{1, 4096, 4097, 16 << 10, 17 << 10, 100_000, 1 << 20, 1<<20 + 1, 9_999_999} {
		size := BlockSize(n)
		assert.GreaterOrEqual(t, size, n)
		assert.LessOrEqual(t, size, max(n+n/8, (n+4095)/4096*4096), "n=%d", n)
		assert.Zero(t, size%4096, "n=%d: whole pages", n)
	}
}

func TestArenaReusesBlocksAndUnmapsBeyondItsFreeBound(t *testing.T) {
	if !canMap {
		t.Skip("no anonymous mappings on this platform")
	}
	a := newArena(8*100<<10, true) // maxFree: 100 KiB
	b1, inArena := a.alloc(60 << 10)
	require.True(t, inArena)
	b2, _ := a.alloc(60 << 10)
	require.Len(t, b1, int(BlockSize(60<<10)))
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
	a.Close()
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
	a := newArena(8*4<<20, true) // maxFree: 4 MiB, four large blocks
	var burst [][]byte
	for range 4 {
		b, _ := a.alloc(large)
		burst = append(burst, b)
	}
	for _, b := range burst {
		a.release(b)
	}
	require.Equal(t, 4*BlockSize(large), a.freeBytes, "the free list is full of large blocks")

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
	a.Close()
	assert.Zero(t, a.freeBytes)
}
