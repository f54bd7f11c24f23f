package spancostprocessor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor/internal/metadata"
)

func requestOf(service string, spans int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	for range spans {
		ss.Spans().AppendEmpty()
	}
	return td
}

// Budgets changed in the budgets file apply to every series at once, with
// the spend measured so far; a file that cannot be applied keeps them and
// says so.
func TestReloadBudgetsFileChangesBudgetsLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budgets.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }
	write("version: q3\nservices:\n  checkout: 400\n")
	cfg := createDefaultConfig()
	cfg.Budgets.Services = map[string]float64{"checkout": 9999}
	cfg.BudgetsFile.Path = path
	h := newHarness(t, cfg)
	h.send(requestOf("checkout", 100))
	h.send(requestOf("cart", 100))
	budgets := func() map[string]float64 { return h.points(metadata.MetricMonthlyBudget) }
	assert.Equal(t, map[string]float64{"service_name=checkout,stage=received,": 400}, budgets(), "the file's, not the configuration's")

	write("version: q4\ndefault_monthly: 50\nservices:\n  checkout: 800\n")
	h.sc.checkBudgetsFile()
	assert.Equal(t, map[string]float64{"service_name=checkout,stage=received,": 800, "service_name=cart,stage=received,": 50}, budgets(),
		"series made before the change have the new budgets")
	spans := h.points(metadata.MetricSpans)
	assert.Equal(t, 200.0, sum(spans), "the spend measured so far is kept")

	write("services:\n  checkout: -3\n")
	h.sc.checkBudgetsFile()
	assert.Equal(t, 800.0, budgets()["service_name=checkout,stage=received,"], "the running budgets stay")
	assert.Equal(t, 1.0, sum(h.points(metadata.MetricBudgetsFileRejected)))
	assert.Equal(t, 1, h.logs.FilterMessage("budgets file rejected: the running budgets stay").Len())
	assert.Contains(t, h.logs.FilterMessage("budgets file rejected: the running budgets stay").All()[0].ContextMap()["error"], "budgets.services.checkout")
	reloads := h.points(metadata.MetricBudgetsFileReloads)
	assert.Equal(t, 2.0, reloads["outcome=applied,"])
	assert.Equal(t, 1.0, reloads["outcome=rejected,"])

	write("services:\n  checkout: 800\n")
	h.sc.checkBudgetsFile()
	assert.Equal(t, 0.0, sum(h.points(metadata.MetricBudgetsFileRejected)))
}

func TestReloadBudgetsFileInvalidAtStartNamesTheField(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("services:\n  checkout: 10\nservice: {}\n"), 0o600))
	defer func(v bool) { validating = v }(validating)
	for path, want := range map[string]string{bad: "service", filepath.Join(dir, "missing.yaml"): "budgets_file.path"} {
		cfg := createDefaultConfig()
		cfg.BudgetsFile.Path = path
		validating = true
		_, err := newSpanCost(processortest.NewNopSettings(metadata.Type), cfg)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), want, "validate fails, naming the field")
		// A start does not stop on it: the configuration's budgets run,
		// the file is rejected, the log names the field.
		validating = false
		core, logs := observer.New(zapcore.InfoLevel)
		set := processortest.NewNopSettings(metadata.Type)
		set.Logger = zap.New(core)
		sc, err := newSpanCost(set, cfg)
		require.NoError(t, err, path)
		assert.True(t, sc.budgetsFile.Rejected())
		require.Equal(t, 1, logs.Len())
		assert.Contains(t, logs.All()[0].ContextMap()["error"], want)
	}
	cfg := createDefaultConfig()
	cfg.BudgetsFile = BudgetsFileConfig{Path: bad, CheckInterval: 0}
	require.ErrorContains(t, cfg.Validate(), "budgets_file.check_interval")
}
