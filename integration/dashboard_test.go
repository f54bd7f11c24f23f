package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboardQueries reads every panel's PromQL from the shipped dashboard,
// with Grafana's variables replaced as Grafana would.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "otelcol-cost.json"))
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	out := map[string][]string{}
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			q := strings.NewReplacer("$__rate_interval", "1m", "$sampler_job", "sampler").Replace(tg.Expr)
			out[p.Title] = append(out[p.Title], q)
		}
	}
	require.GreaterOrEqual(t, len(out), 10)
	return out
}

// serviceBudgets gives every service a budget at the kept stage, so the
// budget panels have data.
const serviceBudgets = `processors:
  span_cost/kept:
    budgets:
      default_monthly: 0.01
`

// TestE2EDashboardPanelsHaveData runs a gateway and two samplers under load,
// scraped by a real Prometheus evaluating the shipped rules (recording rules
// included), and runs every query of every dashboard panel: each returns data.
func TestE2EDashboardPanelsHaveData(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	overlay := filepath.Join(t.TempDir(), "budgets.yaml")
	require.NoError(t, os.WriteFile(overlay, []byte(serviceBudgets), 0o600))
	tr := startTier(t, tierOptions{samplers: 2, budget: 400, samplerConfig: []string{configPath("sampler.yaml"), overlay}})
	var samplers []string
	for _, s := range tr.samplers {
		samplers = append(samplers, s.Metrics)
	}
	prom := startPrometheus(t, map[string][]string{"sampler": samplers, "gateway": {tr.gateway.Metrics}}, "5s")
	lg := newLoadGen(t, tr.gateway, 200, 3)
	lg.run(15 * time.Second)
	queries := dashboardQueries(t)
	missing := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing = map[string]bool{}
		for title, qs := range queries {
			for _, q := range qs {
				if _, ok := prom.query(t, q); !ok {
					missing[title+": "+q] = true
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	assert.Empty(t, missing, "dashboard queries without data")
}
