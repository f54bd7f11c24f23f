package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"sync"
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
	rnd         sampling.Randomness
	hasRnd      bool
	links       [2]link
	inRootList  bool
}

// summary is what the policy decides on, gathered as spans arrive: per
// fragment while a request is split, then merged into the trace.
type summary struct {
	spans    int
	hasError bool
	hasRoot  bool
	minStart pcommon.Timestamp
	maxEnd   pcommon.Timestamp
	// service and group are the root span's, else the first span's.
	service string
	group   string
}

// merge folds a fragment's summary in; it reports whether o brought the
// trace's root span.
func (s *summary) merge(o *summary) (rootArrived bool) {
	if s.spans == 0 {
		s.service, s.group = o.service, o.group
	}
	s.spans += o.spans
	s.hasError = s.hasError || o.hasError
	if o.minStart != 0 && (s.minStart == 0 || o.minStart < s.minStart) {
		s.minStart = o.minStart
	}
	s.maxEnd = max(s.maxEnd, o.maxEnd)
	if o.hasRoot && !s.hasRoot {
		s.hasRoot = true
		s.service, s.group = o.service, o.group
		return true
	}
	return false
}

type link struct{ prev, next *trace }

const (
	arrivalList = iota
	rootList
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

// decision and reason index the counters.
type decision uint8

const (
	notSampled decision = iota
	sampled
)

var decisionNames = [...]string{"not_sampled", "sampled"}

type reason uint8

const (
	reasonError reason = iota
	reasonOutlier
	reasonBaseline
	reasonForced
	reasonSpanLimit
	reasonLateSpan
	numReasons
)

var reasonNames = [...]string{"error", "outlier", "baseline", "forced", "span_limit", "late_span"}

type invalidCause uint8

const (
	invalidZeroTraceID invalidCause = iota
	invalidMissingServiceName
	invalidEndBeforeStart
	numInvalidCauses
)

var invalidNames = [...]string{"zero_trace_id", "missing_service_name", "end_before_start"}

// counters are cumulative totals, kept per shard under its lock.
type counters struct {
	traces           [2][numReasons]int64
	spans            [2]int64
	bytes            [2]int64
	late             [2]int64
	invalid          [numInvalidCauses]int64
	droppedTooEarly  int64
	priorityOverflow int64
}

func (c *counters) add(o *counters) {
	for d := range c.traces {
		for r := range c.traces[d] {
			c.traces[d][r] += o.traces[d][r]
		}
		c.spans[d] += o.spans[d]
		c.bytes[d] += o.bytes[d]
		c.late[d] += o.late[d]
	}
	for i := range c.invalid {
		c.invalid[i] += o.invalid[i]
	}
	c.droppedTooEarly += o.droppedTooEarly
	c.priorityOverflow += o.priorityOverflow
}

// volumes is what one adjust interval saw, in budget units.
type volumes struct {
	baseline map[string]float64 // per service, traces that were not priority
	priority float64
	kept     float64
}

func newVolumes() volumes { return volumes{baseline: make(map[string]float64)} }

// shard is one slice of the buffer, chosen by trace ID.
type shard struct {
	mu         sync.Mutex
	traces     map[pcommon.TraceID]*trace
	arrivals   traceList
	roots      traceList
	bytes      int64
	maxTraces  int
	maxBytes   int64
	sampled    *idCache[sampling.Threshold]
	notSampled *idCache[struct{}]
	counters   counters
	volumes    volumes
}

func newShard(cfg *Config, n int) *shard {
	per := func(total int) int { return max(1, (total+n-1)/n) }
	return &shard{
		traces:     make(map[pcommon.TraceID]*trace),
		arrivals:   traceList{which: arrivalList},
		roots:      traceList{which: rootList},
		maxTraces:  per(cfg.MaxTraces),
		maxBytes:   max(1, (cfg.MaxBufferedBytes+int64(n)-1)/int64(n)),
		sampled:    newIDCache[sampling.Threshold](per(cfg.DecisionCache.SampledSize)),
		notSampled: newIDCache[struct{}](per(cfg.DecisionCache.NotSampledSize)),
		volumes:    newVolumes(),
	}
}

// remove takes t out of the buffer.
func (s *shard) remove(t *trace) {
	delete(s.traces, t.id)
	s.arrivals.remove(t)
	if t.inRootList {
		s.roots.remove(t)
		t.inRootList = false
	}
	s.bytes -= t.bytes
}
