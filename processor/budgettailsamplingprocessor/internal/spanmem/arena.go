package spanmem // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"

import (
	"math/bits"
	"sync"
)

// Arena holds slabs' memory outside the Go heap (anonymous mappings)
// and reuses it. With the default waits a sampler holds most of its memory
// in slabs; in the Go heap, that memory made every allocation of the
// receiver's decoding land on a heap several times larger than its own
// working set (cache and TLB misses on 4 KiB pages), and set the pace of
// its collections. Through the binary, tail.yaml with slabs in the arena
// sustained about a quarter more spans/s than with them in the heap
// (docs/BENCHMARKS.md).
//
// Memory outside the Go heap is not freed by the collector: a block goes
// back to the arena only when the last hold on its slab is let go
// (Totals.LetGo), and every reader of a chunk holds its slab (the
// buffer while the trace waits, a keptSet until it is forwarded); a peer's
// copy is made before the trace leaves (the caller copies it).
//
// Blocks are reused by size class (an eighth of a power of two, whole
// pages: at most 12.5% or a page above the slab, counted whole in
// max_buffered_bytes). Free blocks beyond maxFree are unmapped, the
// longest free first, so that what the arena maps stays within
// max_buffered_bytes plus maxFree and its free blocks follow the sizes
// requests have now. (Unmapping the block given back instead could leave
// a full free list of sizes no longer asked for — after a burst of large
// requests, say — and from then on every slab was a new mapping: a page
// fault every 4 KiB written and an munmap, ≈ 130 µs on this project's VM.
// Mapping a fresh block for half of IntakeDepth's requests took its
// intake at 1M buffered traces from ≈ 0.95 to 1.5–1.8 µs a span.)
type Arena struct {
	mu        sync.Mutex
	free      map[int][]freeBlock // by block size, oldest first
	freeBytes int64
	maxFree   int64
	// released numbers the blocks given back, to find the longest free.
	released uint64
	// mappings counts the blocks alloc tried to map, for tests.
	mappings int64
	// offHeap: buffer_memory is mapped; otherwise (the default) blocks are
	// ordinary Go allocations of the slab's size.
	offHeap bool
}

type freeBlock struct {
	b  []byte
	at uint64 // released's value when it was given back
}

// Slabs smaller than minArenaSlab stay in the Go heap: the class rounding
// would waste more than they save the collector. (A variable: tests put
// every slab in the arena.)
var minArenaSlab int64 = 16 << 10

func newArena(maxBufferedBytes int64, mapped bool) *Arena {
	return &Arena{free: map[int][]freeBlock{}, maxFree: min(maxBufferedBytes/8, 64<<20), offHeap: mapped && canMap}
}

// BlockSize is the size class of an n-byte slab: n rounded up to an eighth
// of the power of two below it (at most 12.5% more), and to whole pages.
func BlockSize(n int64) int64 {
	step := max(int64(1)<<max(bits.Len64(uint64(n))-4, 0), 4096)
	return (n + step - 1) / step * step
}

// alloc returns a block of at least n bytes (its length is what the buffer
// counts), and whether it is the arena's (to give back with release).
func (a *Arena) alloc(n int64) (block []byte, arena bool) {
	if !a.offHeap || n < minArenaSlab {
		return make([]byte, n), false
	}
	size := int(BlockSize(n))
	a.mu.Lock()
	if l := a.free[size]; len(l) > 0 {
		// The newest: its pages were touched last.
		block = l[len(l)-1].b
		a.free[size] = l[:len(l)-1]
		a.freeBytes -= int64(size)
		a.mu.Unlock()
		return block, true
	}
	a.mappings++
	a.mu.Unlock()
	block, err := mapBlock(size)
	if err != nil {
		// Out of mappings (vm.max_map_count) or address space: the Go
		// heap still has room.
		return make([]byte, n), false
	}
	return block, true
}

// release takes a block back; nothing may read it afterwards.
func (a *Arena) release(block []byte) {
	if poisonFreedBlocks {
		for i := range block {
			block[i] = poisonByte
		}
	}
	if int64(len(block)) > a.maxFree {
		unmapBlock(block)
		return
	}
	var unmap [][]byte
	a.mu.Lock()
	for a.freeBytes+int64(len(block)) > a.maxFree {
		unmap = append(unmap, a.takeLongestFree())
	}
	a.released++
	a.free[len(block)] = append(a.free[len(block)], freeBlock{b: block, at: a.released})
	a.freeBytes += int64(len(block))
	a.mu.Unlock()
	for _, b := range unmap {
		unmapBlock(b)
	}
}

// takeLongestFree removes the block given back longest ago from the free
// lists; called with a.mu held and at least one block free. The lists are
// a few dozen sizes at most: an eighth of each power of two in use.
func (a *Arena) takeLongestFree() []byte {
	oldest := -1
	for size, l := range a.free {
		if len(l) > 0 && (oldest < 0 || l[0].at < a.free[oldest][0].at) {
			oldest = size
		}
	}
	l := a.free[oldest]
	b := l[0].b
	if len(l) == 1 {
		delete(a.free, oldest)
	} else {
		a.free[oldest] = l[1:]
	}
	a.freeBytes -= int64(len(b))
	return b
}

// Close unmaps the free blocks; blocks still held are unmapped by nobody,
// so it runs only once the buffer is empty (Shutdown).
func (a *Arena) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for size, l := range a.free {
		for _, f := range l {
			unmapBlock(f.b)
		}
		delete(a.free, size)
	}
	a.freeBytes = 0
}

// StrictForTests puts every slab in the arena and poisons blocks taken
// back, so that a chunk read after its slab was let go reads poison instead
// of the spans it held. For tests only: it applies to the whole process.
func StrictForTests() {
	minArenaSlab = 0
	poisonFreedBlocks = true
}

// CanMap reports whether this platform has anonymous mappings
// (buffer_memory: mapped); without them slabs stay in the Go heap.
const CanMap = canMap

// Tests set poisonFreedBlocks: a chunk read after its block went back to
// the arena then reads poisonByte instead of whatever the next slab wrote
// there; it has the varint continuation bit, so a run of it decodes as
// nothing and the spans go missing.
var poisonFreedBlocks = false

const poisonByte = 0xA5
