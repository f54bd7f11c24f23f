package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// The durable buffer (internal/durable): every fragment the buffer takes
// is in the log before ConsumeTraces returns, and every trace that leaves
// the buffer is marked once it is forwarded. On start, what the log holds
// of traces with no mark is buffered again with its arrival times and
// decided as usual.
//
// A segment is deleted once every fragment in it arrived before the oldest
// trace still buffered or on its way out: a pass that took traces out of
// the buffer holds their oldest arrival until it is forwarded (inflight),
// without holding up intake.

// walState is the processor's log and what it counts.
type walState struct {
	log      *durable.Log
	inflight *durable.Holds[*forward.Kept]
	retries  *forward.Retries
	replayed atomic.Int64
	traces   atomic.Int64
	// lastWarn rate-limits the write warning (Unix ns).
	lastWarn atomic.Int64
}

// walMaintainInterval is how often segments behind the buffer are deleted
// and pending marks written.
const walMaintainInterval = 250 * time.Millisecond

// openWAL opens the instance's log (durable.InstanceDir: the component ID
// and the pipeline, each instance its own): an unwritable directory, or
// one another instance or process holds, fails the collector's start,
// naming the field, the directory and the holder.
func (p *budgetTailSampler) openWAL(cfg *Config, component, pipeline string, tel *metadata.Telemetry) (*walState, error) {
	maxBytes := cfg.Durable.MaxBytes
	if maxBytes == 0 {
		maxBytes = 2 * cfg.MaxBufferedBytes
	}
	l, err := durable.OpenInstance(cfg.Durable.Directory, component, pipeline, durable.Options{Sync: cfg.Durable.Sync,
		SyncInterval: cfg.Durable.SyncInterval, SegmentBytes: cfg.Durable.SegmentBytes, MaxBytes: maxBytes,
		OnSync: func(d time.Duration) { tel.DurableSync.Record(context.Background(), d.Seconds()) }})
	if err != nil {
		return nil, fmt.Errorf("durable.directory: %w", err)
	}
	// What the next consumer refused waits for another offer in at most an
	// eighth of the buffer's bytes (encoded).
	return &walState{log: l, inflight: durable.NewHolds[*forward.Kept](), retries: p.fwd.NewRetries(cfg.MaxBufferedBytes / 8)}, nil
}

// forward hands what a pass kept on, then marks in the log every trace
// that left the buffer in it, once the next consumer took them. What it
// refused (a full exporter queue, a backend down) is offered again
// (forward.Retries), the pass's hold on the log kept and its marks
// withheld meanwhile: a crash replays its traces, a graceful stop keeps
// the log for the next start. A failed mark is not retried: its trace is
// decided again after a restart (at least once, never lost).
func (p *budgetTailSampler) forward(ctx context.Context, out *forward.Kept) {
	refused := p.fwd.Forward(ctx, out)
	if p.wal == nil {
		p.fwd.Abandon(refused)
		return
	}
	at := p.now().UnixNano()
	ids := out.Decided()
	if refused != nil {
		// A holder of its own: out's chunks need not stay alive.
		held, ids := new(forward.Kept), slices.Clone(ids)
		p.wal.inflight.Move(out, held)
		p.wal.retries.Add(refused, p.now(), func(taken bool) {
			if taken {
				_ = durable.MarkDone(p.wal.log, ids, at)
			}
			p.wal.inflight.Release(held)
		})
		return
	}
	defer p.wal.inflight.Release(out)
	_ = durable.MarkDone(p.wal.log, ids, at)
}

// noteLeft notes, for the log, a trace leaving the buffer (called with
// its shard's lock held): the pass is in flight, and its oldest arrival
// holds the log's segments, until it is forwarded.
func (p *budgetTailSampler) noteLeft(t *tracebuf.Trace, out *forward.Kept) {
	if p.wal == nil {
		return
	}
	out.NoteDecided(t.ID)
	p.wal.inflight.Hold(out, p.timeAt(t.Arrived).UnixNano())
}

// requestLog is what one request (from a gateway, or handed over by a
// peer) buffered, to be written before it is acknowledged; nil without the
// log, and its methods then do nothing.
type requestLog struct {
	p       *budgetTailSampler
	batch   *durable.Batch
	ids     []pcommon.TraceID
	proxied int
}

func (p *budgetTailSampler) newRequestLog() *requestLog {
	if p.wal == nil {
		return nil
	}
	return &requestLog{p: p, batch: p.wal.log.NewBatch()}
}

// add records a fragment the buffer took, arrived at.
func (r *requestLog) add(f *split.Fragment, at time.Time) {
	if r == nil {
		return
	}
	r.batch.AddFragment(f.ID, at.UnixNano(), f.Encoded)
	r.ids = append(r.ids, f.ID)
}

// hand holds the log at arrived until it, queued for another sampler, is
// settled; mark: a fragment proxied to its owner, written as handed.
func (p *budgetTailSampler) hand(id pcommon.TraceID, arrived time.Time, mark bool, it *handoff.Item) *durable.Handed {
	if p.wal == nil {
		return nil
	}
	h := p.wal.log.Hand(id, arrived.UnixNano(), mark)
	it.Settled = h.Settled
	return h
}

// handed writes, with the request, a fragment queued for its owner.
func (r *requestLog) handed(f *split.Fragment, at time.Time) {
	if r != nil {
		r.batch.AddHanded(f.ID, at.UnixNano(), f.Encoded)
		r.proxied++
	}
}

// commit writes what the request buffered and lets the batch go. When it
// cannot be written, the traces it joined are decided at once, as a full
// buffer's are (reason forced), and forwarded with the request: nothing
// acknowledged is only in memory. A request that proxied fragments to
// their owners is then refused (the error): they are queued, not written,
// and a crash before delivery would lose them.
func (r *requestLog) commit(now time.Time, out *forward.Kept) error {
	if r == nil {
		return nil
	}
	p := r.p
	defer p.wal.log.Free(r.batch)
	if r.batch.Len() == 0 {
		return nil
	}
	// At max_bytes the write fails with ErrFull, and the batch is dropped.
	err := p.wal.log.Commit(p.wal.log.Append(r.batch))
	if err == nil {
		return nil
	}
	if last := p.wal.lastWarn.Load(); now.UnixNano()-last > int64(10*time.Second) && p.wal.lastWarn.CompareAndSwap(last, now.UnixNano()) {
		p.logger.Warn("cannot write the durable log: the request's traces are decided now, as with a full buffer",
			zap.String("directory", p.wal.log.Dir()), zap.Error(err))
	}
	for _, id := range r.ids {
		sh := p.shardOf(id)
		sh.mu.Lock()
		if k, ok := sh.Lookup(id); ok && !k.Decided() {
			if t := sh.TraceOf(k); t != nil {
				p.decide(sh, t, now, traceinfo.ReasonForced, out)
			}
		}
		sh.mu.Unlock()
	}
	if r.proxied > 0 {
		return p.wal.log.Refuse(err)
	}
	return nil
}

// replayWAL buffers again what the log holds of undecided traces, with
// their arrival times: they are decided when their waits end, as if the
// sampler had not stopped.
func (p *budgetTailSampler) replayWAL(ctx context.Context) error {
	var unmarshaler ptrace.ProtoUnmarshaler
	var bad int64
	traces := map[[16]byte]struct{}{}
	// A request's fragments share its arrival time: consumed together
	// again, they share a slab as they did (one slab each would overrun
	// max_buffered_bytes on a full buffer's replay).
	request, at := ptrace.NewTraces(), int64(0)
	flush := func() {
		if request.ResourceSpans().Len() == 0 {
			return
		}
		n := request.SpanCount()
		if p.consume(ctx, request, time.Unix(0, at)) == nil {
			p.wal.replayed.Add(int64(n))
		}
		request = ptrace.NewTraces()
	}
	st, err := p.wal.log.Replay(func(f durable.Fragment) {
		td, err := unmarshaler.UnmarshalTraces(f.Encoded)
		if err != nil {
			bad++
			return
		}
		if f.At != at {
			flush()
			at = f.At
		}
		td.ResourceSpans().MoveAndAppendTo(request.ResourceSpans())
		traces[f.ID] = struct{}{}
	})
	flush()
	p.wal.traces.Add(int64(len(traces)))
	if err != nil {
		return fmt.Errorf("durable: replaying %s: %w", p.wal.log.Dir(), err)
	}
	if st.Fragments > 0 || st.TornTails > 0 || st.CorruptRecords > 0 {
		p.logger.Info("durable log replayed: undecided traces buffered again",
			zap.Int64("fragments", st.Fragments), zap.Int("traces", len(traces)), zap.Int64("spans", p.wal.replayed.Load()),
			zap.Int64("fragments_already_decided", st.Done), zap.Int64("torn_tails", st.TornTails), zap.Int64("corrupt_records", st.CorruptRecords),
			zap.Int64("corrupt_bytes", st.CorruptBytes), zap.Int64("undecodable_fragments", bad))
	}
	return nil
}

// maintainWAL writes pending marks, decides the oldest traces early while
// the log is at its bound (as a full buffer does), and deletes the
// segments behind the buffer.
func (p *budgetTailSampler) maintainWAL() {
	l := p.wal.log
	if l.Full() {
		if upTo, ok := l.OldestSegmentArrival(); ok {
			p.decideArrivedBy(upTo)
		}
	}
	if l.Failing() {
		_ = l.Probe() // requests are refused until the log can be written again
	}
	p.wal.retries.Offer(context.Background(), p.now(), false)
	_ = l.CommitPending()
	if _, err := l.Retain(p.oldestArrival); err != nil {
		p.logger.Warn("cannot delete a durable log segment", zap.Error(err))
	}
}

// closeWAL writes the last marks and closes the log; with every trace
// decided and forwarded (lost: some were not), the segments go too, all of
// them: what the log holds is not needed again.
func (p *budgetTailSampler) closeWAL(lost bool) {
	l := p.wal.log
	_ = l.CommitPending()
	finish := l.Close
	if !lost {
		finish = l.Discard
	}
	if err := finish(); err != nil {
		p.logger.Warn("cannot close the durable log", zap.Error(err))
	}
}

// oldestArrival is when the oldest trace still buffered, or taken out by a
// pass not yet forwarded, arrived (Unix ns); the latest possible when none
// is. The passes are read after the shards: a trace leaves its shard and
// joins its pass under the shard's lock, so it is seen in one or the other.
func (p *budgetTailSampler) oldestArrival() int64 {
	oldest := int64(math.MaxInt64)
	for _, sh := range p.shards {
		sh.mu.Lock()
		if t := sh.FirstArrived(); t != nil {
			oldest = min(oldest, p.timeAt(t.Arrived).UnixNano())
		}
		sh.EachHanded(func(t *tracebuf.Trace) { oldest = min(oldest, p.timeAt(t.Arrived).UnixNano()) })
		sh.mu.Unlock()
	}
	return min(oldest, p.wal.inflight.Oldest())
}

// decideArrivedBy decides early every buffered trace that arrived by upTo
// (Unix ns), oldest first.
func (p *budgetTailSampler) decideArrivedBy(upTo int64) {
	now := p.now()
	var out forward.Kept
	for _, sh := range p.shards {
		sh.mu.Lock()
		for t := sh.Oldest(); t != nil && p.timeAt(t.Arrived).UnixNano() <= upTo; t = sh.Oldest() {
			p.decide(sh, t, now, traceinfo.ReasonForced, &out)
		}
		sh.Flush()
		sh.mu.Unlock()
	}
	p.forward(context.Background(), &out)
}
