package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// trace is what the buffer holds of one undecided trace: its spans as
// marshaled OTLP fragments (a fraction of pdata's in-memory size) and the
// summary the policy decides on, gathered as the spans arrived.
type trace struct {
	summary
	id          pcommon.TraceID
	arrived     time.Time
	rootArrived time.Time
	chunks      [][]byte
	bytes       int64
	links       [3]link
	inRootList  bool
	// handed: part of the trace came from a peer with an earlier arrival
	// time; it waits in the shard's handed list instead of arrivals.
	handed bool
	// hops counts the samplers that passed the trace on; past maxHops it is
	// decided where it is, whatever the ring says.
	hops uint8
	// recent are the fingerprints of the last fragments, to drop a fragment
	// that arrives twice: a gateway retrying a request, part of which was
	// delivered, re-sends that part.
	recent [4]uint64
}

// seen reports whether a fragment with this fingerprint arrived before, and
// remembers it otherwise.
func (t *trace) seen(fp uint64) bool { return seenBefore(t.recent[:], fp) }

// lastFingerprints are what its decision remembers of t's fragments.
func (t *trace) lastFingerprints() [2]uint64 { return [2]uint64{t.recent[0], t.recent[1]} }

// seenBefore reports whether fp is among the recent fingerprints, newest
// first; if not, it becomes the newest and the oldest goes.
func seenBefore(recent []uint64, fp uint64) bool {
	if slices.Contains(recent, fp) {
		return true
	}
	copy(recent[1:], recent[:len(recent)-1])
	recent[0] = fp
	return false
}

// summary is what the policy decides on, gathered as spans arrive: per
// fragment while a request is split, then merged into the trace.
type summary struct {
	spans    int
	hasError bool
	hasRoot  bool
	// dur is the root span's own duration, or, while no root has arrived, the
	// longest span's: one host's clock, so skew between hosts cannot make a
	// trace look slow.
	dur time.Duration
	// service and group are the root span's, else the longest span's (the
	// top-most one present when a proxy never exports the root).
	service string
	group   string
	// tIn is the largest consistent th among the spans: the probability the
	// trace arrived with (head sampling); hasTIn false means 1.
	tIn    sampling.Threshold
	hasTIn bool
	// rnd is an explicit rv, when a span carried one.
	rnd    sampling.Randomness
	hasRnd bool
	// stampBytes estimates what writing th will add to the spans.
	stampBytes int64
	// rules has a bit per rule some span of the trace matched.
	rules uint64
	// fp fingerprints a fragment's spans (order-independent), so that the
	// same fragment delivered twice is recognised.
	fp uint64
}

// merge folds a fragment's summary in; it reports whether o brought the
// trace's root span.
func (s *summary) merge(o *summary) (rootArrived bool) {
	s.spans += o.spans
	s.hasError = s.hasError || o.hasError
	s.stampBytes += o.stampBytes
	s.rules |= o.rules
	if o.hasTIn && (!s.hasTIn || sampling.ThresholdGreater(o.tIn, s.tIn)) {
		s.tIn, s.hasTIn = o.tIn, true
	}
	if o.hasRnd && !s.hasRnd {
		s.rnd, s.hasRnd = o.rnd, true
	}
	switch {
	case o.hasRoot && !s.hasRoot:
		s.hasRoot = true
		s.service, s.group, s.dur = o.service, o.group, o.dur
		return true
	case !s.hasRoot && (s.group == "" || o.dur > s.dur):
		s.service, s.group, s.dur = o.service, o.group, o.dur
	}
	return false
}

// randomness is the trace's OTEP 235 randomness: rv, else the trace ID's.
func (s *summary) randomness(id pcommon.TraceID) sampling.Randomness {
	if s.hasRnd {
		return s.rnd
	}
	return sampling.TraceIDToRandomness(id)
}

// inThreshold is the threshold the trace arrived with.
func (s *summary) inThreshold() sampling.Threshold {
	if s.hasTIn {
		return s.tIn
	}
	return sampling.AlwaysSampleThreshold
}

type link struct{ prev, next *trace }

const (
	arrivalList = iota
	rootList
	handedList
)

// traceList is an intrusive FIFO: traces are appended in arrival order, so
// the head is always the next to time out, and removal is O(1).
type traceList struct {
	head, tail *trace
	which      int
}

func (l *traceList) pushBack(t *trace) {
	lk := &t.links[l.which]
	lk.prev, lk.next = l.tail, nil
	if l.tail != nil {
		l.tail.links[l.which].next = t
	} else {
		l.head = t
	}
	l.tail = t
}

func (l *traceList) remove(t *trace) {
	lk := &t.links[l.which]
	if lk.prev != nil {
		lk.prev.links[l.which].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[l.which].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
}

// idCache remembers the last size trace IDs put in it (FIFO eviction).
type idCache[V any] struct {
	m    map[pcommon.TraceID]V
	ring []pcommon.TraceID
	next int
	size int
}

func newIDCache[V any](size int) *idCache[V] {
	return &idCache[V]{m: make(map[pcommon.TraceID]V), size: size}
}

func (c *idCache[V]) get(id pcommon.TraceID) (V, bool) {
	v, ok := c.m[id]
	return v, ok
}

// recent calls f with the entries newest first, until f returns false.
func (c *idCache[V]) recent(f func(pcommon.TraceID, V) bool) {
	n := len(c.ring)
	newest := n - 1
	if n == c.size {
		newest = (c.next - 1 + n) % n
	}
	for i := range n {
		id := c.ring[(newest-i+n)%n]
		if !f(id, c.m[id]) {
			return
		}
	}
}

func (c *idCache[V]) put(id pcommon.TraceID, v V) {
	if _, ok := c.m[id]; ok {
		c.m[id] = v
		return
	}
	if len(c.ring) < c.size {
		c.ring = append(c.ring, id)
	} else {
		delete(c.m, c.ring[c.next])
		c.ring[c.next] = id
		c.next = (c.next + 1) % c.size
	}
	c.m[id] = v
}

// decided is what the decision caches remember of a trace, so that its late
// spans follow the decision, are booked to the class and service the trace
// was decided in, and a late error can still be kept.
type decided struct {
	th      sampling.Threshold
	service string // the key its volume is booked under
	class   reason // the volume class: error, outlier, baseline or rule
	rule    int16  // the rule that decided it, or -1
	at      int64  // when, in Unix nanoseconds: recent decisions travel on handoff
	// recent fingerprints the trace's last fragments, so that one delivered
	// again after the decision is dropped rather than followed twice.
	recent [2]uint64
}

// seen reports whether a late fragment with this fingerprint arrived
// before, and remembers it otherwise.
func (d *decided) seen(fp uint64) bool { return seenBefore(d.recent[:], fp) }

// shard is one slice of the buffer, chosen by trace ID. The bounds
// (max_traces, max_buffered_bytes) are the processor's, not the shard's.
type shard struct {
	mu       sync.Mutex
	traces   map[pcommon.TraceID]*trace
	arrivals traceList
	roots    traceList
	// handed holds traces whose first part arrived at another sampler:
	// not in arrival order, so decideExpired scans it whole (it only holds
	// what moved in the last ring change).
	handed     traceList
	bytes      int64
	spans      int64
	sampled    *idCache[decided]
	notSampled *idCache[decided]
	counters   counters
	volumes    volumes
	// intake is the volume received while the sampler measures its first
	// rates (priming); unused otherwise.
	intake float64
	// fragments counts what arrived since the last adjustment: an interval
	// with fragments but no decision is not idle, only between bursts.
	fragments int64
	totals    *bufferTotals
	// pendingTraces and pendingBytes are changes not yet added to totals:
	// adding every trace's to counters all cores share would make every
	// core wait on the same cache line.
	pendingTraces int64
	pendingBytes  int64
}

// bufferTotals are the whole processor's buffered traces and bytes, the
// figures max_traces and max_buffered_bytes bound. Shards add their changes
// in steps (flushTraces, flushBytes), so the totals trail the shards by at
// most a step per shard: at most 1/64 of either bound over all shards.
type bufferTotals struct {
	traces atomic.Int64
	bytes  atomic.Int64
	// The steps: at most 32 traces and 64 KiB, at least 1.
	flushTraces, flushBytes int64
}

func newBufferTotals(cfg *Config, shards int) bufferTotals {
	step := func(bound, most int64) int64 { return min(max(bound/int64(shards*64), 1), most) }
	return bufferTotals{flushTraces: step(int64(cfg.MaxTraces), 32), flushBytes: step(cfg.MaxBufferedBytes, 64<<10)}
}

// account records a change of the shard's buffer; called with s.mu held.
func (s *shard) account(traces, bytes int64) {
	s.pendingTraces += traces
	s.pendingBytes += bytes
	t := s.totals
	if s.pendingTraces >= t.flushTraces || s.pendingTraces <= -t.flushTraces ||
		s.pendingBytes >= t.flushBytes || s.pendingBytes <= -t.flushBytes {
		s.flush()
	}
}

// flush adds the shard's pending changes to the totals; called with s.mu held.
func (s *shard) flush() {
	if s.pendingTraces != 0 {
		s.totals.traces.Add(s.pendingTraces)
	}
	if s.pendingBytes != 0 {
		s.totals.bytes.Add(s.pendingBytes)
	}
	s.pendingTraces, s.pendingBytes = 0, 0
}

func newShard(cfg *Config, n int, totals *bufferTotals, rules int) *shard {
	per := func(total int) int { return max(1, (total+n-1)/n) }
	return &shard{
		traces:     make(map[pcommon.TraceID]*trace),
		arrivals:   traceList{which: arrivalList},
		roots:      traceList{which: rootList},
		handed:     traceList{which: handedList},
		sampled:    newIDCache[decided](per(cfg.DecisionCache.SampledSize)),
		notSampled: newIDCache[decided](per(cfg.DecisionCache.NotSampledSize)),
		volumes:    newVolumes(rules),
		totals:     totals,
		counters:   counters{rules: make([]ruleCounters, rules)},
	}
}

// remove takes t out of the buffer.
func (s *shard) remove(t *trace) {
	delete(s.traces, t.id)
	if t.handed {
		s.handed.remove(t)
	} else {
		s.arrivals.remove(t)
	}
	if t.inRootList {
		s.roots.remove(t)
		t.inRootList = false
	}
	s.bytes -= t.bytes
	s.spans -= int64(t.spans)
	s.account(-1, -t.bytes)
}

// add puts a new trace in the buffer; a handed one (from a peer) waits in
// the handed list.
func (s *shard) add(t *trace, handed bool) {
	s.traces[t.id] = t
	t.handed = handed
	if handed {
		s.handed.pushBack(t)
	} else {
		s.arrivals.pushBack(t)
	}
	s.account(1, 0)
}

// oldest is the trace to decide first when the buffer must shrink.
func (s *shard) oldest() *trace {
	if s.arrivals.head != nil {
		return s.arrivals.head
	}
	return s.handed.head
}

// arrivedEarlier moves t to the handed list with an earlier arrival time
// (a peer held part of it first).
func (s *shard) arrivedEarlier(t *trace, at time.Time) {
	if !at.Before(t.arrived) {
		return
	}
	t.arrived = at
	if !t.handed {
		s.arrivals.remove(t)
		if t.inRootList {
			s.roots.remove(t)
			t.inRootList = false
		}
		t.handed = true
		s.handed.pushBack(t)
	}
}

// grow accounts a chunk appended to t.
func (s *shard) grow(t *trace, n int64) {
	t.bytes += n
	s.bytes += n
	s.account(0, n)
}
