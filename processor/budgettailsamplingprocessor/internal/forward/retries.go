package forward // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Refused is what the next consumer refused of one Forward: its requests,
// stamped and metered, ready to be offered again.
type Refused struct {
	reqs  []ptrace.Traces
	spans int64
	bytes int64
}

func (r *Refused) add(td ptrace.Traces, refused bool) {
	if !refused {
		return
	}
	r.reqs = append(r.reqs, td)
	r.spans += int64(td.SpanCount())
	var sizer ptrace.ProtoMarshaler
	r.bytes += int64(sizer.TracesSize(td))
}

// Spans is how many spans were refused.
func (r *Refused) Spans() int64 { return r.spans }

// Abandon gives up what was refused: counted, never offered again.
func (f *Forwarder) Abandon(r *Refused) {
	if r != nil {
		f.abandoned.Add(r.spans)
	}
}

// Abandoned is how many refused spans were given up on.
func (f *Forwarder) Abandoned() int64 { return f.abandoned.Load() }

// Retry waits: the first offer again after RetryFirst, each later one
// twice as long, up to RetryMax.
const (
	RetryFirst = time.Second
	RetryMax   = 30 * time.Second
)

// Retries holds what the next consumer refused (a full exporter queue, a
// backend down), oldest first, within a bound on its encoded bytes, and
// offers it again with a growing wait. Each entry says, through its done
// func, whether it was taken in the end: the durable log keeps a pass's
// traces, unmarked, until then. Past the bound the oldest is given up
// (done(false), counted). Safe for concurrent use.
type Retries struct {
	f        *Forwarder
	maxBytes int64

	mu    sync.Mutex
	items []*retry
	bytes int64
	// offering is the entry Offer is offering, never given up meanwhile.
	offering *retry
	spans    atomic.Int64
}

type retry struct {
	refused *Refused
	done    func(taken bool)
	due     time.Time
	wait    time.Duration
}

// NewRetries holds at most maxBytes (encoded) of refused requests.
func (f *Forwarder) NewRetries(maxBytes int64) *Retries {
	return &Retries{f: f, maxBytes: maxBytes}
}

// Pending is how many spans are held for another offer.
func (q *Retries) Pending() int64 { return q.spans.Load() }

// Add holds r, refused at now; done is called once with whether it was
// taken in the end.
func (q *Retries) Add(r *Refused, now time.Time, done func(taken bool)) {
	q.mu.Lock()
	q.items = append(q.items, &retry{refused: r, done: done, due: now.Add(RetryFirst), wait: RetryFirst})
	q.bytes += r.bytes
	q.spans.Add(r.spans)
	var evicted []*retry
	for q.bytes > q.maxBytes && len(q.items) > 1 && q.items[0] != q.offering {
		evicted = append(evicted, q.items[0])
		q.pop()
	}
	q.mu.Unlock()
	for _, e := range evicted {
		q.f.Abandon(e.refused)
		e.done(false)
	}
}

// pop removes the oldest; called with q.mu held.
func (q *Retries) pop() {
	q.bytes -= q.items[0].refused.bytes
	q.spans.Add(-q.items[0].refused.spans)
	q.items[0] = nil
	q.items = q.items[1:]
}

// Offer offers the held requests again, oldest first, those whose wait is
// over at now (every one with all), and stops at the first the next
// consumer refuses (its wait doubles). It returns how many are still held.
func (q *Retries) Offer(ctx context.Context, now time.Time, all bool) int {
	for {
		q.mu.Lock()
		if len(q.items) == 0 || (!all && now.Before(q.items[0].due)) {
			n := len(q.items)
			q.mu.Unlock()
			return n
		}
		head := q.items[0]
		q.offering = head
		q.mu.Unlock()
		var still Refused
		for _, td := range head.refused.reqs {
			still.add(q.f.consume(ctx, td))
		}
		q.mu.Lock()
		q.offering = nil
		if len(still.reqs) > 0 {
			// What was taken of it is not offered again.
			q.bytes += still.bytes - head.refused.bytes
			q.spans.Add(still.spans - head.refused.spans)
			head.refused = &still
			head.wait = min(2*head.wait, RetryMax)
			head.due = now.Add(head.wait)
			n := len(q.items)
			q.mu.Unlock()
			return n
		}
		q.pop() // head: only Offer takes entries off the front while offering
		q.mu.Unlock()
		head.done(true)
	}
}

// GiveUp calls done(false) for everything still held, counted as
// abandoned, and returns how many spans that was.
func (q *Retries) GiveUp() int64 {
	q.mu.Lock()
	items := q.items
	q.items, q.bytes = nil, 0
	n := q.spans.Swap(0)
	q.mu.Unlock()
	for _, it := range items {
		q.f.Abandon(it.refused)
		it.done(false)
	}
	return n
}
