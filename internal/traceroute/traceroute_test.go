package traceroute

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
)

type router struct{ Router }

// An exporter is found under its ID while it runs, and not after; a
// later exporter under the same ID is not removed by the earlier one's
// unregister (a config reload starts the new before the old is gone).
func TestRegistryFindsARunningExporterOnly(t *testing.T) {
	id := component.MustNewIDWithName("trace_router", "a")
	_, err := Lookup(id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"trace_router/a"`)

	first := &router{}
	unregisterFirst := Register(id, first)
	got, err := Lookup(id)
	require.NoError(t, err)
	assert.Same(t, first, got)

	second := &router{}
	unregisterSecond := Register(id, second)
	unregisterFirst()
	got, err = Lookup(id)
	require.NoError(t, err)
	assert.Same(t, second, got, "the earlier exporter's unregister leaves the later one")

	unregisterSecond()
	_, err = Lookup(id)
	assert.Error(t, err)
}
