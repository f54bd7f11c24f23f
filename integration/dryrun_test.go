package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.yaml.in/yaml/v3"
)

// dryRunOverlay adds to configs/tail.yaml a second pipeline from the same
// receiver through budget_tail_sampling/dry — tail.yaml's sampler as it
// is, with dry_run on — and sends each pipeline to its own sink: the two
// samplers see the same traffic, side by side in one process.
func dryRunOverlay(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(configPath("tail.yaml"))
	require.NoError(t, err)
	var tail struct {
		Processors map[string]map[string]any `yaml:"processors"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tail))
	dry := tail.Processors["budget_tail_sampling"]
	require.NotNil(t, dry)
	dry["dry_run"] = true
	overlay := map[string]any{
		"processors": map[string]any{"budget_tail_sampling/dry": dry,
			// The kept stage's spend as the dry run would make it.
			"span_cost/dry": map[string]any{"stage": "dry_kept", "dry_run": true}},
		"exporters": map[string]any{
			"otlp_grpc/enforced": map[string]any{"endpoint": "${env:ENFORCED_SINK}", "tls": map[string]any{"insecure": true}},
			"otlp_grpc/dry":      map[string]any{"endpoint": "${env:DRY_SINK}", "tls": map[string]any{"insecure": true}},
		},
		"service": map[string]any{"pipelines": map[string]any{
			"traces": map[string]any{"exporters": []string{"otlp_grpc/enforced"}},
			"traces/dry": map[string]any{"receivers": []string{"otlp"},
				"processors": []string{"memory_limiter", "budget_tail_sampling/dry", "span_cost/dry"}, "exporters": []string{"otlp_grpc/dry"}},
		}},
	}
	out, err := yaml.Marshal(overlay)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dry-run.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// TestE2EDryRunForwardsEverySpanAndKeepsTheSameVolume: the same traffic
// (SDK-like fragments, errors on downstream spans, slow traces) goes
// through an enforcing sampler and a dry-run one with the same policy.
// Every span reaches the dry run's exporter, once, with the decision it
// would have got; the volume it would keep is within 5% of what the
// enforcing sampler keeps, and mostly the same traces (consistent
// sampling: the same probabilities keep the same trace IDs).
func TestE2EDryRunForwardsEverySpanAndKeepsTheSameVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	enforced, dry := startSink(t), startSink(t)
	c := startCollector(t, map[string]string{
		"ENFORCED_SINK":            enforced.Addr,
		"DRY_SINK":                 dry.Addr,
		"BUDGET_SPANS_PER_SECOND":  "400",
		"DECISION_WAIT":            "4s",
		"DECISION_WAIT_AFTER_ROOT": "1500ms",
		"ADJUST_INTERVAL":          "2s",
		"LOG_LEVEL":                "warn",
	}, configPath("tail.yaml"), dryRunOverlay(t))
	lg := newLoadGen(t, c, 100, 3)
	lg.run(40 * time.Second)
	waitQuiet(t, []*otlpSink{enforced, dry}, 3*time.Second)
	require.Zero(t, lg.lost, "every request accepted")

	sent, forwarded, twice := 0, 0, 0
	wouldKeep, wouldKeepTraces, both := 0, 0, 0
	reasons := map[string]int{}
	for id, st := range lg.traces {
		sent += st.accepted
		spans := dry.trace(id)
		seen := map[pcommon.SpanID]bool{}
		traceKept := false
		for _, s := range spans {
			if seen[s.SpanID()] {
				twice++
			}
			seen[s.SpanID()] = true
			kept, ok := s.Attributes().Get("sampling.dry_run.kept")
			require.True(t, ok, "every span carries its would-be decision")
			reason, _ := s.Attributes().Get("sampling.dry_run.reason")
			reasons[reason.Str()]++
			assert.Empty(t, s.TraceState().AsRaw(), "no th written in a dry run")
			if kept.Bool() {
				wouldKeep++
				traceKept = true
				th, ok := s.Attributes().Get("sampling.dry_run.th")
				assert.True(t, ok && th.Str() != "", "a would-be-kept span says its th")
			}
		}
		forwarded += len(seen)
		if traceKept {
			wouldKeepTraces++
			if len(enforced.trace(id)) > 0 {
				both++
			}
		}
		if (st.Error || st.Slow) && !traceKept {
			t.Errorf("trace %v (error %v, slow %v) would not be kept", id, st.Error, st.Slow)
		}
	}
	kept := enforced.spanCount()
	t.Logf("dry run: %d of %d spans forwarded (%d twice); would keep %d spans (%d traces), the enforcing sampler kept %d; %d of those traces kept by both; reasons %v",
		forwarded, sent, twice, wouldKeep, wouldKeepTraces, kept, both, reasons)
	assert.Equal(t, sent, forwarded, "every span reaches the exporter")
	assert.Zero(t, twice, "once")
	assert.InEpsilon(t, float64(kept), float64(wouldKeep), 0.05, "the would-be kept volume is what enforcing keeps")
	assert.Greater(t, float64(both), 0.8*float64(wouldKeepTraces), "mostly the same traces")
	// The spend: span_cost after the dry run meters what it would keep,
	// as it would be sent, against span_cost/kept after the enforcing one.
	fams := c.metrics()
	cost := func(stage string) float64 {
		v, ok := metricValue(fams, "otelcol_processor_span_cost_cost_total", map[string]string{"stage": stage})
		require.True(t, ok, stage)
		return v
	}
	spendKept, spendDry := cost("kept"), cost("dry_kept")
	t.Logf("spend: enforced %.6g, dry run would have spent %.6g (%+.1f%%)", spendKept, spendDry, 100*(spendDry/spendKept-1))
	assert.InEpsilon(t, spendKept, spendDry, 0.05, "the dry run's metered spend is what enforcing spends")
	reportRow("dry run", sent, wouldKeep, 0, 0, fmt.Sprintf("%+.1f%% vs enforced", 100*(float64(wouldKeep)/float64(kept)-1)))
}
