package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"math/bits"
	"sync"
)

// slabArena holds slabs' memory outside the Go heap (anonymous mappings)
// and reuses it. With the default waits a sampler holds most of its memory
// in slabs; in the Go heap, that memory made every allocation of the
// receiver's decoding land on a heap several times larger than its own
// working set (cache and TLB misses on 4 KiB pages), and set the pace of
// its collections. Through the binary at 376,037 spans/s, tail.yaml with
// slabs in the arena sent the offered rate where it fell 4-7% short
// before, and five ramps sustained a median of 507k spans/s against
// 403k-408k (docs/BENCHMARKS.md, twelfth pass).
//
// Memory outside the Go heap is not freed by the collector: a block goes
// back to the arena only when the last hold on its slab is let go
// (bufferTotals.letGo), and every reader of a chunk holds its slab (the
// buffer while the trace waits, a keptSet until it is forwarded); a peer's
// copy is made before the trace leaves (encodedChunks).
//
// Blocks are reused by size class (an eighth of a power of two, whole
// pages: at most 12.5% or a page above the slab, counted whole in
// max_buffered_bytes). Free blocks
// beyond maxFree are unmapped, so that what the arena maps stays within
// max_buffered_bytes plus maxFree.
type slabArena struct {
	mu        sync.Mutex
	free      map[int][][]byte // by block size
	freeBytes int64
	maxFree   int64
	// offHeap: buffer_memory is mapped; otherwise (the default) blocks are
	// ordinary Go allocations of the slab's size.
	offHeap bool
}

// Where slabs live (buffer_memory).
const (
	bufferMemoryHeap   = "heap"
	bufferMemoryMapped = "mapped"
)

// Slabs smaller than minArenaSlab stay in the Go heap: the class rounding
// would waste more than they save the collector. (A variable: tests put
// every slab in the arena.)
var minArenaSlab int64 = 16 << 10

func newSlabArena(maxBufferedBytes int64, mapped bool) *slabArena {
	return &slabArena{free: map[int][][]byte{}, maxFree: min(maxBufferedBytes/8, 64<<20), offHeap: mapped && canMap}
}

// blockSize is the size class of an n-byte slab: n rounded up to an eighth
// of the power of two below it (at most 12.5% more), and to whole pages.
func blockSize(n int64) int64 {
	step := max(int64(1)<<max(bits.Len64(uint64(n))-4, 0), 4096)
	return (n + step - 1) / step * step
}

// alloc returns a block of at least n bytes (its length is what the buffer
// counts), and whether it is the arena's (to give back with release).
func (a *slabArena) alloc(n int64) (block []byte, arena bool) {
	if !a.offHeap || n < minArenaSlab {
		return make([]byte, n), false
	}
	size := int(blockSize(n))
	a.mu.Lock()
	if l := a.free[size]; len(l) > 0 {
		block = l[len(l)-1]
		a.free[size] = l[:len(l)-1]
		a.freeBytes -= int64(size)
		a.mu.Unlock()
		return block, true
	}
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
func (a *slabArena) release(block []byte) {
	if poisonFreedBlocks {
		for i := range block {
			block[i] = poisonByte
		}
	}
	a.mu.Lock()
	if a.freeBytes+int64(len(block)) > a.maxFree {
		a.mu.Unlock()
		unmapBlock(block)
		return
	}
	a.free[len(block)] = append(a.free[len(block)], block)
	a.freeBytes += int64(len(block))
	a.mu.Unlock()
}

// close unmaps the free blocks; blocks still held are unmapped by nobody,
// so it runs only once the buffer is empty (Shutdown).
func (a *slabArena) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for size, l := range a.free {
		for _, b := range l {
			unmapBlock(b)
		}
		delete(a.free, size)
	}
	a.freeBytes = 0
}

// Tests set poisonFreedBlocks: a chunk read after its block went back to
// the arena then reads poisonByte instead of whatever the next slab wrote
// there; it has the varint continuation bit, so a run of it decodes as
// nothing and the spans go missing.
var poisonFreedBlocks = false

const poisonByte = 0xA5
