package livepolicy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
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
	assert.Equal(t, Policy{Version: "v1", Retune: policy.Retune{PerSecond: 500, MaxPriorityShare: 0.8, MinBaselineShare: 0.2}}, pol)
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
		{"budget:\n  max_priority_share: 1.5\n", "budget.max_priority_share"},
		{"baseline:\n  min_share: 1\n", "baseline.min_share"},
		{"budget:\n  spans_per_secnd: 5\n", "spans_per_secnd"},
		{"budget:\n  monthly_cost: 100\n", "not its kind"},
		{"budget: [1, 2\n", "not YAML"},
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
	write("version: v1\n")
	_, err := w.Load()
	require.NoError(t, err)
	write("budget:\n  spans_per_second: -1\n")
	_, _, err = w.Check()
	require.Error(t, err)
	assert.True(t, w.Rejected())
	assert.Equal(t, "v1", w.Version(), "the running policy's")
	write("version: v2\n")
	_, _, err = w.Check()
	require.NoError(t, err)
	assert.False(t, w.Rejected())
	assert.Equal(t, "v2", w.Version())
	applied, rejected := w.Reloads()
	assert.Equal(t, [2]int64{2, 1}, [2]int64{applied, rejected})
}
