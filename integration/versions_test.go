package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// TestCollectorModulesAtOneRelease keeps every collector module, in our
// module and in the generated distribution, at the pinned release.
func TestCollectorModulesAtOneRelease(t *testing.T) {
	allowed := map[string]bool{"v0.161.0": true, "v1.67.0": true}
	for _, file := range []string{"go.mod", "dist/go.mod"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(), file))
		require.NoError(t, err)
		mf, err := modfile.Parse(file, raw, nil)
		require.NoError(t, err)
		checked := 0
		for _, r := range mf.Require {
			p := r.Mod.Path
			core := p == "go.opentelemetry.io/collector" || strings.HasPrefix(p, "go.opentelemetry.io/collector/")
			contrib := strings.HasPrefix(p, "github.com/open-telemetry/opentelemetry-collector-contrib/")
			if !core && !contrib {
				continue
			}
			checked++
			if contrib {
				assert.Equal(t, "v0.161.0", r.Mod.Version, "%s: %s", file, p)
			} else {
				assert.True(t, allowed[r.Mod.Version], "%s: %s at %s", file, p, r.Mod.Version)
			}
		}
		assert.Positive(t, checked, file)
	}
}
