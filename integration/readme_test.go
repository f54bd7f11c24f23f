package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadmeTelemetrygenCommand runs the telemetrygen command the README
// gives a newcomer, as written there, against `configs/tail.yaml` — only the
// endpoint is this test's and the duration shorter — and checks that kept
// traces reach the local sink the README points at.
func TestReadmeTelemetrygenCommand(t *testing.T) {
	bin := os.Getenv("TELEMETRYGEN")
	if bin == "" {
		t.Skip("TELEMETRYGEN not set: `make test` installs telemetrygen and sets it")
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	require.NoError(t, err)
	line := regexp.MustCompile(`(?m)^telemetrygen traces .*$`).Find(readme)
	require.NotNil(t, line, "the README shows a telemetrygen traces command")
	args := strings.Fields(string(line))[1:]
	c := startCollector(t, map[string]string{"DECISION_WAIT": "3s", "DECISION_WAIT_AFTER_ROOT": "1s"}, configPath("tail.yaml"))
	var sawEndpoint bool
	for i, a := range args {
		switch {
		case a == "localhost:4317":
			args[i], sawEndpoint = c.GRPC, true
		case i > 0 && args[i-1] == "--duration":
			args[i] = "5s"
		}
	}
	require.True(t, sawEndpoint, "the README's command targets localhost:4317, the default endpoint: %s", line)
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n%s", strings.Join(cmd.Args, " "), out)
	eventually(t, 20*time.Second, func() bool { return spanCount(c.keptTraces()) > 0 },
		"kept traces in %s/kept-traces.jsonl", c.DataDir)
	c.stop()
}
