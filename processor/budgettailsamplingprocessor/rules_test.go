package budgettailsamplingprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

func ruleAttr(rule, outcome string) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("rule", rule), attribute.String("outcome", outcome)}
}

func withRules(cfg *Config, rules ...RuleConfig) *Config {
	cfg.Rules = rules
	return cfg
}

// spanWith is a one-span request whose span carries attributes.
func spanWith(service string, id pcommon.TraceID, spanID, parent byte, start time.Time, dur time.Duration, attrs map[string]string) ptrace.Traces {
	td := oneSpan(service, id, spanID, parent, start, dur)
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	for k, v := range attrs {
		span.Attributes().PutStr(k, v)
	}
	return td
}

func TestRuleConfigErrorsNameTheRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule RuleConfig
		want []string
	}{
		{"invalid OTTL", RuleConfig{Name: "vip", Action: "keep", Conditions: []string{`attributes["tier"] ==`}},
			[]string{`rules[0] ("vip").conditions[0]`, "invalid syntax"}},
		{"unknown path", RuleConfig{Name: "vip", Action: "keep", Conditions: []string{`span.colour == "red"`}},
			[]string{`rules[0] ("vip").conditions[0]`}},
		{"no action", RuleConfig{Name: "x", Conditions: []string{`name == "a"`}}, []string{`rules[0] ("x").action`}},
		{"no condition", RuleConfig{Name: "x", Action: "drop"}, []string{"conditions or trace_conditions required"}},
		{"bad trace condition", RuleConfig{Name: "slo", Action: "keep", TraceConditions: []string{"trace.duration > fast"}},
			[]string{`rules[0] ("slo").trace_conditions[0]`, "duration"}},
		{"unknown trace field", RuleConfig{Name: "slo", Action: "keep", TraceConditions: []string{"trace.colour == 2"}},
			[]string{"unknown field trace.colour"}},
		{"sample needs one of", RuleConfig{Name: "s", Action: "sample", Probability: 0.1, Weight: 2, Conditions: []string{`name == "a"`}},
			[]string{"exactly one of probability or weight"}},
		{"probability range", RuleConfig{Name: "s", Action: "sample", Probability: 2, Conditions: []string{`name == "a"`}},
			[]string{`rules[0] ("s").probability`}},
		{"max_share on drop", RuleConfig{Name: "d", Action: "drop", MaxShare: 0.5, Conditions: []string{`name == "a"`}},
			[]string{"max_share: only for keep rules"}},
		{"bad name", RuleConfig{Name: "a b", Action: "drop", Conditions: []string{`name == "a"`}}, []string{".name: letters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withRules(testConfig(), tc.rule)
			err := cfg.Validate()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	cfg := withRules(testConfig(), RuleConfig{Name: "a", Action: "drop", Conditions: []string{`name == "x"`}},
		RuleConfig{Name: "a", Action: "drop", Conditions: []string{`name == "y"`}})
	assert.ErrorContains(t, cfg.Validate(), "used by an earlier rule")
	var many []RuleConfig
	for i := 0; i <= 64; i++ {
		many = append(many, RuleConfig{Name: fmt.Sprint("r", i), Action: "drop", Conditions: []string{`name == "x"`}})
	}
	assert.ErrorContains(t, withRules(testConfig(), many...).Validate(), "at most 64 rules")
}

// drop: whatever the budget, errors included; not booked in the budget;
// late spans follow.
func TestDropRule(t *testing.T) {
	cfg := withRules(testConfig(), RuleConfig{Name: "health", Action: "drop",
		Conditions: []string{`attributes["url.path"] == "/healthz"`, `resource.attributes["service.name"] == "synthetic-probe"`}})
	ts := newTestSampler(t, cfg)
	health := traceIDWithRandomness(1, 0.9)
	td := spanWith("api", health, 1, 0, ts.now, time.Millisecond, map[string]string{"url.path": "/healthz"})
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
	ts.send(td)
	probe := traceIDWithRandomness(2, 0.9)
	ts.send(oneSpan("synthetic-probe", probe, 1, 0, ts.now, 5*time.Second))
	normal := traceIDWithRandomness(3, 0.9)
	ts.send(spanWith("api", normal, 1, 0, ts.now, time.Millisecond, map[string]string{"url.path": "/orders"}))
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()
	assert.NotContains(t, kept, health, "dropped although it has an error")
	assert.NotContains(t, kept, probe, "dropped although it is slow")
	assert.Contains(t, kept, normal)
	// A late error of a dropped trace is dropped too.
	late := oneSpan("db", health, 2, 1, ts.now, time.Millisecond)
	late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
	ts.send(late)
	assert.NotContains(t, ts.keptSpans(), health)
	assert.Equal(t, 2.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("health", "matched")...))
	assert.Equal(t, 2.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("health", "dropped")...))
	assert.Equal(t, 2.0, ts.metric(metadata.MetricTraces, decisionAttr("not_sampled"), reasonAttr("rule")))
	v, _, _ := ts.p.drain()
	assert.Equal(t, map[string]float64{"api": 1}, v.Baseline(), "dropped traces are not in the budget")
	assert.Zero(t, v.Errors())
}

// keep: priority after errors, within max_share; the rule's name is the reason.
func TestKeepRule(t *testing.T) {
	cfg := withRules(budgetConfig(1000), RuleConfig{Name: "gold", Action: "keep",
		Conditions: []string{`resource.attributes["customer.tier"] == "gold"`}})
	cfg.ReasonAttribute = "sampling.reason"
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "api", sampling.MinSamplingProbability)
	var gold, errorGold, plain []pcommon.TraceID
	for i := 0; i < 20; i++ {
		id := traceIDWithRandomness(uint64(i), 0.5)
		td := oneSpan("api", id, 1, 0, ts.now, time.Millisecond)
		switch i % 4 {
		case 0:
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("customer.tier", "gold")
			gold = append(gold, id)
		case 1:
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("customer.tier", "gold")
			td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
			errorGold = append(errorGold, id)
		default:
			plain = append(plain, id)
		}
		ts.send(td)
	}
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()
	reasonOf := func(id pcommon.TraceID) string {
		v, _ := kept[id][0].Attributes().Get("sampling.reason")
		return v.Str()
	}
	for _, id := range gold {
		require.Contains(t, kept, id)
		assert.Equal(t, "rule:gold", reasonOf(id))
	}
	for _, id := range errorGold {
		require.Contains(t, kept, id)
		assert.Equal(t, "error", reasonOf(id), "errors are decided first")
	}
	for _, id := range plain {
		assert.NotContains(t, kept, id)
	}
	assert.Equal(t, 5.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("gold", "kept")...))
}

// sample with a probability: consistent, th written, in the budget.
func TestSampleRuleWithProbability(t *testing.T) {
	cfg := withRules(budgetConfig(1000), RuleConfig{Name: "batch", Action: "sample", Probability: 0.25,
		Conditions: []string{`resource.attributes["service.name"] == "batch"`}})
	cfg.Outliers.MinObservations = 1 << 30
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	ts := newTestSampler(t, cfg)
	kept := 0
	for i := 0; i < 400; i++ {
		id := traceIDWithRandomness(uint64(i), float64(i)/400)
		ts.send(oneSpan("batch", id, 1, 0, ts.now, time.Millisecond))
	}
	ts.advance(3 * time.Second)
	for _, spans := range ts.keptSpans() {
		kept++
		assert.Equal(t, "ot=th:c", spans[0].TraceState().AsRaw(), "th of 1/4")
	}
	assert.Equal(t, 100, kept, "exactly the traces whose randomness passes th:c")
}

// sample with a weight: a share of the fair baseline weight times a service's.
func TestSampleRuleWithWeight(t *testing.T) {
	cfg := withRules(budgetConfig(400), RuleConfig{Name: "payments", Action: "sample", Weight: 3,
		Conditions: []string{`resource.attributes["team"] == "payments"`}})
	cfg.Outliers.MinObservations = 1 << 30
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	ts := newTestSampler(t, cfg)
	// 1,000 spans/s from each: payments' rule traces and a plain service.
	gens := map[string]*workload.Generator{"pay": workload.NewGenerator(workload.Options{Services: 1, Seed: 1}),
		"web": workload.NewGenerator(workload.Options{Services: 1, Seed: 2})}
	for s := 0; s < 30; s++ {
		for svc, g := range gens {
			td, _ := g.Batch(250)
			workload.SetService(td, svc)
			if svc == "pay" {
				for i := 0; i < td.ResourceSpans().Len(); i++ {
					td.ResourceSpans().At(i).Resource().Attributes().PutStr("team", "payments")
				}
			}
			ts.send(td)
		}
		for step := 0; step < 10; step++ {
			ts.advance(100 * time.Millisecond)
		}
		ts.p.adj.Tick(ts.now)
	}
	pol := ts.p.adj.Policy()
	payP := pol.Baseline("\x00rule:payments").P
	webP := pol.Baseline("web").P
	assert.InDelta(t, 3, payP/webP, 0.3, "weight 3: three times the level (%.3f vs %.3f)", payP, webP)
	assert.InDelta(t, 0.1, webP, 0.02, "400 = 1000·3L + 1000·L → L = 0.1")
}

// Trace conditions: an SLO threshold and a span count, no OTTL needed.
func TestRulesOnTraceDurationAndSpanCount(t *testing.T) {
	cfg := withRules(testConfig(),
		RuleConfig{Name: "big", Action: "drop", TraceConditions: []string{"trace.span_count > 3"}},
		RuleConfig{Name: "slo", Action: "keep", TraceConditions: []string{"trace.duration > 300ms"}},
	)
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "api", sampling.MinSamplingProbability)
	slow := traceIDWithRandomness(1, 0.5)
	ts.send(oneSpan("api", slow, 1, 0, ts.now, 400*time.Millisecond))
	fast := traceIDWithRandomness(2, 0.5)
	ts.send(oneSpan("api", fast, 1, 0, ts.now, 100*time.Millisecond))
	bigSlow := traceIDWithRandomness(3, 0.5)
	for i := byte(1); i <= 4; i++ {
		parent := byte(0)
		if i > 1 {
			parent = 1
		}
		ts.send(oneSpan("api", bigSlow, i, parent, ts.now, 400*time.Millisecond))
	}
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()
	assert.Contains(t, kept, slow)
	assert.NotContains(t, kept, fast)
	assert.NotContains(t, kept, bigSlow, "the first matching rule wins: big (drop) comes before slo")
}

// A condition that fails on a span (here Int() of a non-number) is counted
// and does not match; nothing stops.
func TestRuleRuntimeErrorsAreCounted(t *testing.T) {
	cfg := withRules(testConfig(), RuleConfig{Name: "many", Action: "drop",
		Conditions: []string{`Int(attributes["retries"]) > 3`}})
	ts := newTestSampler(t, cfg)
	bad := traceIDWithRandomness(1, 0.5)
	ts.send(spanWith("api", bad, 1, 0, ts.now, time.Millisecond, map[string]string{"retries": "lots"}))
	dropped := traceIDWithRandomness(2, 0.5)
	td := oneSpan("api", dropped, 1, 0, ts.now, time.Millisecond)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutInt("retries", 5)
	ts.send(td)
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()
	assert.Contains(t, kept, bad, "an erroring condition does not match")
	assert.NotContains(t, kept, dropped)
	assert.Equal(t, 1.0, ts.metric(metadata.MetricRuleErrors, attribute.String("rule", "many")))
}

// The rule bit is set by whichever fragment's span matched: a keep rule on a
// downstream attribute keeps the whole trace.
func TestRuleMatchedByALateFragment(t *testing.T) {
	cfg := withRules(testConfig(), RuleConfig{Name: "canary", Action: "keep",
		Conditions: []string{`attributes["deployment"] == "canary"`}})
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "api", sampling.MinSamplingProbability)
	id := traceIDWithRandomness(1, 0.5)
	ts.send(oneSpan("api", id, 1, 0, ts.now, time.Millisecond))
	ts.send(spanWith("db", id, 2, 1, ts.now, time.Millisecond, map[string]string{"deployment": "canary"}))
	ts.advance(3 * time.Second)
	assert.Len(t, ts.keptSpans()[id], 2)

}

// Rules are evaluated by every feeding goroutine at once: compiled
// conditions are shared, evaluation contexts are not.
func TestRulesUnderConcurrentIntake(t *testing.T) {
	cfg := withRules(testConfig(),
		RuleConfig{Name: "orders", Action: "keep", Conditions: []string{`attributes["url.path"] == "/api/orders"`, `IsMatch(name, "^SELECT")`}},
		RuleConfig{Name: "svc", Action: "sample", Probability: 0.5, Conditions: []string{`resource.attributes["service.name"] == "svc-001"`}})
	cfg.DecisionWait = 50 * time.Millisecond
	cfg.DecisionWaitAfterRoot = 20 * time.Millisecond
	cfg.AdjustInterval = 30 * time.Millisecond
	ts := newTestSampler(t, cfg)
	ts.p.now = time.Now
	require.NoError(t, ts.p.Start(t.Context(), nil))
	feedConcurrently(t, ts.p, 4, 30, workload.Options{Services: 3})
	require.NoError(t, ts.p.Shutdown(t.Context()))
	c, buffered, _, _ := ts.p.tally()
	assert.Zero(t, buffered)
	assert.Equal(t, int64(4*30*20), c.Rules[0].Matched, "every reference trace matches the orders rule")
}
