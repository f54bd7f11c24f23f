// Package configtest loads a component's configuration from the
// testdata/config.yaml of the package under test, as the collector would:
// the factory's default configuration with the named section over it.
package configtest // import "github.com/otelcol-cost/otelcol-cost/internal/configtest"

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load returns the section of testdata/config.yaml named by the factory's
// type and name ("" for the bare type). C is the component's *Config.
func Load[C component.Config](t *testing.T, factory component.Factory, name string) C {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(factory.Type(), name).String())
	require.NoError(t, err)
	cfg := factory.CreateDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(C)
}
