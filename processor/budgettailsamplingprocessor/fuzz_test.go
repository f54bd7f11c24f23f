package budgettailsamplingprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// FuzzConsumeTraces feeds arbitrary OTLP requests to the intake: it must
// never panic, and every span must come out (kept, since nothing is over
// budget before the first adjustment) or be counted as invalid.
func FuzzConsumeTraces(f *testing.F) {
	var m ptrace.ProtoMarshaler
	g := workload.NewGenerator(workload.Options{Services: 3, ErrorEvery: 3})
	for _, n := range []int{1, 5} {
		td, _ := g.Batch(n)
		b, _ := m.MarshalTraces(td)
		f.Add(b)
		for _, part := range workload.SplitBySpan(td, 2) {
			b, _ := m.MarshalTraces(part)
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(data)
		if err != nil {
			return
		}
		cfg := testConfig()
		cfg.MaxTraces = 8
		cfg.MaxSpansPerTrace = 16
		ts := newTestSampler(t, cfg)
		in := td.SpanCount()
		ts.send(td)
		require.NoError(t, ts.p.Shutdown(context.Background()))
		c, buffered, _, bytes := ts.p.tally()
		require.Zero(t, buffered)
		require.Zero(t, bytes)
		out := ts.sink.SpanCount()
		require.Equal(t, in, out+int(c.Invalid[traceinfo.InvalidZeroTraceID]), "spans in = spans out + zero-ID spans")
	})
}
