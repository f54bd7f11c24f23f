package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/traceroute"
)

// Hold-off after failed sends: a sampler that failed is sent nothing by
// the rounds for holdOffBase, doubling with each further failure up to
// holdOffMax; a send that is answered ends it. Meanwhile its parts go
// down the pipeline to the exporter's queue, whose retries back off as
// contrib's load_balancing does. memory_limiter re-checks its memory once
// a second (check_interval in the shipped configs); without a pause a
// refusing sampler was sent every round's fresh spans, twice contrib's
// refused volume in the overload test.
const (
	holdOffBase = time.Second
	holdOffMax  = 16 * time.Second
)

// senderIdle is how long a sampler's sender waits for parts before it
// ends: samplers come and go (a restarted pod has a new address).
const senderIdle = time.Minute

// queued is a part waiting for its sampler.
type queued struct {
	ctx  context.Context
	part *traceroute.Part
}

// senders are the samplers' senders, by endpoint: each sampler has its own
// bounded queue and at most num_workers sends at once, so a slow or dead
// sampler holds only its own parts, never another sampler's.
type senders struct {
	r       *routerReceiver
	mu      sync.Mutex
	byName  map[string]*sender
	closed  bool
	running sync.WaitGroup
}

type sender struct {
	endpoint string
	queue    chan queued
	slots    chan struct{}
	// failures since the last answered send; heldUntil ends the hold-off.
	failures  int
	heldUntil time.Time
	// spillUntil: parts go down the pipeline without waiting for room.
	spillUntil time.Time
	mu         sync.Mutex
}

func newSenders(r *routerReceiver) *senders {
	return &senders{r: r, byName: map[string]*sender{}}
}

// queueWait is how long a round waits for room in a busy sampler's queue
// before its part goes down the pipeline instead: a burst is absorbed
// (the pipeline's path decodes and encodes again, several times the cost),
// a slow sampler costs a round at most this once a second (spilled).
const queueWait = 200 * time.Millisecond

// spillFor is how long after a part found no room a sampler's next parts
// go down the pipeline without waiting.
const spillFor = time.Second

// enqueue gives p to its sampler's sender; a part its sampler is held off
// for, or whose sampler's queue stays full, goes down the pipeline
// instead.
func (ss *senders) enqueue(ctx context.Context, p *traceroute.Part) {
	ss.mu.Lock()
	s := ss.byName[p.Sampler]
	if s == nil {
		s = &sender{endpoint: p.Sampler, queue: make(chan queued, ss.r.cfg.SamplerQueueSize),
			slots: make(chan struct{}, ss.r.cfg.NumWorkers)}
		ss.byName[p.Sampler] = s
		ss.running.Add(1)
		go ss.run(s)
	}
	now := time.Now()
	held, queuedOK := s.heldOff(now), false
	if !held {
		// Under ss.mu: a sender ends (closing its queue) under it too.
		select {
		case s.queue <- queued{ctx: ctx, part: p}:
			queuedOK = true
		default:
		}
	}
	ss.mu.Unlock()
	switch {
	case queuedOK:
		return
	case held:
		ss.r.tel.ToPipeline.Add(ctx, int64(p.Spans), ss.r.causes[causeHeldOff])
		ss.r.giveBack(ctx, p)
		return
	}
	if !s.spilling(now) {
		// A full queue is not closed by its sender (it ends only once
		// idle and empty), nor at shutdown before the rounds are done.
		t := time.NewTimer(queueWait)
		defer t.Stop()
		select {
		case s.queue <- queued{ctx: ctx, part: p}:
			return
		case <-t.C:
		}
	}
	s.spilled(time.Now())
	ss.r.tel.ToPipeline.Add(ctx, int64(p.Spans), ss.r.causes[causeQueueFull])
	ss.r.giveBack(ctx, p)
}

// run sends s's parts, num_workers at once, until its queue is closed, or
// it was idle for senderIdle.
func (ss *senders) run(s *sender) {
	defer ss.running.Done()
	var sends sync.WaitGroup
	defer sends.Wait()
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		select {
		case q, ok := <-s.queue:
			if !ok {
				return
			}
			s.slots <- struct{}{}
			sends.Add(1)
			go func() {
				defer sends.Done()
				defer func() { <-s.slots }()
				ss.deliver(s, q)
			}()
			idle.Reset(senderIdle)
		case <-idle.C:
			ss.mu.Lock()
			if len(s.queue) == 0 && !ss.closed {
				delete(ss.byName, s.endpoint)
				close(s.queue)
				ss.mu.Unlock()
				return
			}
			ss.mu.Unlock()
			idle.Reset(senderIdle)
		}
	}
}

// deliver sends one part; on a failure the sampler is held off and the
// part goes down the pipeline.
func (ss *senders) deliver(s *sender, q queued) {
	r := ss.r
	if s.heldOff(time.Now()) {
		r.tel.ToPipeline.Add(q.ctx, int64(q.part.Spans), r.causes[causeHeldOff])
		r.giveBack(q.ctx, q.part)
		return
	}
	res := r.router.Send(q.ctx, q.part)
	if res.Err != nil {
		s.failed(time.Now())
		r.tel.ToPipeline.Add(q.ctx, int64(q.part.Spans), r.causes[causeSendFailed])
		r.giveBack(q.ctx, q.part)
		return
	}
	s.answered()
	r.tel.Routed.Add(q.ctx, int64(q.part.Spans-res.Rejected))
	charge := partCharge(q.part)
	r.router.Recycle(q.part)
	r.release(charge)
}

func (s *sender) heldOff(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.heldUntil)
}

func (s *sender) failed(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	d := holdOffBase << min(s.failures-1, 4)
	s.heldUntil = now.Add(min(d, holdOffMax))
}

func (s *sender) spilling(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.spillUntil)
}

func (s *sender) spilled(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spillUntil = now.Add(spillFor)
}

func (s *sender) answered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures, s.heldUntil = 0, time.Time{}
}

// close ends every sender once its queue is sent; no part is queued after.
func (ss *senders) close() {
	ss.mu.Lock()
	ss.closed = true
	for name, s := range ss.byName {
		close(s.queue)
		delete(ss.byName, name)
	}
	ss.mu.Unlock()
	ss.running.Wait()
}

// decodedFactor is how much more a part takes decoded (pdata) than
// encoded, charged while it is handed to the pipeline.
const decodedFactor = 4

// handOnJob is a part a sampler did not take, decoded, waiting for the
// pipeline to take it; charge is what it holds against
// max_inflight_bytes.
type handOnJob struct {
	ctx    context.Context
	td     ptrace.Traces
	charge int64
}

// giveBack decodes a part its sampler did not take and queues it for the
// pipeline (memory_limiter, then the exporter's queue, which routes it
// again), charged decoded until it is taken. The queue is bounded: when
// the pipeline refuses for long, giving back waits, rounds wait, and
// max_inflight_bytes refuses new requests.
func (r *routerReceiver) giveBack(ctx context.Context, p *traceroute.Part) {
	charge := partCharge(p)
	decoded := decodedFactor * int64(len(p.Bytes))
	r.charge(decoded)
	td, lost := r.router.GiveBack(p)
	if lost > 0 {
		r.tel.Lost.Add(ctx, int64(lost))
	}
	p.Bytes = nil // not recycled: the transport may still read it
	r.release(charge)
	if td.SpanCount() == 0 {
		r.release(decoded)
		return
	}
	r.handOns <- handOnJob{ctx: ctx, td: td, charge: decoded}
}

// handOnLoop hands the decoded parts to the pipeline.
func (r *routerReceiver) handOnLoop() {
	defer r.handOnDone.Done()
	for j := range r.handOns {
		r.handOn(j.ctx, j.td)
		r.release(j.charge)
	}
}

// handOn gives spans a sampler did not take to the pipeline
// (memory_limiter, then the exporter's queue). While the pipeline refuses
// them (memory_limiter above its limit), it retries, their bytes still
// charged, so that max_inflight_bytes fills and new requests are refused
// instead: what a client was told is taken is not dropped. It gives up,
// counted and logged, only on a permanent error or when shutdown's time
// is up.
func (r *routerReceiver) handOn(ctx context.Context, td ptrace.Traces) {
	n := int64(td.SpanCount())
	wait := 50 * time.Millisecond
	for {
		err := r.next.ConsumeTraces(ctx, td)
		if err == nil {
			return
		}
		if consumererror.IsPermanent(err) || r.stopped() {
			r.tel.Lost.Add(ctx, n)
			r.set.Logger.Error("spans a sampler did not take were refused by the pipeline; dropped", zap.Int64("spans", n), zap.Error(err))
			return
		}
		select {
		case <-time.After(wait):
		case <-r.stop:
		}
		wait = min(2*wait, time.Second)
	}
}

// stopped: shutdown's time is up.
func (r *routerReceiver) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}
