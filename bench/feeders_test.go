package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// feedersPerCore is how many goroutines feed a processor per core: the
// OTLP receiver serves each request on a goroutine of its own.
const feedersPerCore = 4

// BenchmarkFeeders feeds each processor from feedersPerCore goroutines per
// core at once, each building its own requests (reference workload), and
// reports throughput (spans/s) and process CPU per span. Run it at -cpu 1,2
// (and more where there are more cores): throughput at 2 cores over 1 shows
// how the processor scales. `none` is the cost of building the requests;
// ours keeps contrib's share of its offered rate, as in BenchmarkTailSamplers.
//
//	go test -run '^$' -bench Feeders -benchtime 4000x -count 5 -cpu 1,2 ./bench/
func BenchmarkFeeders(b *testing.B) {
	for _, kind := range []string{"none", "span_cost", "contrib", "ours"} {
		b.Run(kind, func(b *testing.B) {
			key := fmt.Sprint("feeders/", runtime.GOMAXPROCS(0))
			sink := &countingSink{}
			feeders := feedersPerCore * runtime.GOMAXPROCS(0)
			var seed atomic.Uint64
			newFeeder := func() *workload.Generator {
				return workload.NewGenerator(workload.Options{Services: 10, ErrorEvery: 100, SlowEvery: 100, Seed: seed.Add(1)})
			}
			// feed sends from every feeder until stop says so; it returns the spans sent.
			feed := func(p consumer.Traces, stop func(sent int64) bool) int64 {
				var spans atomic.Int64
				var wg sync.WaitGroup
				for range feeders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						g := newFeeder()
						for !stop(spans.Load()) {
							td, _ := g.Batch(100)
							n := td.SpanCount()
							if err := p.ConsumeTraces(context.Background(), td); err != nil {
								b.Error(err)
								return
							}
							spans.Add(int64(n))
						}
					}()
				}
				wg.Wait()
				return spans.Load()
			}
			smoke := b.N < 100
			warm := func(p consumer.Traces) (spansPerSecond float64) {
				if smoke {
					return 0
				}
				start := time.Now()
				var atWindow int64
				var windowStart time.Time
				var once sync.Once
				n := feed(p, func(sent int64) bool {
					if time.Since(start) >= warmUp-rateWindow {
						once.Do(func() { atWindow, windowStart = sent, time.Now() })
					}
					return time.Since(start) >= warmUp
				})
				return float64(n-atWindow) / time.Since(windowStart).Seconds()
			}
			p, budget, stop := comparedProcessor(b, kind, key, sink, warm)
			defer stop()
			runtime.GC()
			kept0 := sink.spans.Load()
			want := int64(b.N) * 400 // b.N requests of 100 four-span traces
			cpu0 := procwatch.SelfCPU()
			b.ResetTimer()
			spans := feed(p, func(sent int64) bool { return sent >= want })
			b.StopTimer()
			cpu := procwatch.SelfCPU() - cpu0
			kept := float64(sink.spans.Load()-kept0) / float64(spans)
			if kind == "contrib" && !smoke {
				contribKept[key] = kept
			}
			b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
			if kind == "ours" {
				b.ReportMetric(budget, "budget-spans/s")
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(spans), "cpu-ns/span")
			if kind == "contrib" || kind == "ours" {
				b.ReportMetric(kept, "kept-ratio")
			}
		})
	}
}
