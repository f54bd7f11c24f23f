package bench

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// BenchmarkOTLPWire is what decoding and encoding the reference requests
// cost per span: the yardstick the processors' figures are compared with.
//
//	go test -run '^$' -bench OTLPWire -benchmem -count 5 ./bench/
func BenchmarkOTLPWire(b *testing.B) {
	g := workload.NewGenerator(workload.Options{Services: 10})
	var m ptrace.ProtoMarshaler
	var u ptrace.ProtoUnmarshaler
	reqs := make([][]byte, 64)
	tds := make([]ptrace.Traces, len(reqs))
	spans := 0
	for i := range reqs {
		tds[i], _ = g.Batch(100)
		spans += tds[i].SpanCount()
		reqs[i], _ = m.MarshalTraces(tds[i])
	}
	perOp := float64(spans) / float64(len(reqs))
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := u.UnmarshalTraces(reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perOp, "ns/span")
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := m.MarshalTraces(tds[i%len(tds)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perOp, "ns/span")
	})
	// The gateway's index of a request as received: unchecked (as the
	// samplers' merger reads pdata's own encodings) and checked as pdata
	// would decode it (the trace_router receiver's path).
	var idx otlpwire.Index
	b.Run("index", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := idx.Parse(reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perOp, "ns/span")
	})
	lim := otlpwire.Limits{MaxRecords: 1 << 16, MaxSpanBytes: 4 << 20}
	b.Run("index_checked", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := idx.ParseChecked(reqs[i%len(reqs)], lim); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perOp, "ns/span")
	})
	b.Run("size", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = m.TracesSize(tds[i%len(tds)])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perOp, "ns/span")
	})
}
