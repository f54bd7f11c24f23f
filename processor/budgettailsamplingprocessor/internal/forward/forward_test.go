package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
)

// perTrace cuts a request into one encoded TracesData per trace, spans
// grouped under their resource and scope as they came: the fragments a
// sampler buffers.
func perTrace(t testing.TB, td ptrace.Traces) map[pcommon.TraceID][]byte {
	parts := map[pcommon.TraceID]ptrace.Traces{}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				span := ss.Spans().At(k)
				part, ok := parts[span.TraceID()]
				if !ok {
					part = ptrace.NewTraces()
					parts[span.TraceID()] = part
				}
				drs := part.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(drs.Resource())
				dss := drs.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(dss.Scope())
				span.CopyTo(dss.Spans().AppendEmpty())
			}
		}
	}
	out := map[pcommon.TraceID][]byte{}
	var m ptrace.ProtoMarshaler
	for id, part := range parts {
		b, err := m.MarshalTraces(part)
		require.NoError(t, err)
		out[id] = b
	}
	return out
}

type countingMeter struct{ spans int }

func (c *countingMeter) Add(td ptrace.Traces, _ int64) { c.spans += td.SpanCount() }

// sizingMeter sizes what leaves, as a bytes or money budget's egress meter
// does.
type sizingMeter struct{ bytes int }

func (s *sizingMeter) Add(td ptrace.Traces, _ int64) {
	var m ptrace.ProtoMarshaler
	s.bytes += m.TracesSize(td)
}

// BenchmarkForward hands on what a pass keeps at 100k spans/s and 3% —
// about 60 traces — merged per resource and fragment by fragment, on SDK
// clients' traffic and on the reference workload's (a ResourceSpans a
// trace).
//
//	go test -run '^$' -bench Forward -count 5 ./processor/budgettailsamplingprocessor/internal/forward/
func BenchmarkForward(b *testing.B) {
	for _, shape := range []string{"sdk_batches", "reference"} {
		var requests []ptrace.Traces
		now := time.Unix(1_700_000_000, 0)
		if shape == "sdk_batches" {
			fleet := workload.NewFleet(workload.FleetOptions{Seed: 3}, now)
			for range 100 {
				for range 20 {
					fleet.Start(now)
				}
				now = now.Add(100 * time.Millisecond)
				for _, req := range fleet.Exports(now) {
					requests = append(requests, req.Traces)
				}
			}
		} else {
			td, _ := workload.NewGenerator(workload.Options{Services: 10}).Batch(2000)
			requests = append(requests, td)
		}
		// A trace's fragments from every request, the first 60 traces.
		byTrace := map[pcommon.TraceID][][]byte{}
		var order []pcommon.TraceID
		for _, td := range requests {
			for id, frag := range perTrace(b, td) {
				if _, ok := byTrace[id]; !ok {
					order = append(order, id)
				}
				byTrace[id] = append(byTrace[id], frag)
			}
		}
		var kept [][]byte
		var marks []mark
		for i, id := range order[:min(60, len(order))] {
			for _, frag := range byTrace[id] {
				kept = append(kept, frag)
				marks = append(marks, mark{th: sampling.AlwaysSampleThreshold, reason: fmt.Sprint(i % 2)})
			}
		}
		fill := func() *merged {
			m := newMerged(true)
			for i, c := range kept {
				m.add(c, marks[i])
			}
			return m
		}
		spans := 0
		for _, c := range kept {
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(c)
			require.NoError(b, err)
			spans += td.SpanCount()
		}
		// merged_bytes_budget: a bytes budget sizes what leaves.
		for _, name := range []string{"merged", "merged_bytes_budget", "each"} {
			var meter Meter = &countingMeter{}
			if name == "merged_bytes_budget" {
				meter = &sizingMeter{}
			}
			f := New(Settings{Next: consumertest.NewNop(), Logger: zap.NewNop(), Codec: spanmem.NewCodec(false), Meter: meter})
			forward := f.forwardMerged
			if name == "each" {
				forward = f.forwardEach
			}
			b.Run(shape+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					forward(context.Background(), fill())
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
			})
		}
	}
}

// A dry run forwards the traces that would not be kept too, every span
// with its would-be decision in attributes and its tracestate as it came;
// only the would-be-kept spans count in the egress meter.
func TestDryRunForwardsEverySpanWithItsDecision(t *testing.T) {
	td, _ := workload.NewGenerator(workload.Options{Services: 3, SpansPerTrace: 4, Seed: 5}).Batch(2)
	frags := perTrace(t, td)
	require.Len(t, frags, 2)
	codec := spanmem.NewCodec(false)
	var ids []pcommon.TraceID
	var chunks [][]spanmem.Chunk
	for id, enc := range frags {
		ids = append(ids, id)
		chunks = append(chunks, []spanmem.Chunk{{Data: codec.Store(enc, new([]byte))}})
	}
	th, err := sampling.ProbabilityToThreshold(0.25)
	require.NoError(t, err)
	sink := &consumertest.TracesSink{}
	meter := &countingMeter{}
	f := New(Settings{Next: sink, Logger: zap.NewNop(), Codec: codec, Meter: meter, DryRun: true})
	var k Kept
	k.Add(chunks[0], th, "baseline", 1)
	k.AddNotKept(chunks[1], "baseline")
	f.Forward(context.Background(), &k)

	require.Equal(t, 8, sink.SpanCount(), "every span reaches the next consumer")
	assert.Equal(t, 4, meter.spans, "only the would-be-kept spans are egress")
	seen := 0
	for _, got := range sink.AllTraces() {
		spanwalk.Traces(got, func(_ ptrace.ResourceSpans, s ptrace.Span) {
			seen++
			kept, ok := s.Attributes().Get(DryRunKept)
			require.True(t, ok)
			reason, _ := s.Attributes().Get(DryRunReason)
			assert.Equal(t, "baseline", reason.Str())
			assert.Empty(t, s.TraceState().AsRaw(), "th is not written: the backend weighs the spans as they came")
			thAttr, hasTh := s.Attributes().Get(DryRunThreshold)
			if s.TraceID() == ids[0] {
				assert.True(t, kept.Bool())
				assert.Equal(t, th.TValue(), thAttr.Str(), "the th it would carry")
			} else {
				assert.False(t, kept.Bool())
				assert.False(t, hasTh)
			}
		})
	}
	assert.Equal(t, 8, seen)
}
