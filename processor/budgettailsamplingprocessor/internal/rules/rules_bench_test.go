package rules

import (
	"fmt"
	"testing"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// BenchmarkRuleMatching is the per-span cost of evaluating n rules that
// match nothing (every rule evaluated on every span), on reference spans:
// simple equality conditions (the native matcher) and the same number of
// OTTL conditions that need the interpreter (IsMatch).
//
//	go test -run '^$' -bench RuleMatching -count 6 ./processor/budgettailsamplingprocessor/internal/rules/
func BenchmarkRuleMatching(b *testing.B) {
	for _, tc := range []struct {
		n    int
		ottl bool
	}{{0, false}, {5, false}, {20, false}, {5, true}, {20, true}} {
		n := tc.n
		name := fmt.Sprintf("rules_%d", n)
		if tc.ottl {
			name += "_interpreted"
		}
		b.Run(name, func(b *testing.B) {
			var cfgs []Config
			for i := range n {
				cond := []string{
					fmt.Sprintf(`attributes["url.path"] == "/healthz-%d"`, i),
					fmt.Sprintf(`resource.attributes["service.name"] == "probe-%d"`, i),
					fmt.Sprintf(`attributes["customer.tier"] == "gold-%d"`, i),
				}[i%3]
				if tc.ottl {
					cond = fmt.Sprintf(`IsMatch(attributes["url.path"], "^/healthz-%d")`, i)
				}
				cfgs = append(cfgs, Config{Name: fmt.Sprint("r", i), Action: "drop", Conditions: []string{cond}})
			}
			rs := mustRulesB(b, cfgs...)
			td, _ := workload.NewGenerator(workload.Options{Services: 10}).Batch(100)
			rss := td.ResourceSpans()
			errs := make([]int64, n)
			spans := td.SpanCount()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for r := 0; r < rss.Len(); r++ {
					rsp := rss.At(r)
					ss := rsp.ScopeSpans().At(0)
					for k := 0; k < ss.Spans().Len(); k++ {
						var matched uint64
						rs.MatchSpan(rsp, ss, ss.Spans().At(k), &matched, errs)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
		})
	}
}
