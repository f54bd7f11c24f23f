package grpcgzipextension

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-cost/otelcol-cost/internal/configtest"
)

func loadConfig(t *testing.T, name string) *Config {
	return configtest.Load[*Config](t, NewFactory(), name)
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
