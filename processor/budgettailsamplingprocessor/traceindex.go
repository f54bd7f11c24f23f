package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"hash/maphash"
	"math/bits"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// traceIndex maps a shard's trace IDs to what it knows of them (known):
// every buffered trace and every remembered decision. It is an open-
// addressing table with linear probing and backward-shift deletion.
//
// Why not a Go map: a shard's index holds up to hundreds of thousands of
// IDs, so every operation on it misses the cache. A Go map's operation
// reads a group's control word and then the slot, most often two cache
// lines apart in a 232-byte group; here a probe reads a 28-byte slot and
// its neighbours, one line. On 2,000 services the Go map's four operations
// a trace were about a quarter of the sampler's CPU.
type traceIndex struct {
	slots []indexSlot
	mask  uint64
	// shift takes a hash's top bits as its home slot, so that slots are in
	// hash order: growing reads the old table and writes the new one in
	// order (a Go map grew at a third of the cost that random writes had).
	shift uint
	count int
	// seed keys the hash: trace IDs come from clients, and IDs chosen to
	// collide must not turn probes into scans.
	seed maphash.Seed
}

// indexSlot is one entry, known's fields unpacked, with its ID's hash:
// 32 bytes, two to a cache line.
type indexSlot struct {
	id    pcommon.TraceID
	ref   traceRef
	slot  int32
	which decision
	full  bool
	hash  uint32
}

// minIndexSlots is a new index's size; it doubles when three quarters full
// (linear probing's probes grow fast beyond that).
const minIndexSlots = 64

func newTraceIndex() traceIndex {
	x := traceIndex{seed: maphash.MakeSeed()}
	x.resize(minIndexSlots)
	return x
}

func (x *traceIndex) resize(slots int) {
	x.slots = make([]indexSlot, slots)
	x.mask = uint64(slots - 1)
	x.shift = uint(32 - bits.TrailingZeros(uint(slots)))
}

func (x *traceIndex) hash(id *pcommon.TraceID) uint32 {
	return uint32(maphash.Bytes(x.seed, id[:]) >> 32)
}

func (x *traceIndex) home(hash uint32) uint64 { return uint64(hash) >> x.shift }

// len is how many IDs the index holds.
func (x *traceIndex) len() int { return x.count }

// find is where id's entry is, or the empty slot that ends its run.
func (x *traceIndex) find(id *pcommon.TraceID, hash uint32) uint64 {
	for i := x.home(hash); ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if !s.full || (s.hash == hash && s.id == *id) {
			return i
		}
	}
}

// get is what the index holds of id.
func (x *traceIndex) get(id pcommon.TraceID) (known, bool) {
	s := &x.slots[x.find(&id, x.hash(&id))]
	return known{ref: s.ref, slot: s.slot, which: s.which}, s.full
}

// set makes id's entry k, adding it if new.
func (x *traceIndex) set(id pcommon.TraceID, k known) {
	if (x.count+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	h := x.hash(&id)
	s := &x.slots[x.find(&id, h)]
	if !s.full {
		x.count++
	}
	*s = indexSlot{id: id, ref: k.ref, slot: k.slot, which: k.which, full: true, hash: h}
}

// delete removes id's entry, if any. The entries after it in its run move
// back into the hole, so lookups never need markers of deleted entries.
func (x *traceIndex) delete(id pcommon.TraceID) {
	hole := x.find(&id, x.hash(&id))
	if !x.slots[hole].full {
		return
	}
	for j := (hole + 1) & x.mask; x.slots[j].full; j = (j + 1) & x.mask {
		// The entry at j may fill the hole unless its home lies after
		// the hole (cyclically, in (hole, j]): it would become unreachable.
		if (j-x.home(x.slots[j].hash))&x.mask >= (j-hole)&x.mask {
			x.slots[hole] = x.slots[j]
			hole = j
		}
	}
	x.slots[hole] = indexSlot{}
	x.count--
}

// grow doubles the table and places every entry anew, in order.
func (x *traceIndex) grow() {
	old := x.slots
	x.resize(2 * len(old))
	for k := range old {
		s := &old[k]
		if !s.full {
			continue
		}
		i := x.home(s.hash)
		for x.slots[i].full {
			i = (i + 1) & x.mask
		}
		x.slots[i] = *s
	}
}
