package integration

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAlertRules checks the rules file and runs its promtool unit tests,
// which fire and silence every alert.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is needed: apt-get install prometheus")
	rules := filepath.Join(chartDir(), "files", "alerts.yaml")
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, string(out))
	out, err = exec.Command(promtool, "test", "rules", filepath.Join(repoRoot(), "alerts", "alerts_test.yaml")).CombinedOutput()
	require.NoError(t, err, string(out))
}
