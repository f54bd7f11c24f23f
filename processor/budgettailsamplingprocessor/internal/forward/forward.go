// Package forward hands kept traces on: it collects what a decision pass
// kept (Kept), joins the kept fragments into one request per pass
// (otlpwire.Merger), stamps every span with its trace's OTEP 235 threshold
// and, when configured, the reason on root spans, and gives the request to
// the next consumer, counting what it refused.
//
// It owns the path from buffered chunks to the next consumer, and the slab
// holds that keep chunks readable until they are decoded. It must not know
// how traces were decided or buffered.
package forward // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"

import (
	"bytes"
	"context"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
)

// Meter is told what leaves, and what its decisions booked.
type Meter interface {
	Add(td ptrace.Traces, booked int64)
}

// Settings are what a Forwarder needs.
type Settings struct {
	Next   consumer.Traces
	Logger *zap.Logger
	Codec  spanmem.Codec
	Totals *spanmem.Totals
	Meter  Meter
	// ReasonAttribute, when set, is written on kept root spans.
	ReasonAttribute string
	// DryRun forwards what would not be kept too, and writes each span's
	// would-be decision in attributes (the DryRun* names) instead of th.
	DryRun bool
}

// The attributes a dry run writes on every span it forwards: whether the
// span would be kept, why, and (on spans that would be kept) the th it
// would carry.
const (
	DryRunKept      = "sampling.dry_run.kept"
	DryRunReason    = "sampling.dry_run.reason"
	DryRunThreshold = "sampling.dry_run.th"
)

// Forwarder hands kept traces on; safe for concurrent use.
type Forwarder struct {
	s         Settings
	failed    atomic.Int64 // spans the next consumer refused
	truncated atomic.Int64 // tracestates cut to 32 members when th was written
	abandoned atomic.Int64 // refused spans given up on
	lastWarn  atomic.Int64 // rate-limits the refusal warning (Unix ns)
}

// New returns a forwarder.
func New(s Settings) *Forwarder { return &Forwarder{s: s} }

// Failed is how many spans the next consumer refused.
func (f *Forwarder) Failed() int64 { return f.failed.Load() }

// Truncated is how many spans' tracestates were cut to make room for th.
func (f *Forwarder) Truncated() int64 { return f.truncated.Load() }

// Kept collects what a pass decided to keep, so that it is decoded and
// handed on after the shard's lock is released.
type Kept struct {
	traces []keptTrace
	// chunks are the kept traces' chunks, each trace's in a run: a trace's
	// own slice of them is the buffer's, reused once it is decided.
	chunks [][]byte
	// slabs are held until the chunks are forwarded.
	slabs []*spanmem.Slab
	late  []lateFragment
	// decided are the traces that left the buffer in the pass, kept or
	// not, noted for whoever records them once the pass is forwarded.
	decided []pcommon.TraceID
}

// NoteDecided notes a trace that left the buffer in the pass.
func (k *Kept) NoteDecided(id pcommon.TraceID) { k.decided = append(k.decided, id) }

// Decided are the traces noted, in order.
func (k *Kept) Decided() []pcommon.TraceID { return k.decided }

type keptTrace struct {
	from, to int // its chunks: chunks[from:to]
	mark
	booked int64 // the bytes its decision booked
}

type lateFragment struct {
	encoded []byte
	mark
	booked int64
}

// Add takes a kept trace's chunks, holding their slabs; booked is the
// bytes its decision booked.
func (k *Kept) Add(chunks []spanmem.Chunk, th sampling.Threshold, reason string, booked int64) {
	k.add(chunks, mark{th: th, reason: reason, kept: true}, booked)
}

// AddNotKept takes, for a dry run, the chunks of a trace that would not be
// kept: forwarded with the reason, outside the budget's egress.
func (k *Kept) AddNotKept(chunks []spanmem.Chunk, reason string) {
	k.add(chunks, mark{reason: reason}, 0)
}

func (k *Kept) add(chunks []spanmem.Chunk, mk mark, booked int64) {
	from := len(k.chunks)
	for _, c := range chunks {
		k.chunks = append(k.chunks, c.Data)
		if c.Slab != nil {
			c.Slab.Hold()
			k.slabs = append(k.slabs, c.Slab)
		}
	}
	k.traces = append(k.traces, keptTrace{from: from, to: len(k.chunks), mark: mk, booked: booked})
}

// AddLate keeps a copy of a fragment decided on its own (late, or at
// arrival): its encoding may be a buffer reused for the next fragment.
// reason is for a dry run's attributes.
func (k *Kept) AddLate(encoded []byte, th sampling.Threshold, reason string, booked int64) {
	k.late = append(k.late, lateFragment{encoded: bytes.Clone(encoded), mark: mark{th: th, reason: reason, kept: true}, booked: booked})
}

// AddLateNotKept keeps, for a dry run, a copy of a fragment decided on its
// own that would not be kept.
func (k *Kept) AddLateNotKept(encoded []byte, reason string) {
	k.late = append(k.late, lateFragment{encoded: bytes.Clone(encoded), mark: mark{reason: reason}})
}

// Encoded is a buffered chunk's OTLP encoding. The sampler wrote every
// chunk, so one that cannot be read means memory corruption: logged and
// skipped.
func (f *Forwarder) Encoded(chunk []byte) ([]byte, bool) {
	b, err := f.s.Codec.Load(chunk)
	if err != nil {
		f.s.Logger.Error("cannot decompress a buffered fragment", zap.Error(err))
		return nil, false
	}
	return b, true
}

// EncodedChunks are a trace's fragments as OTLP encodings, for a peer: a
// slice of their own (the trace's is reused once it leaves), and copies of
// chunks in slabs, whose memory goes back to the arena once the trace
// leaves while the peer's request is still queued.
func (f *Forwarder) EncodedChunks(chunks []spanmem.Chunk) [][]byte {
	out := make([][]byte, 0, len(chunks))
	for _, c := range chunks {
		if b, ok := f.Encoded(c.Data); ok {
			if c.Slab != nil {
				b = bytes.Clone(b)
			}
			out = append(out, b)
		}
	}
	return out
}

// mark is what a kept fragment's spans are stamped with.
type mark struct {
	th     sampling.Threshold
	reason string // on the root span, when configured
	kept   bool   // false only in a dry run
}

// merged is one outgoing request being assembled.
type merged struct {
	m      *otlpwire.Merger
	marks  []mark // per fragment
	booked int64
	// metered: what it holds is kept, and counts in the egress meter.
	metered bool
}

func newMerged(metered bool) *merged { return &merged{m: otlpwire.NewMerger(), metered: metered} }

func (m *merged) add(encoded []byte, mk mark) {
	m.m.Add(encoded)
	m.marks = append(m.marks, mk)
}

// Forward hands kept traces on. Traces decided while serving a request
// (forced by the bounds, or by the span limit) belong to other requests:
// they go with a context of their own, so that one client's metadata
// (auth, tenant) never travels with another's spans. Late fragments are
// the request's own and keep its context. It returns what the next
// consumer refused (nil: nothing), for a caller that offers it again
// (Retries) or gives it up (Abandon).
func (f *Forwarder) Forward(ctx context.Context, k *Kept) *Refused {
	// What the next consumer holds was decoded, copied out of the chunks.
	defer func() {
		for _, sl := range k.slabs {
			f.s.Totals.LetGo(sl)
		}
		k.slabs = nil
	}()
	// A dry run's would-be-dropped spans leave in requests of their own,
	// which the egress meter does not count.
	// Built when first needed: most passes, and most requests' late
	// fragments, have nothing of one kind or the other.
	var kept, notKept *merged
	which := func(mk mark) *merged {
		switch {
		case mk.kept && kept == nil:
			kept = newMerged(true)
		case !mk.kept && notKept == nil:
			notKept = newMerged(false)
		}
		if mk.kept {
			return kept
		}
		return notKept
	}
	for _, kt := range k.traces {
		m := which(kt.mark)
		m.booked += kt.booked
		// The root span may sit in any chunk: every chunk is offered the reason.
		for _, chunk := range k.chunks[kt.from:kt.to] {
			if encoded, ok := f.Encoded(chunk); ok {
				m.add(encoded, kt.mark)
			}
		}
	}
	var refused Refused
	refused.add(f.forwardMerged(context.Background(), kept))
	refused.add(f.forwardMerged(context.Background(), notKept))
	kept, notKept = nil, nil
	for _, lf := range k.late {
		m := which(lf.mark)
		m.booked += lf.booked
		m.add(lf.encoded, lf.mark)
	}
	refused.add(f.forwardMerged(ctx, kept))
	refused.add(f.forwardMerged(ctx, notKept))
	if len(refused.reqs) == 0 {
		return nil
	}
	out := refused // refused itself stays on the stack
	return &out
}

// forwardMerged decodes the fragments m holds as one request, stamps each
// span with its mark and hands it on; it returns the request if the next
// consumer refused it.
func (f *Forwarder) forwardMerged(ctx context.Context, m *merged) (refused ptrace.Traces, ok bool) {
	if m == nil || m.m.Len() == 0 {
		return refused, false
	}
	var u ptrace.ProtoUnmarshaler
	encoded, from, err := m.m.Merged()
	if err == nil {
		var td ptrace.Traces
		if td, err = u.UnmarshalTraces(encoded); err == nil {
			marks := make([]mark, len(from))
			for i, c := range from {
				marks[i] = m.marks[c]
			}
			f.stamp(td, marks)
			if m.metered {
				f.s.Meter.Add(td, m.booked)
			}
			return f.consume(ctx, td)
		}
	}
	// The sampler marshaled every fragment itself, so this takes memory
	// corruption; what can still be read goes on, fragment by fragment.
	f.s.Logger.Error("cannot merge kept fragments", zap.Int("fragments", m.m.Len()), zap.Error(err))
	return f.forwardEach(ctx, m)
}

// forwardEach decodes the fragments m holds one by one, a ResourceSpans
// each, and hands them on as one request (returned if refused).
func (f *Forwarder) forwardEach(ctx context.Context, m *merged) (ptrace.Traces, bool) {
	var u ptrace.ProtoUnmarshaler
	out := ptrace.NewTraces()
	var marks []mark
	for i := range m.m.Len() {
		td, err := u.UnmarshalTraces(m.m.Fragment(i))
		if err != nil {
			f.s.Logger.Error("cannot decode a kept fragment", zap.Error(err))
			continue
		}
		marks = marks[:0]
		for range td.SpanCount() {
			marks = append(marks, m.marks[i])
		}
		f.stamp(td, marks)
		td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	if m.metered {
		f.s.Meter.Add(out, m.booked)
	}
	return f.consume(ctx, out)
}

// consume hands td to the next consumer; it returns td, and true, if the
// consumer refused it (counted).
func (f *Forwarder) consume(ctx context.Context, td ptrace.Traces) (ptrace.Traces, bool) {
	err := f.s.Next.ConsumeTraces(ctx, td)
	if err == nil {
		return td, false
	}
	f.failed.Add(int64(td.SpanCount()))
	if now := time.Now().UnixNano(); now-f.lastWarn.Load() > int64(10*time.Second) {
		f.lastWarn.Store(now)
		f.s.Logger.Warn("next consumer refused kept traces", zap.Int("spans", td.SpanCount()), zap.Error(err))
	}
	return td, true
}

// stamp writes each span's threshold (marks, in the order of td's spans)
// into its tracestate, keeping its other members, and, when configured,
// the reason on root spans.
func (f *Forwarder) stamp(td ptrace.Traces, marks []mark) {
	var lastIn, lastOut string
	var lastID pcommon.TraceID
	var lastTh sampling.Threshold
	var lastProblem otep235.Problem
	haveLast := false
	i := 0
	spanwalk.Traces(td, func(_ ptrace.ResourceSpans, span ptrace.Span) {
		m := marks[i]
		i++
		if f.s.DryRun {
			// The spans leave as they came (their th untouched): the
			// decision is only written beside them.
			attrs := span.Attributes()
			attrs.PutBool(DryRunKept, m.kept)
			attrs.PutStr(DryRunReason, m.reason)
			if m.kept {
				attrs.PutStr(DryRunThreshold, m.th.TValue())
			}
			return
		}
		in := span.TraceState().AsRaw()
		if !haveLast || in != lastIn || span.TraceID() != lastID || m.th != lastTh {
			lastIn, lastID, lastTh, haveLast = in, span.TraceID(), m.th, true
			lastOut, lastProblem = otep235.WithThreshold(in, m.th, sampling.TraceIDToRandomness(lastID))
		}
		if lastProblem == otep235.Truncated {
			f.truncated.Add(1)
		}
		span.TraceState().FromRaw(lastOut)
		if m.reason != "" && f.s.ReasonAttribute != "" && span.ParentSpanID().IsEmpty() {
			span.Attributes().PutStr(f.s.ReasonAttribute, m.reason)
		}
	})
}
