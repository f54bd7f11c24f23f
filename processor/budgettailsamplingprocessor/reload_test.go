package budgettailsamplingprocessor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Rules changed through the policy file while traces are buffered and
// decided: a rule added keeps the traces it matches whole, a rule that
// stays keeps what buffered traces matched, and late spans follow the
// decision made under the rule that made it — even once that rule's action
// changed (a new slot) and another rule took its place in the order.
func TestReloadRulesWhileTracesAreBufferedSplitsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(withBudget(s)), 0o600)) }
	write(`version: v1
rules:
  - name: health
    conditions: ['name == "/healthz"']
    action: drop
`)
	cfg := testConfig()
	cfg.ReasonAttribute = "sampling.reason"
	cfg.Outliers.FallbackLatencyThreshold = time.Hour
	cfg.PolicyFile.Path = path
	ts := newTestSampler(t, cfg)
	storeBaselinePolicy(ts, "web", sampling.MinSamplingProbability)
	reload := func(content string) {
		write(content)
		ts.p.checkPolicy()
		ts.p.adj.Tick(ts.now)
	}
	span := func(id pcommon.TraceID, spanID, parent byte, name string, attrs map[string]string) ptrace.Traces {
		td := spanWith("web", id, spanID, parent, ts.now, time.Millisecond, nil)
		rs := td.ResourceSpans().At(0)
		for k, v := range attrs {
			rs.Resource().Attributes().PutStr(k, v)
		}
		rs.ScopeSpans().At(0).Spans().At(0).SetName(name)
		return td
	}
	gold := map[string]string{"customer.tier": "gold"}
	vip, plain, health := traceIDWithRandomness(1, 0.5), traceIDWithRandomness(2, 0.5), traceIDWithRandomness(3, 0.5)
	// First fragments (no root yet), under v1.
	ts.send(span(vip, 2, 1, "GET /cart", gold))
	ts.send(span(plain, 2, 1, "GET /cart", nil))
	ts.send(span(health, 2, 1, "/healthz", nil))

	// v2 adds a keep rule ahead of health: health's slot stays, so the
	// health trace's match is still health's, not vip's.
	reload(`version: v2
rules:
  - name: vip
    conditions: ['resource.attributes["customer.tier"] == "gold"']
    action: keep
  - name: health
    conditions: ['name == "/healthz"']
    action: drop
`)
	ts.advance(time.Second)
	ts.send(span(vip, 1, 0, "GET /", gold))
	ts.send(span(plain, 1, 0, "GET /", nil))
	ts.send(span(health, 1, 0, "GET /", nil))
	ts.advance(3 * time.Second)
	kept := ts.keptSpans()
	require.Len(t, kept[vip], 2, "kept whole by the rule added")
	for _, s := range kept[vip] {
		if s.ParentSpanID().IsEmpty() {
			reason, _ := s.Attributes().Get("sampling.reason")
			assert.Equal(t, "rule:vip", reason.Str(), "on the root")
		}
	}
	assert.NotContains(t, kept, plain)
	assert.NotContains(t, kept, health, "dropped by health, which matched before the change")

	// v3 changes health's action and removes vip. A late error of the
	// trace health dropped stays dropped (a drop rule drops errors too; an
	// error late for a trace the budget left is kept); a late span of vip's
	// trace follows it.
	reload(`version: v3
rules:
  - name: health
    conditions: ['name == "/healthz"']
    action: keep
`)
	lateError := span(health, 3, 1, "/healthz", nil)
	lateError.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
	ts.send(lateError)
	ts.send(span(vip, 3, 1, "GET /late", gold))
	fresh, goldAfter := traceIDWithRandomness(4, 0.5), traceIDWithRandomness(5, 0.5)
	ts.send(span(fresh, 1, 0, "/healthz", nil))
	ts.send(span(goldAfter, 1, 0, "GET /", gold))
	ts.advance(3 * time.Second)
	kept = ts.keptSpans()
	assert.NotContains(t, kept, health, "a late error follows the drop made under health's old action")
	assert.Len(t, kept[vip], 3, "a late span follows vip's keep after vip is gone")
	assert.Contains(t, kept, fresh, "health now keeps")
	assert.NotContains(t, kept, goldAfter, "vip is gone")

	assert.Equal(t, 1.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("vip", "kept")...))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("health", "dropped")...))
	assert.Equal(t, 1.0, ts.metric(metadata.MetricRuleTraces, ruleAttr("health", "kept")...), "one series per name across its slots")
	applied, rejected := ts.p.live.Reloads()
	assert.Equal(t, [2]int64{3, 0}, [2]int64{applied, rejected})
}

// baseline.keys changed through the policy file: traces that arrive after
// are booked under the new keys, with the buffer kept.
func TestReloadBaselineKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(withBudget("version: v1\n")), 0o600))
	cfg := testConfig()
	cfg.PolicyFile.Path = path
	ts := newTestSampler(t, cfg)
	before := traceIDWithRandomness(1, 0.5)
	ts.send(spanWith("web", before, 1, 0, ts.now, time.Millisecond, map[string]string{"http.route": "/cart"}))
	require.NoError(t, os.WriteFile(path, []byte(withBudget("version: v2\nbaseline:\n  keys: [service.name, http.route]\n")), 0o600))
	ts.p.checkPolicy()
	after := traceIDWithRandomness(2, 0.5)
	ts.send(spanWith("web", after, 1, 0, ts.now, time.Millisecond, map[string]string{"http.route": "/cart"}))
	ts.advance(3 * time.Second)
	v, _, _ := ts.p.drain()
	assert.Equal(t, map[string]float64{"web": 1, "web|/cart": 1}, v.Baseline(),
		"the trace buffered before is booked under the key it was read with")
}

// Rules and keys swapped again and again while four goroutines send and
// the sampler decides on its own clock: nothing is lost or left buffered,
// and (under -race) nothing is read while it is written.
func TestReloadRulesUnderConcurrentIntake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	files := []string{
		"version: a\nrules:\n  - name: orders\n    conditions: ['attributes[\"url.path\"] == \"/api/orders\"']\n    action: keep\n",
		"version: b\nbaseline:\n  keys: [service.name, span.name]\nrules:\n  - name: svc\n    conditions: ['resource.attributes[\"service.name\"] == \"svc-001\"']\n    action: sample\n    probability: 0.5\n  - name: orders\n    conditions: ['IsMatch(name, \"^SELECT\")']\n    action: keep\n",
		"version: c\nrules: []\n",
	}
	require.NoError(t, os.WriteFile(path, []byte(withBudget(files[0])), 0o600))
	cfg := testConfig()
	cfg.DecisionWait = 50 * time.Millisecond
	cfg.DecisionWaitAfterRoot = 20 * time.Millisecond
	cfg.AdjustInterval = 30 * time.Millisecond
	cfg.PolicyFile.Path = path
	ts := newTestSampler(t, cfg)
	ts.p.now = time.Now
	require.NoError(t, ts.p.Start(t.Context(), nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 30; i++ {
			assert.NoError(t, os.WriteFile(path, []byte(withBudget(files[i%len(files)])), 0o600))
			ts.p.checkPolicy()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	sent := feedConcurrently(t, ts.p, 4, 30, workload.Options{Services: 3})
	<-done
	require.NoError(t, ts.p.Shutdown(t.Context()))
	c, buffered, _, _ := ts.p.tally()
	assert.Zero(t, buffered)
	assert.Equal(t, sent.Load(), c.Spans[0]+c.Spans[1]+c.Invalid[traceinfo.InvalidDuplicate], "every span decided once")
	applied, rejected := ts.p.live.Reloads()
	assert.Equal(t, int64(0), rejected)
	assert.Greater(t, applied, int64(20))
}

// rare.interval and stress_relief's levels from the policy file reach the
// running sampler: at start (before relief first measures) and on a change.
func TestReloadRareIntervalAndReliefLevelsReachTheSampler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(withBudget(s)), 0o600)) }
	write("stress_relief:\n  activation_level: 60\n  deactivation_level: 40\n")
	cfg := testConfig()
	cfg.Rare.Interval = time.Minute
	cfg.StressRelief.Mode = "monitor"
	cfg.PolicyFile.Path = path
	ts := newTestSampler(t, cfg)
	assert.Equal(t, 60.0, ts.p.relief.ActivationLevel(), "the file's levels from the start")
	assert.Equal(t, time.Minute, ts.p.rare.Interval())
	write("rare:\n  interval: 5m\nstress_relief:\n  activation_level: 95\n  deactivation_level: 80\n")
	ts.p.checkPolicy()
	assert.Equal(t, 95.0, ts.p.relief.ActivationLevel())
	assert.Equal(t, 80.0, ts.p.relief.DeactivationLevel(), "which shedOnMemory cuts the buffer down to too")
	assert.Equal(t, 5*time.Minute, ts.p.rare.Interval())
	write("stress_relief:\n  activation_level: 95\n  deactivation_level: 99\n")
	ts.p.checkPolicy()
	assert.Equal(t, 95.0, ts.p.relief.ActivationLevel(), "a bad file keeps the running levels")
	assert.Equal(t, 5*time.Minute, ts.p.rare.Interval(), "and its rare interval")
}

// withBudget gives a policy file the budget's amount (testConfig's) when
// it has none: a file must set it.
func withBudget(content string) string {
	if strings.Contains(content, "budget:") {
		return content
	}
	return "budget:\n  spans_per_second: 1000\n" + content
}
