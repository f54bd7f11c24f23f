package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// BenchmarkSamplerScaling shows how the intake cost per span and the heap
// grow with the traces already buffered (decisions far away, so the buffer
// only grows) and with the number of services (fairness table, groups).
//
//	go test -run '^$' -bench SamplerScaling -benchtime 2000x ./bench/
func BenchmarkSamplerScaling(b *testing.B) {
	for _, buffered := range []int{10_000, 100_000, 1_000_000} {
		for _, services := range []int{10, 10_000} {
			b.Run(fmt.Sprintf("buffered_%d/services_%d", buffered, services), func(b *testing.B) {
				g := workload.NewGenerator(workload.Options{Services: services})
				p := newOurSampler(b, &countingSink{}, map[string]any{
					"decision_wait":            "1h",
					"decision_wait_after_root": "1h",
					"max_traces":               buffered + 200_000,
					"max_buffered_bytes":       8 << 30,
					"budget":                   map[string]any{"spans_per_second": 15000},
				})
				defer func() { _ = p.Shutdown(context.Background()) }()
				// Fill the buffer.
				for filled := 0; filled < buffered; filled += 1000 {
					td, _ := g.Batch(1000)
					_ = p.ConsumeTraces(context.Background(), td)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				spans := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					td, _ := g.Batch(100) // fresh traces: the buffer keeps growing by b.N×100
					b.StartTimer()
					spans += td.SpanCount()
					if err := p.ConsumeTraces(context.Background(), td); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
				b.ReportMetric(float64(ms.HeapAlloc)/float64(buffered*4), "heap-B/buffered-span")
			})
		}
	}
}
