package grpcgzipextension

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestLoadConfig(t *testing.T) {
	def := loadConfig(t, "")
	assert.Equal(t, &Config{Level: DefaultLevel}, def)
	require.NoError(t, confmap.Validate(def))

	fast := loadConfig(t, "fast")
	require.NoError(t, confmap.Validate(fast))
	assert.Equal(t, 1, fast.Level)
}

func TestValidateNamesTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad_level"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "level: must be between 1 (fastest) and 9 (smallest), got 12")
	assert.ErrorContains(t, confmap.Validate(&Config{Level: 0}), "level")
}
