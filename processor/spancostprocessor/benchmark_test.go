package spancostprocessor

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor/internal/metadata"
)

// BenchmarkSpanCost runs the same requests (the reference workload of docs/architecture.md:
// 4-span traces, 6 span and 3 resource attributes, 100 traces a request)
// through a pipeline without and with span_cost; the processor's cost is the
// difference. span_cost does not modify data, so requests are reused:
//
//   - pool_2: two requests cycled (0.8 MB), cache-warm, as a request is in
//     the collector right after the receiver decoded it;
//
//   - pool_64: 64 requests cycled (25 MB), cache-cold, the worst case.
//
//     go test -run '^$' -bench SpanCost -benchmem -count 5 ./processor/spancostprocessor/
func BenchmarkSpanCost(b *testing.B) {
	for _, wl := range []struct {
		name string
		opt  workload.Options
		dims []string
	}{
		{"reference", workload.Options{Services: 10}, []string{serviceNameKey}},
		{"span_dimension", workload.Options{Services: 10}, []string{serviceNameKey, "db.system"}},
		{"services_2000", workload.Options{Services: 2000}, []string{serviceNameKey}},
	} {
		for _, pool := range []int{2, 64} {
			g := workload.NewGenerator(wl.opt)
			batches := make([]ptrace.Traces, pool)
			spans := 0
			for i := range batches {
				batches[i], _ = g.Batch(100)
				spans += batches[i].SpanCount()
			}
			perOp := float64(spans) / float64(len(batches))
			run := func(b *testing.B, next consumer.Traces) {
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := next.ConsumeTraces(context.Background(), batches[i%len(batches)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perOp, "ns/span")
			}
			name := fmt.Sprintf("%s/pool_%d", wl.name, pool)
			b.Run(name+"/without", func(b *testing.B) { run(b, consumertest.NewNop()) })
			b.Run(name+"/with", func(b *testing.B) {
				cfg := createDefaultConfig()
				cfg.Dimensions = wl.dims
				cfg.MaxSeries = 5000
				tel := componenttest.NewTelemetry()
				defer func() { _ = tel.Shutdown(context.Background()) }()
				set := processortest.NewNopSettings(metadata.Type)
				set.TelemetrySettings = tel.NewTelemetrySettings()
				p, err := NewFactory().CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
				if err != nil {
					b.Fatal(err)
				}
				// Warm up: the series exist before timing, as in steady state.
				for _, td := range batches {
					_ = p.ConsumeTraces(context.Background(), td)
				}
				run(b, p)
			})
		}
	}
}
