package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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
// budget panels have data: in a budgets file, as the chart has them.
const serviceBudgets = "default_monthly: 0.01\n"

// TestE2EDashboardPanelsHaveData runs a gateway and two samplers under load,
// scraped by a real Prometheus evaluating the shipped rules (recording rules
// included), and runs every query of every dashboard panel: each returns data.
func TestE2EDashboardPanelsHaveData(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	budgets := filepath.Join(t.TempDir(), "service-budgets.yaml")
	require.NoError(t, os.WriteFile(budgets, []byte(serviceBudgets), 0o600))
	// With the chart's default live policy file, and a shadow candidate.
	policy, candidate := filepath.Join(t.TempDir(), "policy.yaml"), filepath.Join(t.TempDir(), "shadow.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("version: v1\nbudget:\n  spans_per_second: 400\n"), 0o600))
	require.NoError(t, os.WriteFile(candidate, []byte("version: v2\nbudget:\n  spans_per_second: 200\n"), 0o600))
	tr := startTier(t, tierOptions{samplers: 2, budget: 400,
		samplerEnv: map[string]string{"POLICY_FILE": policy, "POLICY_SHADOW_FILE": candidate, "SERVICE_BUDGETS_FILE": budgets}})
	var samplers []string
	for _, s := range tr.samplers {
		samplers = append(samplers, s.Metrics)
	}
	prom := startPrometheus(t, map[string][]string{"sampler": samplers, "gateway": {tr.gateway.Metrics}}, "5s")
	lg := newLoadGen(t, tr.gateway, 200, 3)
	lg.run(15 * time.Second)
	queries := dashboardQueries(t)
	var missing map[string]bool
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing = map[string]bool{}
		for title, qs := range queries {
			for _, q := range qs {
				if readsAfterAWholeRareInterval(q) {
					continue
				}
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

	// Every series the alerts and the dashboard read exists on the running
	// collectors, under exactly that name: a rename (ours, or a collector
	// release's suffix default) fails here, not silently in production.
	exposed := map[string]bool{}
	for _, c := range append([]*collector{tr.gateway}, tr.samplers...) {
		for name, fam := range c.metrics() {
			exposed[name] = true
			if fam.GetType().String() == "HISTOGRAM" {
				exposed[name+"_bucket"] = true
			}
		}
	}
	for _, name := range referencedSeries(t) {
		if onlyOnTrouble[name] || afterAWholeRareInterval[name] {
			continue
		}
		assert.True(t, exposed[name], "%s is referenced by the alerts or the dashboard but no collector exposes it", name)
	}
}

// afterAWholeRareInterval are reported once a whole clock-aligned
// rare.interval (1m) has passed, longer than this test's load; the
// processor's TestWeightsRareCoverageWhenTheBudgetFallsShort and
// TestShadowRareCoverage read them.
var afterAWholeRareInterval = map[string]bool{
	"otelcol_processor_budget_tail_sampling_rare_coverage_ratio":        true,
	"otelcol_processor_budget_tail_sampling_policy_rare_coverage_ratio": true,
}

// readsAfterAWholeRareInterval reports whether query q reads one of them.
func readsAfterAWholeRareInterval(q string) bool {
	for name := range afterAWholeRareInterval {
		if strings.Contains(q, name) {
			return true
		}
	}
	return false
}

// onlyOnTrouble are series a healthy tier does not expose, each checked
// elsewhere: contrib's tail_sampling (TestE2EAlertsFire runs it), the
// memory_limiter's refusals (TestE2EOverload) and exporter send failures.
var onlyOnTrouble = map[string]bool{
	// The alerts read either router's series: contrib's load_balancing
	// (gateway.router: load_balancing; TestRingEqualityTraceRouterAndLoadBalancing
	// runs it) and trace_router's failures, exposed once a send fails
	// (the exporter's own tests).
	"otelcol_loadbalancer_backend_outcome_total":            true,
	"otelcol_loadbalancer_num_backends":                     true,
	"otelcol_exporter_trace_router_send_failed_spans_total": true,
	"otelcol_exporter_trace_router_rerouted_spans_total":    true,
	// The trace_router receiver's fallbacks: a sampler refused, or a request
	// the wire split does not read (the receiver's own tests).
	"otelcol_receiver_trace_router_pipeline_spans_total":   true,
	"otelcol_receiver_trace_router_refused_requests_total": true,
	// Refusals, losses and rejections: TestHostileInputThroughTheGateway
	// reads the refusals and the losses from the built gateway; the
	// exporter's tests count rejected and undecodable spans.
	"otelcol_receiver_trace_router_dropped_spans_total":                      true,
	"otelcol_exporter_trace_router_undecodable_spans_total":                  true,
	"otelcol_exporter_trace_router_rejected_spans_total":                     true,
	"otelcol_processor_tail_sampling_sampling_trace_dropped_too_early_total": true,
	"otelcol_processor_memory_limiter_refused_spans_total":                   true,
	"otelcol_exporter_send_failed_spans_total":                               true,
}

// referencedSeries lists the otelcol_* series named in the alert rules and
// the dashboard.
func referencedSeries(t *testing.T) []string {
	t.Helper()
	var text []byte
	for _, f := range []string{filepath.Join("files", "alerts.yaml"), filepath.Join("dashboards", "otelcol-cost.json")} {
		raw, err := os.ReadFile(filepath.Join(chartDir(), f))
		require.NoError(t, err)
		text = append(text, raw...)
	}
	seen := map[string]bool{}
	var out []string
	for _, loc := range regexp.MustCompile(`\botelcol_[a-z0-9_]+`).FindAllIndex(text, -1) {
		if loc[1] < len(text) && text[loc[1]] == ':' {
			continue // a recording rule of ours (otelcol_cost:…), not a collector's series
		}
		if name := string(text[loc[0]:loc[1]]); !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	require.NotEmpty(t, out)
	return out
}
