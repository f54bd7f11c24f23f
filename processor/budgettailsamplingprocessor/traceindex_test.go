package budgettailsamplingprocessor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The index answers as a Go map does under a random mix of inserts,
// overwrites and deletes over few keys: runs of neighbours form, wrap around
// the table's end and are cut by deletions, and the table grows.
func TestTraceIndexAgreesWithAMap(t *testing.T) {
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		x := newTraceIndex()
		want := map[pcommon.TraceID]known{}
		keys := make([]pcommon.TraceID, 40+rnd.IntN(400))
		for i := range keys {
			keys[i] = pcommon.TraceID{0: byte(i), 1: byte(i >> 8), 15: 1}
		}
		for op := range 20000 {
			id := keys[rnd.IntN(len(keys))]
			switch rnd.IntN(3) {
			case 0, 1:
				k := known{ref: traceRef(rnd.Int32()), slot: rnd.Int32(), which: decision(rnd.IntN(2))}
				x.set(id, k)
				want[id] = k
			case 2:
				x.delete(id)
				delete(want, id)
			}
			require.Equal(t, len(want), x.len(), "seed %d op %d", seed, op)
			if op%97 == 0 || op > 19900 {
				for _, id := range keys {
					k, ok := x.get(id)
					w, wok := want[id]
					require.Equal(t, wok, ok, "seed %d op %d: presence of %x", seed, op, id)
					require.Equal(t, w, k, "seed %d op %d: entry of %x", seed, op, id)
				}
			}
		}
	}
}

// IDs that differ in one byte only, as a client choosing them to collide
// would send, spread over the table: no run of neighbours gets long.
func TestTraceIndexSpreadsChosenIDs(t *testing.T) {
	x := newTraceIndex()
	const n = 1 << 14
	for i := range n {
		x.set(pcommon.TraceID{14: byte(i >> 8), 15: byte(i)}, known{ref: 1})
	}
	require.Equal(t, n, x.len())
	longest, run := 0, 0
	for _, s := range x.slots {
		if s.full {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	require.Less(t, longest, 200, "longest run of occupied slots")
}

// BenchmarkTraceIndex runs a trace's life in the index (looked up as new,
// added, decided, its decision forgotten once older ones are) at a shard's
// depth, in the index and in the Go map it replaced.
func BenchmarkTraceIndex(b *testing.B) {
	const live = 1 << 18
	rnd := rand.New(rand.NewPCG(1, 2))
	newIDs := func(n int) []pcommon.TraceID {
		ids := make([]pcommon.TraceID, n)
		for i := range ids {
			for j := range ids[i] {
				ids[i][j] = byte(rnd.Uint32())
			}
		}
		return ids
	}
	b.Run("index", func(b *testing.B) {
		ids := newIDs(live + b.N)
		x := newTraceIndex()
		for _, id := range ids[:live] {
			x.set(id, known{ref: 1})
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			id := ids[live+i]
			if _, ok := x.get(id); !ok {
				x.set(id, known{ref: 1})
			}
			x.set(ids[live/2+i], known{slot: 1})
			x.delete(ids[i])
		}
	})
	b.Run("gomap", func(b *testing.B) {
		ids := newIDs(live + b.N)
		m := map[pcommon.TraceID]known{}
		for _, id := range ids[:live] {
			m[id] = known{ref: 1}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			id := ids[live+i]
			if _, ok := m[id]; !ok {
				m[id] = known{ref: 1}
			}
			m[ids[live/2+i]] = known{slot: 1}
			delete(m, ids[i])
		}
	})
}
