package integration

import (
	"bytes"
	"context"
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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
)

// freePort returns a loopback port nobody listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := procwatch.FreePort()
	require.NoError(t, err)
	return port
}

// collector is a running otelcol-cost process.
type collector struct {
	t       *testing.T
	cmd     *exec.Cmd
	out     *procwatch.Output
	done    chan struct{}
	exitErr error
	GRPC    string
	HTTP    string
	Health  string
	Metrics string
	DataDir string
	ep      endpoints
}

// endpoints are where a collector listens.
type endpoints struct {
	GRPC, HTTP, Health string
	MetricsPort        int
	MetricsHost        string // 127.0.0.1 when empty
}

func newEndpoints(t *testing.T) endpoints {
	return endpoints{
		GRPC:        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		HTTP:        fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		Health:      fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		MetricsPort: freePort(t),
	}
}

// startCollector runs the binary with the given configs on free loopback
// ports and waits until its health check answers. A port picked free can be
// taken before the collector binds it (an outgoing connection's ephemeral
// port, a parallel test): then it retries on new ports, three times at most.
func startCollector(t *testing.T, env map[string]string, configs ...string) *collector {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := launchCollector(t, newEndpoints(t), env, configs...)
		if err == nil {
			return c
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("retrying on other ports: %v", firstLine(err.Error()))
	}
}

// startCollectorAt is startCollector on given endpoints (to restart a
// collector where it was); a port still held retries after a pause.
func startCollectorAt(t *testing.T, ep endpoints, env map[string]string, configs ...string) *collector {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := launchCollector(t, ep, env, configs...)
		if err == nil {
			return c
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func launchCollector(t *testing.T, ep endpoints, env map[string]string, configs ...string) (*collector, error) {
	t.Helper()
	c := &collector{
		t:       t,
		out:     &procwatch.Output{},
		done:    make(chan struct{}),
		GRPC:    ep.GRPC,
		HTTP:    ep.HTTP,
		Health:  ep.Health,
		DataDir: t.TempDir(),
		ep:      ep,
	}
	metricsPort := ep.MetricsPort
	metricsHost := ep.MetricsHost
	if metricsHost == "" {
		metricsHost = "127.0.0.1"
	}
	c.Metrics = fmt.Sprintf("%s:%d", metricsHost, metricsPort)
	args := []string{}
	for _, cfg := range configs {
		args = append(args, "--config", cfg)
	}
	c.cmd = exec.Command(binary, args...)
	c.cmd.Dir = repoRoot()
	c.cmd.Env = append(os.Environ(),
		"OTLP_GRPC_ENDPOINT="+c.GRPC,
		"OTLP_HTTP_ENDPOINT="+c.HTTP,
		"HEALTH_CHECK_ENDPOINT="+c.Health,
		"METRICS_HOST="+metricsHost,
		fmt.Sprintf("METRICS_PORT=%d", metricsPort),
		"OTELCOL_COST_DATA_DIR="+c.DataDir,
	)
	for k, v := range env {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.exitErr = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", c.out.String())
		}
	})
	if err := c.waitHealthy(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *collector) waitHealthy() error {
	switch procwatch.WaitReady("http://"+c.Health+"/", c.done, 60*time.Second) {
	case procwatch.ErrExited:
		return fmt.Errorf("collector exited during start-up: %v\n%s", c.exitErr, c.out.String())
	case procwatch.ErrNotReady:
		_ = c.cmd.Process.Kill()
		return fmt.Errorf("collector not healthy after 60s:\n%s", c.out.String())
	}
	return nil
}

// kill sends SIGKILL and waits for the process to go.
func (c *collector) kill() {
	c.t.Helper()
	_ = c.cmd.Process.Kill()
	<-c.done
}

// stop sends SIGTERM and waits for a clean exit.
func (c *collector) stop() {
	c.t.Helper()
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		c.t.Fatalf("collector did not exit within 60s of SIGTERM")
	}
	require.NoError(c.t, c.exitErr, "clean exit after SIGTERM")
}

func (c *collector) sendGRPC(td ptrace.Traces) error {
	conn, err := grpc.NewClient(c.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	return err
}

func (c *collector) sendHTTP(td ptrace.Traces) error {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		return err
	}
	resp, err := http.Post("http://"+c.HTTP+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// keptTraces reads every request the file exporter wrote.
func (c *collector) keptTraces() []ptrace.Traces {
	c.t.Helper()
	f, err := os.Open(filepath.Join(c.DataDir, "kept-traces.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(c.t, err)
	defer f.Close()
	data, err := io.ReadAll(f)
	require.NoError(c.t, err)
	// The exporter may be writing a line as it is read: only lines it has
	// finished (ended by a newline) are whole.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []ptrace.Traces
	u := ptrace.JSONUnmarshaler{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(line)
		require.NoError(c.t, err)
		out = append(out, td)
	}
	return out
}

func spanCount(tds []ptrace.Traces) int {
	n := 0
	for _, td := range tds {
		n += td.SpanCount()
	}
	return n
}

// metrics scrapes the collector's Prometheus endpoint.
func (c *collector) metrics() map[string]*dto.MetricFamily {
	c.t.Helper()
	resp, err := http.Get("http://" + c.Metrics + "/metrics")
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(c.t, err)
	return fams
}

// metricValue sums the samples of a family whose labels include want.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, found
}

// eventually polls cond every 100ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %v: %s", timeout, fmt.Sprintf(msg, args...))
}

func configPath(name string) string {
	return filepath.Join(repoRoot(), "configs", name)
}
