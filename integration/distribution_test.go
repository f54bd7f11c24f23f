package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// validate runs `otelcol-cost validate` and returns its combined output.
func validate(t *testing.T, env []string, configs ...string) (string, error) {
	t.Helper()
	args := []string{"validate"}
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// shippedConfigs lists every config under configs/ with the base it
// overlays (backend.yaml is an overlay of tail.yaml,
// gateway-loadbalancing.yaml of gateway.yaml).
func shippedConfigs(t *testing.T) [][]string {
	t.Helper()
	files, err := filepath.Glob(configPath("*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var sets [][]string
	for _, f := range files {
		switch filepath.Base(f) {
		case "backend.yaml":
			sets = append(sets, []string{configPath("tail.yaml"), f})
			continue
		case "gateway-loadbalancing.yaml":
			sets = append(sets, []string{configPath("gateway.yaml"), f})
			continue
		}
		sets = append(sets, []string{f})
	}
	return sets
}

func TestShippedConfigsValidate(t *testing.T) {
	env := []string{"OTLP_BACKEND_ENDPOINT=127.0.0.1:4317"}
	for _, set := range shippedConfigs(t) {
		t.Run(filepath.Base(set[len(set)-1]), func(t *testing.T) {
			out, err := validate(t, env, set...)
			require.NoError(t, err, out)
		})
	}
}

func TestBrokenConfigNamesTheField(t *testing.T) {
	base, err := os.ReadFile(configPath("tail.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"span_cost max_series", "    stage: received\n", "    stage: received\n    max_series: 0\n", []string{"span_cost/received", "max_series"}},
		{"span_cost preset", "    stage: received\n    pricing:\n      preset: ${env:PRICING_PRESET:-self_hosted_object_storage}\n", "    stage: received\n    pricing:\n      preset: gold\n", []string{"span_cost/received", "pricing", "preset", "gold"}},
		{"sampler budget", "spans_per_second: ${env:BUDGET_SPANS_PER_SECOND:-1000}\n", "spans_per_second: 1000\n      monthly_cost: 50\n", []string{"budget_tail_sampling", "budget: exactly one of"}},
		{"sampler quantile", "    adjust_interval: ${env:ADJUST_INTERVAL:-5s}\n", "    adjust_interval: 5s\n    outliers:\n      quantile: 99\n", []string{"budget_tail_sampling", "outliers.quantile"}},
		{"unknown field", "    stage: kept\n", "    stage: kept\n    budget_monthly: 5\n", []string{"span_cost/kept", "budget_monthly"}},
		{"sampler rule OTTL", "    adjust_interval: ${env:ADJUST_INTERVAL:-5s}\n", "    adjust_interval: 5s\n    rules:\n      - name: vip\n        action: keep\n        conditions: ['attributes[\"tier\"] == ']\n",
			[]string{"budget_tail_sampling", `rules[0] ("vip").conditions[0]`, "invalid syntax"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := strings.Replace(string(base), tc.from, tc.to, 1)
			require.True(t, broken != string(base), "the test must change the config")
			path := filepath.Join(t.TempDir(), "broken.yaml")
			require.NoError(t, os.WriteFile(path, []byte(broken), 0o600))
			out, err := validate(t, nil, path)
			require.Error(t, err, "a broken config must fail validation")
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
		})
	}
}

// The gateway's gzip level comes from the environment: out of range, the
// binary refuses to start and names the extension and the field.
func TestGatewayGzipLevelOutOfRangeNamesTheField(t *testing.T) {
	out, err := validate(t, []string{"SAMPLER_GZIP_LEVEL=12"}, configPath("gateway.yaml"))
	require.Error(t, err)
	assert.Contains(t, out, "grpc_gzip")
	assert.Contains(t, out, "level: must be between 1 (fastest) and 9 (smallest), got 12")
	_, err = validate(t, []string{"SAMPLER_GZIP_LEVEL=1"}, configPath("gateway.yaml"))
	assert.NoError(t, err)
}

// TestComponentsMatchManifest checks `otelcol-cost components` against
// builder-config.yaml, not against a hand-kept list.
func TestComponentsMatchManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "builder-config.yaml"))
	require.NoError(t, err)
	var manifest map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &manifest))
	var wantModules []string
	for _, kind := range []string{"receivers", "processors", "exporters", "extensions", "connectors"} {
		list, _ := manifest[kind].([]any)
		require.NotEmpty(t, list, kind)
		for _, entry := range list {
			m := entry.(map[string]any)
			mod := m["gomod"].(string)
			if imp, ok := m["import"].(string); ok && strings.HasPrefix(mod, "github.com/otelcol-cost/") {
				// Our components: the module is this repo, one entry per package.
				mod = imp + " " + strings.Fields(mod)[1]
			}
			wantModules = append(wantModules, mod)
		}
	}

	out, err := exec.Command(binary, "components").Output()
	require.NoError(t, err)
	var listed map[string]any
	require.NoError(t, yaml.Unmarshal(out, &listed))
	gotModules := map[string]bool{}
	for _, kind := range []string{"receivers", "processors", "exporters", "extensions", "connectors"} {
		list, _ := listed[kind].([]any)
		for _, entry := range list {
			gotModules[entry.(map[string]any)["module"].(string)] = true
		}
	}
	var ours []string
	for _, w := range wantModules {
		if strings.HasPrefix(w, "github.com/otelcol-cost/") {
			ours = append(ours, w)
			continue
		}
		assert.True(t, gotModules[w], "manifest module %s is not in the binary", w)
	}
	// Our own components report the repo module; each must be present.
	for _, w := range ours {
		assert.True(t, gotModules["github.com/otelcol-cost/otelcol-cost v0.0.0"], "%s missing", w)
	}
	names := []string{}
	for _, list := range listed["processors"].([]any) {
		names = append(names, list.(map[string]any)["name"].(string))
	}
	sort.Strings(names)
	assert.Contains(t, names, "span_cost")

	providers, _ := manifest["providers"].([]any)
	assert.Len(t, listed["providers"], len(providers))
}

// TestSmokeTailConfig starts configs/tail.yaml, sends OTLP over gRPC and HTTP,
// and checks the local sink, health check, metrics and a clean SIGTERM.
func TestSmokeTailConfig(t *testing.T) {
	// Both ways of holding the buffer: as OTLP, and S2-compressed.
	for _, compression := range []string{"none", "s2"} {
		t.Run(compression, func(t *testing.T) {
			c := startCollector(t, map[string]string{"BUFFER_COMPRESSION": compression}, configPath("tail.yaml"))
			g := workload.NewGenerator(workload.Options{Services: 3, Seed: 1})
			sent := map[[16]byte]bool{}
			total := 0
			for i := 0; i < 10; i++ {
				td, traces := g.Batch(5)
				for _, tr := range traces {
					sent[tr.ID] = true
				}
				total += td.SpanCount()
				if i%2 == 0 {
					require.NoError(t, c.sendGRPC(td))
				} else {
					require.NoError(t, c.sendHTTP(td))
				}
			}
			eventually(t, 30*time.Second, func() bool { return spanCount(c.keptTraces()) >= total },
				"%d spans at the sink", total)

			fams := c.metrics()
			v, ok := metricValue(fams, "otelcol_processor_span_cost_spans_total", map[string]string{"stage": "received"})
			require.True(t, ok, "span_cost metrics on the metrics endpoint")
			assert.Equal(t, float64(total), v)

			// Then data still in flight (the batch processor holds it up to 1s) must
			// be flushed by a graceful shutdown.
			td, _ := g.Batch(20)
			total += td.SpanCount()
			require.NoError(t, c.sendGRPC(td))
			c.stop()
			kept := c.keptTraces()
			assert.Equal(t, total, spanCount(kept), "nothing pending is lost on SIGTERM")
			seen := map[[16]byte]bool{}
			for _, k := range kept {
				spanwalk.Traces(k, func(_ ptrace.ResourceSpans, s ptrace.Span) { seen[s.TraceID()] = true })
			}
			for id := range sent {
				assert.True(t, seen[id], "trace %x kept", id)
			}
		})
	}
}

// TestReliefMemoryLimitFollowsMemoryLimiter: in the shipped configs stress
// relief watches memory_limiter's soft limit read from the same variables,
// so setting MEMORY_LIMIT_MIB alone moves both (it stayed at 768 MiB).
func TestReliefMemoryLimitFollowsMemoryLimiter(t *testing.T) {
	c := startCollector(t, map[string]string{"MEMORY_LIMIT_MIB": "2048", "GOMEMLIMIT": ""}, configPath("tail.yaml"))
	eventually(t, 10*time.Second, func() bool { return strings.Contains(c.out.String(), `"soft_limit_mib": 1792`) },
		"relief's limit is 2048 − 256 MiB:\n%s", c.out.String())
	c.stop()
}
