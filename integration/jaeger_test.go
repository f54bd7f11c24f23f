package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// startJaeger runs Jaeger v2 (built in its own tools module, so its
// collector versions never touch ours) with memory storage on loopback ports;
// it returns the OTLP/gRPC endpoint and the query API's base URL.
func startJaeger(t *testing.T, bin string) (otlp, query string) {
	t.Helper()
	otlp = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	query = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config", filepath.Join(repoRoot(), "integration", "testdata", "jaeger.yaml"))
	cmd.Env = append(os.Environ(), "JAEGER_OTLP_GRPC="+otlp, "JAEGER_QUERY_HTTP="+query,
		fmt.Sprintf("JAEGER_QUERY_GRPC=127.0.0.1:%d", freePort(t)))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("jaeger output:\n%s", out.String())
		}
	})
	eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get("http://" + query + "/api/v3/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "jaeger's query API answers")
	return otlp, "http://" + query
}

// jaegerTrace reads one trace back from Jaeger's api/v3 (OTLP JSON); nil
// while Jaeger does not have it.
func jaegerTrace(t *testing.T, query string, id pcommon.TraceID) []ptrace.Span {
	t.Helper()
	resp, err := http.Get(query + "/api/v3/traces/" + fmt.Sprintf("%x", id[:]))
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var wrapper struct {
		Result json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(body, &wrapper), "%s", body)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(wrapper.Result)
	require.NoError(t, err, "%s", body)
	var spans []ptrace.Span
	spanwalk.Traces(td, func(_ ptrace.ResourceSpans, s ptrace.Span) { spans = append(spans, s) })
	return spans
}

// TestKeptTracesInJaeger: the sampler pipeline exports to a real Jaeger v2;
// every error trace it kept is in Jaeger, whole, every span carrying th.
func TestKeptTracesInJaeger(t *testing.T) {
	bin := os.Getenv("JAEGER")
	if bin == "" {
		t.Skip("JAEGER not set: `make test` builds Jaeger v1.75.0 from tools/jaeger and sets it")
	}
	otlp, query := startJaeger(t, bin)
	c := startCollector(t, map[string]string{
		"OTLP_BACKEND_ENDPOINT":    otlp,
		"BUDGET_SPANS_PER_SECOND":  "200",
		"DECISION_WAIT":            "3s",
		"DECISION_WAIT_AFTER_ROOT": "1s",
		"ADJUST_INTERVAL":          "1s",
	}, configPath("tail.yaml"), configPath("backend.yaml"))
	g := workload.NewGenerator(workload.Options{Services: 3, ErrorEvery: 20, Seed: 17})
	var errorIDs []pcommon.TraceID
	for i := 0; i < 10; i++ {
		td, traces := g.Batch(50)
		for _, tr := range traces {
			if tr.Error {
				errorIDs = append(errorIDs, tr.ID)
			}
		}
		require.NoError(t, c.sendGRPC(td))
		time.Sleep(200 * time.Millisecond)
	}
	require.NotEmpty(t, errorIDs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range errorIDs {
		var spans []ptrace.Span
		for ctx.Err() == nil {
			if spans = jaegerTrace(t, query, id); len(spans) == 4 {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		require.Len(t, spans, 4, "error trace %x whole in Jaeger", id)
		for _, s := range spans {
			assert.True(t, strings.Contains(s.TraceState().AsRaw(), "th:"), "th on every span in Jaeger, got %q", s.TraceState().AsRaw())
		}
	}
	c.stop()
}
