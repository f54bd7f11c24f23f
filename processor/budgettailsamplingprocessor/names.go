package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"hash/maphash"
	"sync"
)

// names interns service names and outlier-group keys for the whole
// processor: buffered traces and up to millions of decision-cache entries
// then share a few thousand strings instead of each holding its own (objects
// the collector's GC would mark), and a group key is looked up from the bytes
// it is built in, without allocating. One table for every shard: a table per
// shard held a copy of each name per shard and, with thousands of services,
// kept overflowing.
type names struct {
	seed    maphash.Seed
	stripes [nameStripes]nameStripe
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

func newNames() *names {
	n := &names{seed: maphash.MakeSeed()}
	for i := range n.stripes {
		n.stripes[i].m = make(map[string]string)
	}
	return n
}

// intern returns the interned copy of b's contents.
func (n *names) intern(b []byte) string {
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

// internString is intern for a name that already is a string.
func (n *names) internString(v string) string {
	st := &n.stripes[maphash.String(n.seed, v)%nameStripes]
	st.mu.Lock()
	s, ok := st.m[v]
	if !ok {
		s = v
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
