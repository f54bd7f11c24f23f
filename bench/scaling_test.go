package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
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

// BenchmarkOutlierGroups shows what the latency-outlier groups cost as their
// number grows: heap per group once every group's sketch is filled, and the
// sampler's cost per span at that size. Groups are root operations (group_by
// span.name), so the services' own state stays the same across sizes; each
// decision is forced right away (max_traces is small) so that every trace
// feeds its group's sketch.
//
//	go test -run '^$' -bench OutlierGroups -benchtime 500x ./bench/
func BenchmarkOutlierGroups(b *testing.B) {
	const perGroup = 100 // observations per group before measuring
	fill := func(b *testing.B, groups int) (processor.Traces, func(), uint64) {
		g := workload.NewGenerator(workload.Options{Services: 10, ErrorEvery: 100, SlowEvery: 100})
		p := newOurSampler(b, &countingSink{}, map[string]any{
			"decision_wait":            "1h",
			"decision_wait_after_root": "1h",
			"max_traces":               1000,
			"budget":                   map[string]any{"spans_per_second": 15000},
			"outliers":                 map[string]any{"group_by": []any{"span.name"}, "max_groups": groups},
		})
		n := 0
		next := func() ptrace.Traces {
			td, _ := g.Batch(100)
			rss := td.ResourceSpans()
			for i := 0; i < rss.Len(); i++ {
				root := rss.At(i).ScopeSpans().At(0).Spans().At(0)
				root.SetName(fmt.Sprintf("op-%d", n%groups))
				n++
			}
			return td
		}
		for filled := 0; filled < max(perGroup*groups, 50_000); filled += 100 {
			_ = p.ConsumeTraces(context.Background(), next())
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return p, func() {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				td := next()
				b.StartTimer()
				if err := p.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
			}
		}, ms.HeapAlloc
	}
	for _, groups := range []int{10, 100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("groups_%d", groups), func(b *testing.B) {
			// The same sampler with one group: everything but the groups.
			base, _, baseHeap := fill(b, 1)
			_ = base.Shutdown(context.Background())
			base = nil
			runtime.GC()
			p, loop, heap := fill(b, groups)
			defer func() { _ = p.Shutdown(context.Background()) }()
			b.ResetTimer()
			loop()
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*400), "ns/span")
			b.ReportMetric((float64(heap)-float64(baseHeap))/float64(groups-1), "heap-B/group")
		})
	}
}

// BenchmarkIntakeDepth compares the processor's CPU per span with 10,000
// and with 1,000,000 traces buffered, in a steady state: the buffer stays
// full (max_traces), so each new trace forces the oldest out, at either
// depth. The loop is long enough for several GC cycles at 1M buffered
// (gc-cycles), so that marking a large buffer is in the figure: net-ns/span
// is all the process's CPU minus what the feeding thread spent building the
// requests (as in TailSamplers). The decision caches are small and filled
// before measuring, so that only the buffer's depth differs. Both places a
// buffer's slabs can live are measured (buffer_memory): the Go heap, the
// default, and the arena's mappings, configs/tail.yaml's.
//
//	go test -run '^$' -bench IntakeDepth -benchtime 20000x -count 5 -cpu 1 ./bench/
func BenchmarkIntakeDepth(b *testing.B) {
	for _, memory := range []string{"heap", "mapped"} {
		for _, depth := range []int{10_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/buffered_%d", memory, depth), func(b *testing.B) {
				intakeAtDepth(b, memory, depth)
			})
		}
	}
}

func intakeAtDepth(b *testing.B, memory string, depth int) {
	if b.N < 100 { // the framework's first run, or a smoke run: no fill
		depth = min(depth, 10_000)
	}
	g := workload.NewGenerator(workload.Options{Services: 10, ErrorEvery: 100, SlowEvery: 100})
	p := newOurSampler(b, &countingSink{}, map[string]any{
		"decision_wait":            "1h",
		"decision_wait_after_root": "1h",
		"max_traces":               depth,
		"max_buffered_bytes":       8 << 30,
		"buffer_memory":            memory,
		"decision_cache":           map[string]any{"sampled_size": 50_000, "not_sampled_size": 50_000},
		"budget":                   map[string]any{"spans_per_second": 15000},
	})
	defer func() { _ = p.Shutdown(context.Background()) }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Fill the buffer, then as many traces again as the caches hold,
	// forced out: the steady state at this depth. In requests the size of
	// the timed loop's, so that the slabs the loop frees are the size it
	// asks for (with buffer_memory mapped, filling with 1,000-trace
	// requests made the loop's first half map a fresh block a request).
	for filled := 0; filled < depth+100_000; filled += 100 {
		td, _ := g.Batch(100)
		_ = p.ConsumeTraces(context.Background(), td)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var building time.Duration
	spans := 0
	cpu0, gc0 := procwatch.SelfCPU(), gcCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := procwatch.ThreadCPU()
		td, _ := g.Batch(100)
		building += procwatch.ThreadCPU() - t0
		spans += td.SpanCount()
		if err := p.ConsumeTraces(context.Background(), td); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := procwatch.SelfCPU() - cpu0
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64((cpu-building).Nanoseconds())/float64(spans), "net-ns/span")
	b.ReportMetric(float64(after.NumGC-before.NumGC), "gc-cycles")
	// What the collector's marking and assists took of it: the part
	// of the depth's cost that a buffer the GC does not scan avoids.
	b.ReportMetric(float64((gcCPU()-gc0).Nanoseconds())/float64(spans), "gc-ns/span")
}

// gcCPU is the CPU the Go collector has used so far (marking, assists,
// pauses), as the runtime estimates it.
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return time.Duration(s[0].Value.Float64() * float64(time.Second))
}
