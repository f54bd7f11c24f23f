package spancostprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-cost/otelcol-cost/internal/configtest"
	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
)

func loadConfig(t *testing.T, name string) *Config {
	return configtest.Load[*Config](t, NewFactory(), name)
}

func TestLoadConfig(t *testing.T) {
	def := loadConfig(t, "")
	assert.Equal(t, createDefaultConfig(), def)
	require.NoError(t, confmap.Validate(def))

	kept := loadConfig(t, "kept")
	require.NoError(t, confmap.Validate(kept))
	assert.Equal(t, "kept", kept.Stage)
	assert.Equal(t, []string{"service.name", "deployment.environment.name"}, kept.Dimensions)
	assert.Equal(t, 50, kept.MaxSeries)
	assert.Equal(t, 30*time.Minute, kept.ProjectionWindow)
	m := kept.Pricing.Resolve()
	assert.Equal(t, 2.5, m.PerMillionSpans)
	assert.Equal(t, 0.10, m.PerGiBIngested, "non-overridden fields come from the preset")
	assert.Equal(t, "EUR", m.Currency)
	assert.Equal(t, 2500.0, kept.Budgets.Services["checkout"])
	assert.Equal(t, 100.0, kept.Budgets.DefaultMonthly)

	live := loadConfig(t, "live_budgets")
	require.NoError(t, confmap.Validate(live))
	assert.Equal(t, BudgetsFileConfig{Path: "/etc/otelcol-cost/policy/service-budgets.yaml", CheckInterval: 30 * time.Second}, live.BudgetsFile)
}

func TestValidateNamesTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad_preset"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pricing: preset: unknown preset \"on_prem_gold\"")

	err = confmap.Validate(loadConfig(t, "bad_values"))
	require.Error(t, err)
	for _, want := range []string{"dimensions[1]", "max_series", "pricing: per_gib_ingested"} {
		assert.Contains(t, err.Error(), want)
	}

	for name, mutate := range map[string]func(*Config){
		"stage":                    func(c *Config) { c.Stage = "Kept!" },
		"dimensions":               func(c *Config) { c.Dimensions = nil },
		"dimensions[1]: duplicate": func(c *Config) { c.Dimensions = []string{"a", "a"} },
		"label":                    func(c *Config) { c.Dimensions = []string{"a.b", "a_b"} },
		"projection_window":        func(c *Config) { c.ProjectionWindow = time.Second },
		"budgets.default_monthly":  func(c *Config) { c.Budgets.DefaultMonthly = -5 },
		"budgets.services.api":     func(c *Config) { c.Budgets.Services = map[string]float64{"api": -1} },
		"budgets.services: per-service budgets need": func(c *Config) {
			c.Dimensions = []string{"team"}
			c.Budgets.Services = map[string]float64{"api": 1}
		},
		"pricing: compression_ratio": func(c *Config) { r := 0.5; c.Pricing.CompressionRatio = &r },
		"pricing: retention":         func(c *Config) { r := -time.Hour; c.Pricing.Retention = &r },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig()
			mutate(cfg)
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), name)
		})
	}
	_ = pricing.GiB
}
