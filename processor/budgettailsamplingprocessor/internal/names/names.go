// Package names interns the fairness keys and outlier-group keys of the
// whole processor, and the (key, group) pairs a trace is booked under.
//
// It owns the table and its bound. It must not know spans, traces or where
// a name came from: callers build keys (AppendPairKey) and look them up.
package names // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/names"

import (
	"encoding/binary"
	"hash/maphash"
	"sync"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Table interns fairness keys and outlier-group keys for the whole
// processor: buffered traces and up to millions of decision-cache entries
// then share a few thousand strings instead of each holding its own (objects
// the collector's GC would mark), and a group key is looked up from the bytes
// it is built in, without allocating. One table for every shard: a table per
// shard held a copy of each name per shard and, with thousands of services,
// kept overflowing.
//
// A trace's two names, its fairness key and its group, are also interned as a
// pair, so that a fragment finds both with one lookup.
type Table struct {
	seed    maphash.Seed
	stripes [nameStripes]nameStripe
	pairs   [nameStripes]pairStripe
}

// nameStripes spreads lookups over locks so cores rarely meet on one.
const nameStripes = 64

// maxNamesPerStripe bounds the table (64 Ki names); a full stripe starts
// afresh, strings already handed out stay valid.
const maxNamesPerStripe = 1024

type nameStripe struct {
	mu sync.Mutex
	m  map[string]string
	_  [40]byte // a cache line each: stripes are locked from every core
}

type pairStripe struct {
	mu sync.Mutex
	m  map[string]traceinfo.Names
	_  [48]byte
}

// New returns an empty table.
func New() *Table {
	n := &Table{seed: maphash.MakeSeed()}
	for i := range n.stripes {
		n.stripes[i].m = make(map[string]string)
		n.pairs[i].m = make(map[string]traceinfo.Names)
	}
	return n
}

// AppendPairKey starts a pair key in b with the fairness key; the caller
// appends the group key after it. The length prefix keeps ("a\x1fb", "c")
// and ("a", "b\x1fc") apart.
func AppendPairKey(b []byte, key []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	return append(b, key...)
}

// Pair returns the interned names of key (see AppendPairKey). A known pair
// costs one lookup and no allocation; a new one interns both names, so that
// they are the strings Intern gives.
func (n *Table) Pair(key []byte) traceinfo.Names {
	st := &n.pairs[maphash.Bytes(n.seed, key)%nameStripes]
	st.mu.Lock()
	tn, ok := st.m[string(key)]
	st.mu.Unlock()
	if ok {
		return tn
	}
	keyLen, prefix := binary.Uvarint(key)
	fair := key[prefix : prefix+int(keyLen)]
	tn = traceinfo.Names{Key: n.Intern(fair), Group: n.Intern(key[prefix+len(fair):])}
	st.mu.Lock()
	if len(st.m) >= maxNamesPerStripe {
		clear(st.m)
	}
	st.m[string(key)] = tn
	st.mu.Unlock()
	return tn
}

// Intern returns the interned copy of b's contents.
func (n *Table) Intern(b []byte) string {
	st := &n.stripes[maphash.Bytes(n.seed, b)%nameStripes]
	st.mu.Lock()
	s, ok := st.m[string(b)] // no allocation: the conversion only looks up
	if !ok {
		s = string(b)
		st.add(s)
	}
	st.mu.Unlock()
	return s
}

// add stores s; called with st.mu held.
func (st *nameStripe) add(s string) {
	if len(st.m) >= maxNamesPerStripe {
		clear(st.m)
	}
	st.m[s] = s
}
