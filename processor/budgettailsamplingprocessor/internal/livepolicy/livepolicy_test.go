package livepolicy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
)

func watcher(t *testing.T, base policy.BudgetConfig) (*Watcher, func(string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	base.Pricing, base.Instances = pricing.DefaultConfig(), 1
	if base.MaxPriorityShare == 0 {
		base.MaxPriorityShare = 0.8
	}
	return New(Config{Path: path, CheckInterval: time.Second}, Base{Budget: base, MinShare: 0.2}), write
}

func TestReloadFileChangesTheAmountOnce(t *testing.T) {
	w, write := watcher(t, policy.BudgetConfig{SpansPerSecond: 1000})
	write("version: v1\nbudget:\n  spans_per_second: 500\n")
	pol, err := w.Load()
	require.NoError(t, err)
	assert.Equal(t, "v1", pol.Version)
	assert.Equal(t, policy.Retune{PerSecond: 500, MaxPriorityShare: 0.8, MinBaselineShare: 0.2}, pol.Retune)
	_, changed, err := w.Check()
	require.NoError(t, err)
	assert.False(t, changed, "the same content is not applied again")

	write("budget:\n  spans_per_second: 250\n  max_priority_share: 0.5\nbaseline:\n  min_share: 0.1\n")
	pol, changed, err = w.Check()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, policy.Retune{PerSecond: 250, MaxPriorityShare: 0.5, MinBaselineShare: 0.1}, pol.Retune)
	assert.Len(t, pol.Version, 12, "without a version, the content's hash")
}

func TestReloadMoneyBudgetIsPerSecond(t *testing.T) {
	w, write := watcher(t, policy.BudgetConfig{MonthlyCost: 1000})
	write("budget:\n  monthly_cost: 500\n")
	pol, err := w.Load()
	require.NoError(t, err)
	assert.InDelta(t, 500/pricing.Month.Seconds(), pol.Retune.PerSecond, 1e-12)
}

// An invalid file names the field; reported once per content, then the
// running policy is simply kept.
func TestReloadInvalidFileNamesTheField(t *testing.T) {
	w, write := watcher(t, policy.BudgetConfig{SpansPerSecond: 1000})
	for _, c := range []struct{ content, want string }{
		{"budget:\n  spans_per_second: -5\n", "budget.spans_per_second"},
		{"budget:\n  spans_per_second: 5\n  bytes_per_second: 7\n", "exactly one of"},
		{"budget:\n  spans_per_second: 5\n  max_priority_share: 1.5\n", "budget.max_priority_share"},
		{"version: no-budget\n", "budget: must set the budget's amount (budget.spans_per_second)"},
		{"budget:\n  max_priority_share: 0.5\n", "budget's amount"},
		{"budget:\n  spans_per_second: 1000\nbaseline:\n  min_share: 1\n", "baseline.min_share"},
		{"budget:\n  spans_per_secnd: 5\n", "spans_per_secnd"},
		{"budget:\n  monthly_cost: 100\n", "not its kind"},
		{"budget: [1, 2\n", "not YAML"},
		{"budget:\n  spans_per_second: 1000\nrules:\n  - name: x\n    conditions: ['attributes[\"a\" == 1']\n    action: keep\n", `rules[0] ("x").conditions[0]`},
		{"budget:\n  spans_per_second: 1000\nrules:\n  - name: x\n    conditions: ['name == \"a\"']\n    action: maybe\n", `rules[0] ("x").action`},
		{"budget:\n  spans_per_second: 1000\nbaseline:\n  keys: [\"\"]\n", "baseline.keys[0]"},
	} {
		write(c.content)
		_, changed, err := w.Check()
		assert.True(t, changed, c.content)
		require.Error(t, err, c.content)
		assert.Contains(t, err.Error(), c.want)
		_, changed, err = w.Check()
		assert.False(t, changed, "reported once")
		assert.NoError(t, err)
	}
}

func TestReloadMissingFileIsAnErrorAtStart(t *testing.T) {
	w, _ := watcher(t, policy.BudgetConfig{SpansPerSecond: 1000})
	_, err := w.Load()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "policy_file.path")
}

// A file that goes away while the sampler runs is reported once; when it
// comes back with the running content, nothing changes.
func TestReloadFileGoneIsReportedOnce(t *testing.T) {
	w, write := watcher(t, policy.BudgetConfig{SpansPerSecond: 1000})
	write("budget:\n  spans_per_second: 500\n")
	_, err := w.Load()
	require.NoError(t, err)
	require.NoError(t, os.Remove(w.cfg.Path))
	_, changed, err := w.Check()
	assert.True(t, changed)
	require.Error(t, err)
	_, changed, _ = w.Check()
	assert.False(t, changed)
	assert.True(t, w.Rejected(), "while it is gone")
	write("budget:\n  spans_per_second: 500\n")
	_, changed, err = w.Check()
	assert.False(t, changed)
	assert.NoError(t, err)
	assert.False(t, w.Rejected(), "back with the running content: nothing rejected")
}

func TestReloadStatusFollowsTheFile(t *testing.T) {
	w, write := watcher(t, policy.BudgetConfig{SpansPerSecond: 1000})
	write("budget:\n  spans_per_second: 1000\nversion: v1\n")
	_, err := w.Load()
	require.NoError(t, err)
	write("budget:\n  spans_per_second: -1\n")
	_, _, err = w.Check()
	require.Error(t, err)
	assert.True(t, w.Rejected())
	assert.Equal(t, "v1", w.Version(), "the running policy's")
	write("budget:\n  spans_per_second: 1000\nversion: v2\n")
	_, _, err = w.Check()
	require.NoError(t, err)
	assert.False(t, w.Rejected())
	assert.Equal(t, "v2", w.Version())
	applied, rejected := w.Reloads()
	assert.Equal(t, [2]int64{2, 1}, [2]int64{applied, rejected})
}

func ruleNames(rs *rules.Set) (active, slots []string) {
	for _, i := range rs.Order() {
		active = append(active, rs.Rule(i).Name)
	}
	return active, rs.Names()
}

// Rules in the file replace the configuration's; each keeps its slot while
// its name and action stay, so that what buffered traces matched and what
// was decided keep their meaning.
func TestReloadRulesKeepTheirSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	base := Base{Budget: policy.BudgetConfig{SpansPerSecond: 1000, MaxPriorityShare: 0.8, Instances: 1, Pricing: pricing.DefaultConfig()},
		Rules: []rules.Config{{Name: "health", Conditions: []string{`name == "/health"`}, Action: "drop"}},
		Keys:  []string{"service.name"}, Telemetry: componenttest.NewNopTelemetrySettings()}
	w := New(Config{Path: path, CheckInterval: time.Second}, base)
	write("budget:\n  spans_per_second: 1000\nversion: v1\n")
	pol, err := w.Load()
	require.NoError(t, err)
	active, slots := ruleNames(pol.Rules)
	assert.Equal(t, []string{"health"}, active, "no rules in the file: the configuration's")
	assert.Equal(t, []string{"health"}, slots)
	assert.Len(t, pol.Keys, 1)

	write(`budget:
  spans_per_second: 1000
rules:
  - name: vip
    conditions: ['resource.attributes["tier"] == "gold"']
    action: keep
  - name: health
    conditions: ['name == "/healthz"']
    action: drop
baseline:
  keys: [service.name, http.route]
`)
	pol, changed, err := w.Check()
	require.NoError(t, err)
	require.True(t, changed)
	active, slots = ruleNames(pol.Rules)
	assert.Equal(t, []string{"vip", "health"}, active, "tried in the file's order")
	assert.Equal(t, []string{"health", "vip"}, slots, "health keeps slot 0; vip takes a new one")
	assert.Equal(t, []int{1, 0}, pol.Rules.Order())
	assert.Len(t, pol.Keys, 2)

	write("budget:\n  spans_per_second: 1000\nrules:\n  - name: health\n    conditions: ['name == \"/health\"']\n    action: keep\n")
	pol, _, err = w.Check()
	require.NoError(t, err)
	active, slots = ruleNames(pol.Rules)
	assert.Equal(t, []string{"health"}, active)
	assert.Equal(t, []string{"health", "vip", "health"}, slots, "an action changed takes a new slot: late spans of its drops stay dropped")
	assert.True(t, pol.Rules.Rule(0).Retired)
	assert.Equal(t, rules.ActionDrop, pol.Rules.Rule(0).Action)
	assert.True(t, pol.Rules.Rule(1).Retired)

	// Slots are never reused: past 64 names in a sampler's life the file
	// is refused, naming the way out.
	var many strings.Builder
	many.WriteString("budget:\n  spans_per_second: 1000\nrules:\n")
	for i := range 62 {
		fmt.Fprintf(&many, "  - name: r%d\n    conditions: ['name == \"x\"']\n    action: drop\n", i)
	}
	write(many.String())
	_, _, err = w.Check()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "restart the sampler")
}

func TestReloadShadowFileRunsTheLiveRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shadow.yaml")
	require.NoError(t, os.WriteFile(path, []byte("budget:\n  spans_per_second: 1000\nrules: []\n"), 0o600))
	w := NewShadow(Config{ShadowPath: path, CheckInterval: time.Second}, Base{Budget: policy.BudgetConfig{SpansPerSecond: 1000,
		MaxPriorityShare: 0.8, Instances: 1, Pricing: pricing.DefaultConfig()}})
	_, err := w.Load()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "policy_file")
	assert.Contains(t, err.Error(), "live rules")
}

// rare.interval and stress_relief's levels change through the file,
// validated as the configuration's; rare cannot be turned on or off there.
func TestReloadRareIntervalAndReliefLevels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	base := Base{Budget: policy.BudgetConfig{SpansPerSecond: 1000, MaxPriorityShare: 0.8, Instances: 1, Pricing: pricing.DefaultConfig()},
		Rare: rare.Config{Interval: time.Minute}, Relief: relief.Config{Mode: relief.ModeMonitor, ActivationLevel: 90, DeactivationLevel: 75},
		DecisionWait: 15 * time.Second}
	w := New(Config{Path: path, CheckInterval: time.Second}, base)
	write("budget:\n  spans_per_second: 1000\nversion: v1\n")
	pol, err := w.Load()
	require.NoError(t, err)
	assert.Equal(t, time.Minute, pol.RareInterval, "the configuration's")
	assert.Equal(t, [2]float64{90, 75}, pol.ReliefLevels)

	write("budget:\n  spans_per_second: 1000\nrare:\n  interval: 5m\nstress_relief:\n  activation_level: 70\n  deactivation_level: 50\n")
	pol, changed, err := w.Check()
	require.NoError(t, err)
	require.True(t, changed)
	assert.Equal(t, 5*time.Minute, pol.RareInterval)
	assert.Equal(t, [2]float64{70, 50}, pol.ReliefLevels)

	for content, want := range map[string]string{
		"rare:\n  interval: 10s\n":                            "rare.interval: must be 0 (off) or ≥ decision_wait",
		"rare:\n  interval: 0s\n":                             "turning it on or off is a configuration change",
		"stress_relief:\n  deactivation_level: 95\n":          "stress_relief.deactivation_level: must be below activation_level",
		"stress_relief:\n  activation_level: 150\n":           "stress_relief.activation_level",
		"stress_relief:\n  minimum_activation_duration: 1s\n": "minimum_activation_duration",
	} {
		write("budget:\n  spans_per_second: 1000\n" + content)
		_, _, err := w.Check()
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want, content)
	}
	off := base
	off.Rare.Interval = 0
	w = New(Config{Path: path, CheckInterval: time.Second}, off)
	write("budget:\n  spans_per_second: 1000\nrare:\n  interval: 1m\n")
	_, err = w.Load()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the configuration has rare off")
}

// A file that cannot be applied fails start only when strict (otelcol
// validate); otherwise the sampler starts on the last policy applied (kept
// by an earlier run), or on the configuration's when none was kept, the
// file counted rejected and the error logged naming the field; once the
// file is fixed, it applies.
func TestPolicyFileRejectedAtStartDoesNotStopTheSampler(t *testing.T) {
	dir := t.TempDir()
	// The kept file's directory (the log's) does not exist yet at start.
	path, keep := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "kept", "policy-applied.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	base := Base{Budget: policy.BudgetConfig{SpansPerSecond: 1000, MaxPriorityShare: 0.8, Instances: 1, Pricing: pricing.DefaultConfig()}}
	start := func(strict bool) (*Watcher, Policy, bool, *observer.ObservedLogs, error) {
		w := New(Config{Path: path, CheckInterval: time.Second}, base)
		w.KeepIn(keep)
		core, logs := observer.New(zapcore.InfoLevel)
		pol, ok, err := w.Start(zap.New(core), strict)
		return w, pol, ok, logs, err
	}

	// A good file at a first start applies, and is kept.
	write("version: first\nbudget:\n  spans_per_second: 200\n")
	w, pol, ok, logs, err := start(false)
	require.NoError(t, err)
	require.True(t, ok)
	assert.False(t, w.Rejected())
	assert.Equal(t, "first", pol.Version)
	assert.Zero(t, logs.Len(), "nothing to say")
	kept, err := os.ReadFile(keep)
	require.NoError(t, err)
	assert.Contains(t, string(kept), "version: first")
	require.NoError(t, os.RemoveAll(filepath.Dir(keep)))

	write("budget:\n  spans_per_second: -3\n")
	_, _, _, _, err = start(true)
	require.Error(t, err, "strict: validate fails on the file")
	assert.Contains(t, err.Error(), "budget.spans_per_second")
	w, _, ok, logs, err = start(false)
	require.NoError(t, err, "a start does not stop")
	assert.False(t, ok, "nothing kept: the configuration's policy")
	assert.True(t, w.Rejected())
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].ContextMap()["error"], "budget.spans_per_second")

	write("version: good\nbudget:\n  spans_per_second: 300\n")
	pol, changed, err := w.Check()
	require.NoError(t, err)
	require.True(t, changed, "fixed: applied")
	assert.InDelta(t, 300, pol.Retune.PerSecond, 1e-9)

	write("budget:\n  spans_per_second: 300\n  bytes_per_second: 5\n")
	w, pol, ok, logs, err = start(false)
	require.NoError(t, err)
	require.True(t, ok, "the last policy applied, kept")
	assert.Equal(t, "good", pol.Version)
	assert.Equal(t, "good", w.Version(), "the version running, for policy_version")
	assert.InDelta(t, 300, pol.Retune.PerSecond, 1e-9)
	assert.True(t, w.Rejected())
	assert.Contains(t, logs.All()[0].Message, "the last policy applied")
}
