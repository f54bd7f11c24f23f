package budgettailsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// With buffer_compression: s2 the buffer holds less, and nothing else
// changes: the same spans are kept with the same th, and the budget and
// the counters see the same OTLP bytes.
func TestBufferCompressionChangesOnlyTheMemoryHeld(t *testing.T) {
	build := func(compression string) *testSampler {
		cfg := testConfig()
		cfg.BufferCompression = compression
		cfg.Budget.SpansPerSecond = 1e9 // keep everything: the sinks compare whole
		return newTestSampler(t, cfg)
	}
	plain, compressed := build(compressionNone), build(compressionS2)
	g := workload.NewGenerator(workload.Options{Services: 5, SpansPerTrace: 6, ErrorEvery: 10})
	for range 5 {
		td, _ := g.Batch(40)
		for _, part := range workload.Interleave(td, 3) {
			twin := ptrace.NewTraces()
			part.CopyTo(twin)
			plain.send(part)
			compressed.send(twin)
		}
	}
	_, plainTraces, plainSpans, plainHeld := plain.p.tally()
	_, traces, spans, held := compressed.p.tally()
	assert.Equal(t, plainTraces, traces)
	assert.Equal(t, plainSpans, spans)
	assert.Less(t, held, plainHeld*8/10, "compressed, the buffer holds less (%d vs %d bytes)", held, plainHeld)

	plain.advance(11 * time.Second)
	compressed.advance(11 * time.Second)
	pc, _, _, _ := plain.p.tally()
	cc, _, _, _ := compressed.p.tally()
	assert.Equal(t, pc.Bytes, cc.Bytes, "the counters count OTLP bytes either way")
	assert.Positive(t, cc.Bytes[sampled])

	kept := func(ts *testSampler) map[string]string {
		out := map[string]string{}
		var m ptrace.ProtoMarshaler
		for _, td := range ts.sink.AllTraces() {
			spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) {
				one := ptrace.NewTraces()
				s.CopyTo(one.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
				b, _ := m.MarshalTraces(one)
				out[s.SpanID().String()] = string(b)
			})
		}
		return out
	}
	want := kept(plain)
	assert.Len(t, want, 5*40*6)
	assert.Equal(t, want, kept(compressed))
}
