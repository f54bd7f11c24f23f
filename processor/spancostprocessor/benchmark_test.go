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
	one := func(td ptrace.Traces) []ptrace.Traces { return []ptrace.Traces{td} }
	for _, wl := range []struct {
		name  string
		opt   workload.Options
		dims  []string
		parts func(ptrace.Traces) []ptrace.Traces
	}{
		{"reference", workload.Options{Services: 10}, []string{serviceNameKey}, one},
		{"span_dimension", workload.Options{Services: 10}, []string{serviceNameKey, "db.system"}, one},
		{"services_2000", workload.Options{Services: 2000}, []string{serviceNameKey}, one},
		// 30-span traces, each over 3 interleaved requests.
		{"deep_30span_split", workload.Options{Services: 10, SpansPerTrace: 30}, []string{serviceNameKey},
			func(td ptrace.Traces) []ptrace.Traces { return workload.Interleave(td, 3) }},
		// Every span with a resource of its own (per pod), traces of 2–20
		// spans over 3 requests, roots last.
		{"span_resources_multipart", workload.Options{Services: 200, SpansPerTrace: 2, MaxSpansPerTrace: 20},
			[]string{serviceNameKey}, func(td ptrace.Traces) []ptrace.Traces { return workload.PerSpanResources(td, 3) }},
	} {
		for _, pool := range []int{2, 64} {
			g := workload.NewGenerator(wl.opt)
			var batches []ptrace.Traces
			spans := 0
			for len(batches) < pool {
				td, _ := g.Batch(100)
				for _, part := range wl.parts(td) {
					batches = append(batches, part)
					spans += part.SpanCount()
				}
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
