package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"bytes"
	"context"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
)

// keptSet collects what a pass decided to keep, so that it is unmarshaled
// and handed on after the shard's lock is released.
type keptSet struct {
	traces []keptTrace
	// chunks are the kept traces' chunks, each trace's in a run: a trace's
	// own slice of them is in the store, reused once it is decided.
	chunks [][]byte
	// slabs are held until the chunks are forwarded (see slabArena).
	slabs []*slab
	late  []lateFragment
}

type keptTrace struct {
	from, to int // its chunks: chunks[from:to]
	th       sampling.Threshold
	reason   string
	booked   int64 // the bytes its decision booked
}

type lateFragment struct {
	encoded []byte
	th      sampling.Threshold
	booked  int64
}

// encoded is a buffered chunk's OTLP encoding. We wrote every chunk, so
// one that cannot be read means memory corruption: logged and skipped.
func (p *budgetTailSampler) encoded(chunk []byte) ([]byte, bool) {
	b, err := p.codec.load(chunk)
	if err != nil {
		p.logger.Error("cannot decompress a buffered fragment", zap.Error(err))
		return nil, false
	}
	return b, true
}

// encodedChunks are a trace's fragments as OTLP encodings, for a peer: a
// slice of their own (the trace's is reused once it leaves), and copies of
// chunks in slabs, whose memory goes back to the arena once the trace
// leaves while the peer's request is still queued.
func (p *budgetTailSampler) encodedChunks(chunks []heldChunk) [][]byte {
	out := make([][]byte, 0, len(chunks))
	for _, c := range chunks {
		if b, ok := p.encoded(c.data); ok {
			if c.slab != nil {
				b = bytes.Clone(b)
			}
			out = append(out, b)
		}
	}
	return out
}

// add takes a kept trace's chunks; booked is the bytes its decision booked.
func (k *keptSet) add(chunks []heldChunk, th sampling.Threshold, reason string, booked int64) {
	from := len(k.chunks)
	for _, c := range chunks {
		k.chunks = append(k.chunks, c.data)
		if c.slab != nil {
			c.slab.holds.Add(1)
			k.slabs = append(k.slabs, c.slab)
		}
	}
	k.traces = append(k.traces, keptTrace{from: from, to: len(k.chunks), th: th, reason: reason, booked: booked})
}

// addLate keeps a copy of a late fragment's encoding (which may be a
// buffer reused for the next fragment).
func (k *keptSet) addLate(encoded []byte, th sampling.Threshold, booked int64) {
	k.late = append(k.late, lateFragment{encoded: bytes.Clone(encoded), th: th, booked: booked})
}

// forward hands kept traces on. Traces decided while serving a request
// (forced by the bounds, or by the span limit) belong to other requests: they
// go with a context of their own, so that one client's metadata (auth,
// tenant) never travels with another's spans. Late fragments are the
// request's own and keep its context.
func (p *budgetTailSampler) forward(ctx context.Context, k *keptSet) {
	// What the next consumer holds was decoded, copied out of the chunks.
	defer func() {
		for _, sl := range k.slabs {
			p.buffered.letGo(sl)
		}
		k.slabs = nil
	}()
	if len(k.traces) > 0 {
		m := newKeptMerger()
		for _, kt := range k.traces {
			m.booked += kt.booked
			// The root span may sit in any chunk: every chunk is offered the reason.
			for _, chunk := range k.chunks[kt.from:kt.to] {
				if encoded, ok := p.encoded(chunk); ok {
					m.add(encoded, mark{th: kt.th, reason: kt.reason})
				}
			}
		}
		p.forwardMerged(context.Background(), m)
	}
	if len(k.late) > 0 {
		m := newKeptMerger()
		for _, lf := range k.late {
			m.booked += lf.booked
			m.add(lf.encoded, mark{th: lf.th})
		}
		p.forwardMerged(ctx, m)
	}
}

// forwardMerged decodes the fragments m holds as one request, stamps each
// span with its mark and hands it on.
func (p *budgetTailSampler) forwardMerged(ctx context.Context, m *keptMerger) {
	if m.empty() {
		return
	}
	var u ptrace.ProtoUnmarshaler
	encoded, marks, err := m.merged()
	if err == nil {
		var td ptrace.Traces
		if td, err = u.UnmarshalTraces(encoded); err == nil {
			p.stamp(td, marks)
			p.egress.add(td, m.booked)
			p.consume(ctx, td)
			return
		}
	}
	// We marshaled every fragment ourselves, so this takes memory
	// corruption; what can still be read goes on, fragment by fragment.
	p.logger.Error("cannot merge kept fragments", zap.Int("fragments", len(m.chunks)), zap.Error(err))
	p.forwardEach(ctx, m)
}

// forwardEach decodes the fragments m holds one by one, a ResourceSpans
// each, and hands them on as one request.
func (p *budgetTailSampler) forwardEach(ctx context.Context, m *keptMerger) {
	var u ptrace.ProtoUnmarshaler
	out := ptrace.NewTraces()
	var marks []mark
	for i, chunk := range m.chunks {
		td, err := u.UnmarshalTraces(chunk)
		if err != nil {
			p.logger.Error("cannot decode a kept fragment", zap.Error(err))
			continue
		}
		marks = marks[:0]
		for range td.SpanCount() {
			marks = append(marks, m.marks[i])
		}
		p.stamp(td, marks)
		td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	p.egress.add(out, m.booked)
	p.consume(ctx, out)
}

func (p *budgetTailSampler) consume(ctx context.Context, td ptrace.Traces) {
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.forwardFailed.Add(int64(td.SpanCount()))
		p.logger.Warn("next consumer refused kept traces", zap.Int("spans", td.SpanCount()), zap.Error(err))
	}
}

// stamp writes each span's threshold (marks, in the order of td's spans)
// into its tracestate, keeping its other members, and, when configured,
// the reason on root spans.
func (p *budgetTailSampler) stamp(td ptrace.Traces, marks []mark) {
	var lastIn, lastOut string
	var lastID pcommon.TraceID
	var lastTh sampling.Threshold
	var lastProblem otep235.Problem
	haveLast := false
	i := 0
	spanwalk.Traces(td, func(_ ptrace.ResourceSpans, span ptrace.Span) {
		m := marks[i]
		i++
		in := span.TraceState().AsRaw()
		if !haveLast || in != lastIn || span.TraceID() != lastID || m.th != lastTh {
			lastIn, lastID, lastTh, haveLast = in, span.TraceID(), m.th, true
			lastOut, lastProblem = otep235.WithThreshold(in, m.th, sampling.TraceIDToRandomness(lastID))
		}
		if lastProblem == otep235.Truncated {
			p.truncated.Add(1)
		}
		span.TraceState().FromRaw(lastOut)
		if m.reason != "" && p.cfg.ReasonAttribute != "" && span.ParentSpanID().IsEmpty() {
			span.Attributes().PutStr(p.cfg.ReasonAttribute, m.reason)
		}
	})
}
