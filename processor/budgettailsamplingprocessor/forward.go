package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"bytes"
	"context"
	"slices"

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
	late   []lateFragment
}

type keptTrace struct {
	from, to int // its chunks: chunks[from:to]
	th       sampling.Threshold
	reason   string
}

type lateFragment struct {
	encoded []byte
	th      sampling.Threshold
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
// slice of their own (the trace's is reused once it leaves).
func (p *budgetTailSampler) encodedChunks(chunks [][]byte) [][]byte {
	if !p.codec.compress {
		return slices.Clone(chunks)
	}
	out := make([][]byte, 0, len(chunks))
	for _, c := range chunks {
		if b, ok := p.encoded(c); ok {
			out = append(out, b)
		}
	}
	return out
}

func (k *keptSet) add(chunks [][]byte, th sampling.Threshold, reason string) {
	from := len(k.chunks)
	k.chunks = append(k.chunks, chunks...)
	k.traces = append(k.traces, keptTrace{from: from, to: len(k.chunks), th: th, reason: reason})
}

// addLate keeps a copy of a late fragment's encoding (which may be a
// buffer reused for the next fragment).
func (k *keptSet) addLate(encoded []byte, th sampling.Threshold) {
	k.late = append(k.late, lateFragment{encoded: bytes.Clone(encoded), th: th})
}

// forward hands kept traces on. Traces decided while serving a request
// (forced by the bounds, or by the span limit) belong to other requests: they
// go with a context of their own, so that one client's metadata (auth,
// tenant) never travels with another's spans. Late fragments are the
// request's own and keep its context.
func (p *budgetTailSampler) forward(ctx context.Context, k *keptSet) {
	if len(k.traces) > 0 {
		out := ptrace.NewTraces()
		var u ptrace.ProtoUnmarshaler
		for _, kt := range k.traces {
			for _, chunk := range k.chunks[kt.from:kt.to] {
				encoded, ok := p.encoded(chunk)
				if !ok {
					continue
				}
				td, err := u.UnmarshalTraces(encoded)
				if err != nil {
					// We marshaled it ourselves; this cannot happen short of memory corruption.
					p.logger.Error("cannot decode a buffered fragment", zap.Error(err))
					continue
				}
				// The root span may sit in any chunk: every chunk is offered the reason.
				p.stamp(td, kt.th, kt.reason)
				td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
			}
		}
		p.consume(context.Background(), out)
	}
	if len(k.late) > 0 {
		out := ptrace.NewTraces()
		var u ptrace.ProtoUnmarshaler
		for _, lf := range k.late {
			td, err := u.UnmarshalTraces(lf.encoded)
			if err != nil {
				p.logger.Error("cannot decode a late fragment", zap.Error(err))
				continue
			}
			p.stamp(td, lf.th, "")
			td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		}
		p.consume(ctx, out)
	}
}

func (p *budgetTailSampler) consume(ctx context.Context, td ptrace.Traces) {
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.forwardFailed.Add(int64(td.SpanCount()))
		p.logger.Warn("next consumer refused kept traces", zap.Int("spans", td.SpanCount()), zap.Error(err))
	}
}

// stamp writes th into every span's tracestate (keeping its other members)
// and, when configured, the reason on the root span.
func (p *budgetTailSampler) stamp(td ptrace.Traces, th sampling.Threshold, reason string) {
	var lastIn, lastOut string
	var lastID pcommon.TraceID
	var lastProblem otep235.Problem
	haveLast := false
	spanwalk.Traces(td, func(_ ptrace.ResourceSpans, span ptrace.Span) {
		in := span.TraceState().AsRaw()
		if !haveLast || in != lastIn || span.TraceID() != lastID {
			lastIn, lastID, haveLast = in, span.TraceID(), true
			lastOut, lastProblem = otep235.WithThreshold(in, th, sampling.TraceIDToRandomness(lastID))
		}
		if lastProblem == otep235.Truncated {
			p.truncated.Add(1)
		}
		span.TraceState().FromRaw(lastOut)
		if reason != "" && p.cfg.ReasonAttribute != "" && span.ParentSpanID().IsEmpty() {
			span.Attributes().PutStr(p.cfg.ReasonAttribute, reason)
		}
	})
}
