package budgettailsamplingprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

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
	for i := 0; i <= maxRules; i++ {
		many = append(many, RuleConfig{Name: fmt.Sprint("r", i), Action: "drop", Conditions: []string{`name == "x"`}})
	}
	assert.ErrorContains(t, withRules(testConfig(), many...).Validate(), "at most 64 rules")
}

func TestTraceConditionVocabulary(t *testing.T) {
	s := &summary{spans: 600, dur: 2500 * time.Millisecond}
	for text, want := range map[string]bool{
		"trace.duration > 2s":        true,
		"trace.duration >= 2500ms":   true,
		"trace.duration < 1s":        false,
		"trace.span_count > 500":     true,
		"trace.span_count == 600":    true,
		"trace.span_count != 600":    false,
		" trace.span_count <= 599 ":  false,
		"trace.duration == 2.5s":     true,
		"trace.duration != 2500ms  ": false,
	} {
		c, err := parseTraceCondition(text)
		require.NoError(t, err, text)
		assert.Equal(t, want, c.holds(s), text)
	}
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
	assert.Equal(t, map[string]float64{"api": 1}, v.baseline, "dropped traces are not in the budget")
	assert.Zero(t, v.errors)
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

func TestKeepRuleMaxShare(t *testing.T) {
	cfg := withRules(budgetConfig(1000), RuleConfig{Name: "debug", Action: "keep", MaxShare: 0.1,
		Conditions: []string{`attributes["debug"] == "true"`}})
	e := newEstimator(cfg, mustRules(t, cfg))
	v := newVolumes(1)
	v.rules[0] = 400 * 5 // 400/s against a cap of 100/s
	v.baseline["api"] = 5000 * 5
	pol := e.update(v, 5, 1000)
	assert.InDelta(t, 0.25, pol.keeps[0].p, 0.01, "sampled to stay within max_share")
	assert.InDelta(t, 900.0/5000, pol.baseline("api").p, 0.01, "the baseline has the rest")
}

func mustRules(t *testing.T, cfg *Config) *ruleSet {
	t.Helper()
	rs, err := compileRules(cfg.Rules, component.TelemetrySettings{Logger: zap.NewNop()})
	require.NoError(t, err)
	return rs
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
	// In the budget: what the rule keeps comes off the baseline's share.
	e := newEstimator(cfg, mustRules(t, cfg))
	v := newVolumes(1)
	v.rules[0] = 2000 * 5
	v.baseline["api"] = 5000 * 5
	pol := e.update(v, 5, 1000)
	assert.InDelta(t, 500.0/5000, pol.baseline("api").p, 0.01)
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
		ts.p.tickAdjust()
	}
	pol := ts.p.policy.Load()
	payP := pol.baseline(ruleKeyPrefix + "payments").p
	webP := pol.baseline("web").p
	assert.InDelta(t, 3, payP/webP, 0.3, "weight 3: three times the level (%.3f vs %.3f)", payP, webP)
	assert.InDelta(t, 0.1, webP, 0.02, "400 = 1000·3L + 1000·L → L = 0.1")
}

func TestWeightedWaterLevel(t *testing.T) {
	rates := map[string]float64{"a": 100, "b": 100, "c": 1}
	weights := func(k string) float64 {
		if k == "b" {
			return 3
		}
		return 1
	}
	// c keeps its 1; a gets L, b 3L: 1 + L + 3L = 81 → L = 20.
	assert.InDelta(t, 20, waterLevel(rates, weights, 81), 1e-9)
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

func mustRulesB(b *testing.B, cfg *Config) *ruleSet {
	b.Helper()
	rs, err := compileRules(cfg.Rules, component.TelemetrySettings{Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	return rs
}

// The native matcher answers exactly as OTTL does, on every shape it takes.
func TestFastMatcherAgreesWithOTTL(t *testing.T) {
	conds := []string{
		`attributes["k"] == "v"`, `span.attributes["k"] == "v"`, `attributes["k"] != "v"`,
		`resource.attributes["r"] == "x"`, `resource.attributes["r"] != "x"`,
		`name == "GET /"`, `span.name != "GET /"`, `attributes["k"] == ""`, `attributes["k"] != ""`,
		`attributes["n"] == "5"`, `attributes["missing"] != "v"`,
	}
	td := ptrace.NewTraces()
	var spans []ptrace.Span
	var owners []ptrace.ResourceSpans
	for i, setup := range []func(r pcommon.Map, s ptrace.Span){
		func(r pcommon.Map, s ptrace.Span) {
			s.Attributes().PutStr("k", "v")
			r.PutStr("r", "x")
			s.SetName("GET /")
		},
		func(r pcommon.Map, s ptrace.Span) {
			s.Attributes().PutStr("k", "w")
			r.PutStr("r", "y")
			s.SetName("POST /")
		},
		func(r pcommon.Map, s ptrace.Span) { s.Attributes().PutInt("n", 5); r.PutInt("r", 1) },
		func(r pcommon.Map, s ptrace.Span) { s.Attributes().PutStr("k", "") },
		func(r pcommon.Map, s ptrace.Span) { s.Attributes().PutBool("k", true) },
		func(r pcommon.Map, s ptrace.Span) {},
	} {
		rs := td.ResourceSpans().AppendEmpty()
		span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		setup(rs.Resource().Attributes(), span)
		span.SetSpanID(pcommon.SpanID{byte(i + 1)})
		spans = append(spans, span)
		owners = append(owners, rs)
	}
	for _, text := range conds {
		fast := compileFast(text)
		require.NotNil(t, fast, text)
		rs := mustRules(t, withRules(testConfig(), RuleConfig{Name: "r", Action: "drop", Conditions: []string{text}}))
		slow := rs.rules[0].spanConds[0]
		for i, span := range spans {
			tc := ottlspanContext(owners[i], span)
			want, err := slow.Eval(t.Context(), tc)
			require.NoError(t, err)
			assert.Equal(t, want, fast.matches(owners[i], span), "%s on span %d", text, i)
		}
	}
	for _, text := range []string{`attributes["k"] == 5`, `IsMatch(name, "x")`, `name == "a" and attributes["k"] == "v"`, `attributes["k"]["x"] == "v"`} {
		assert.Nil(t, compileFast(text), "%s is left to OTTL", text)
	}
}

func ottlspanContext(rs ptrace.ResourceSpans, span ptrace.Span) *ottlspan.TransformContext {
	return ottlspan.NewTransformContext(rs, rs.ScopeSpans().At(0), span)
}

// The conditions the README's migration guide shows parse and run.
func TestMigrationGuideConditionsParse(t *testing.T) {
	cfg := withRules(testConfig(),
		RuleConfig{Name: "numeric", Action: "keep", Conditions: []string{`attributes["k"] >= 500 and attributes["k"] <= 599`}},
		RuleConfig{Name: "boolean", Action: "keep", Conditions: []string{`attributes["debug"] == true`}},
		RuleConfig{Name: "regex", Action: "keep", Conditions: []string{`IsMatch(attributes["url.path"], "^/api/")`}},
		RuleConfig{Name: "tracestate", Action: "keep", Conditions: []string{`IsMatch(trace_state, "vendor=")`, `trace_state["vendor"] == "x"`}},
		RuleConfig{Name: "invert", Action: "drop", Conditions: []string{`not (attributes["k"] == "v")`}},
		RuleConfig{Name: "and", Action: "keep", Conditions: []string{`resource.attributes["service.name"] == "web" and kind == SPAN_KIND_SERVER`},
			TraceConditions: []string{"trace.span_count >= 10"}},
		RuleConfig{Name: "always", Action: "keep", TraceConditions: []string{"trace.span_count > 0"}},
	)
	rs := mustRules(t, cfg)
	td := oneSpan("web", traceIDWithRandomness(1, 0.5), 1, 0, time.Unix(0, 0), time.Millisecond)
	rss := td.ResourceSpans().At(0)
	span := rss.ScopeSpans().At(0).Spans().At(0)
	span.Attributes().PutInt("k", 503)
	span.Attributes().PutBool("debug", true)
	span.Attributes().PutStr("url.path", "/api/orders")
	span.TraceState().FromRaw("vendor=x")
	span.SetKind(ptrace.SpanKindServer)
	var matched uint64
	errs := make([]int64, len(rs.rules))
	rs.matchSpan(rss, rss.ScopeSpans().At(0), span, &matched, errs)
	assert.Equal(t, uint64(0b0111111), matched, "every span condition matches this span")
	assert.Equal(t, make([]int64, len(rs.rules)), errs)
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
	c, buffered, _, _ := ts.p.totals()
	assert.Zero(t, buffered)
	assert.Equal(t, int64(4*30*20), c.rules[0].matched, "every reference trace matches the orders rule")
}
