package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// simpleRules are n rules of one OTTL condition each that match none of
// the reference spans, so every one is evaluated on every span: the worst
// case for a rule set of that size.
func simpleRules(n int) []any {
	var rules []any
	for i := range n {
		var cond string
		switch i % 3 {
		case 0:
			cond = fmt.Sprintf(`attributes["url.path"] == "/healthz-%d"`, i)
		case 1:
			cond = fmt.Sprintf(`resource.attributes["service.name"] == "synthetic-probe-%d"`, i)
		default:
			cond = fmt.Sprintf(`attributes["customer.tier"] == "gold-%d"`, i)
		}
		action := []string{"drop", "keep", "sample"}[i%3]
		r := map[string]any{"name": fmt.Sprint("rule-", i), "action": action, "conditions": []any{cond}}
		if action == "sample" {
			r["probability"] = 0.5
		}
		rules = append(rules, r)
	}
	return rules
}

// BenchmarkRules measures what 0, 5 and 20 rules add per span to our
// sampler, on the reference workload in steady state (as
// BenchmarkTailSamplers): compare cpu-ns/span across the sub-benchmarks.
//
//	go test -run '^$' -bench Rules -benchtime 3000x -count 6 -cpu 1 ./bench/
func BenchmarkRules(b *testing.B) {
	for _, n := range []int{0, 5, 20} {
		b.Run(fmt.Sprintf("rules_%d", n), func(b *testing.B) {
			g := workload.NewGenerator(workload.Options{Services: 10, ErrorEvery: 100, SlowEvery: 100})
			sink := &countingSink{}
			cfg := oursConfig(15000, "ours")
			cfg["rules"] = simpleRules(n)
			proc := newOurSampler(b, sink, cfg)
			defer func() { _ = proc.Shutdown(context.Background()) }()
			send := func() int {
				td, _ := g.Batch(100)
				n := td.SpanCount()
				if err := proc.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
				return n
			}
			if b.N >= 100 {
				for start := time.Now(); time.Since(start) < warmUp; {
					send()
				}
			}
			runtime.GC()
			spans := 0
			cpu0 := procwatch.SelfCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				spans += send()
			}
			b.StopTimer()
			b.ReportMetric(float64((procwatch.SelfCPU()-cpu0).Nanoseconds())/float64(spans), "cpu-ns/span")
		})
	}
}
