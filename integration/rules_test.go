package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// rulesOverlay adds rules to configs/tail.yaml's sampler, as a user's
// --config overlay would.
const rulesOverlay = `processors:
  budget_tail_sampling:
    reason_attribute: sampling.reason
    rules:
      - name: health-checks
        action: drop
        conditions: ['attributes["url.path"] == "/healthz"']
      - name: gold
        action: keep
        conditions: ['resource.attributes["customer.tier"] == "gold"']
`

// TestRulesThroughTheBinary runs configs/tail.yaml with a rules overlay
// against a real OTLP sink: health checks are dropped though they carry
// errors, gold customers' traces are all kept while the rest is sampled, and
// the per-rule metrics count both.
func TestRulesThroughTheBinary(t *testing.T) {
	overlay := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(overlay, []byte(rulesOverlay), 0o600))
	out, err := validate(t, []string{"OTLP_BACKEND_ENDPOINT=127.0.0.1:4317"}, configPath("tail.yaml"), configPath("backend.yaml"), overlay)
	require.NoError(t, err, out)

	sink := startSink(t)
	c := startCollector(t, map[string]string{
		"OTLP_BACKEND_ENDPOINT": sink.Addr,
		// 800 spans/s offered: 80 of health checks (dropped, not in the
		// budget), 80 of gold (within the priority cap), 640 of the rest.
		"BUDGET_SPANS_PER_SECOND":  "300",
		"DECISION_WAIT":            "3s",
		"DECISION_WAIT_AFTER_ROOT": "1s",
		"ADJUST_INTERVAL":          "1s",
	}, configPath("tail.yaml"), configPath("backend.yaml"), overlay)

	g := workload.NewGenerator(workload.Options{Services: 3, Seed: 5})
	var health, gold []pcommon.TraceID
	for round := 0; round < 8; round++ {
		td, traces := g.Batch(100)
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			switch i % 10 {
			case 0: // a failing health check
				spans := rs.ScopeSpans().At(0).Spans()
				for k := 0; k < spans.Len(); k++ {
					spans.At(k).Attributes().PutStr("url.path", "/healthz")
					spans.At(k).Status().SetCode(ptrace.StatusCodeError)
				}
				health = append(health, traces[i].ID)
			case 1:
				rs.Resource().Attributes().PutStr("customer.tier", "gold")
				gold = append(gold, traces[i].ID)
			}
		}
		require.NoError(t, c.sendGRPC(td))
		time.Sleep(500 * time.Millisecond)
	}
	eventually(t, 20*time.Second, func() bool {
		for _, id := range gold {
			if len(sink.trace(id)) != 4 {
				return false
			}
		}
		return true
	}, "every gold trace whole at the sink")
	for _, id := range gold {
		spans := sink.trace(id)
		for _, s := range spans {
			if s.ParentSpanID().IsEmpty() {
				v, _ := s.Attributes().Get("sampling.reason")
				assert.Equal(t, "rule:gold", v.Str())
			}
		}
	}
	for _, id := range health {
		assert.Empty(t, sink.trace(id), "health checks dropped, errors and all")
	}
	fams := c.metrics()
	dropped, ok := metricValue(fams, "otelcol_processor_budget_tail_sampling_rule_traces_total", map[string]string{"rule": "health-checks", "outcome": "dropped"})
	require.True(t, ok)
	assert.Equal(t, float64(len(health)), dropped)
	kept, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_rule_traces_total", map[string]string{"rule": "gold", "outcome": "kept"})
	assert.Equal(t, float64(len(gold)), kept)
	notSampled, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_traces_total", map[string]string{"decision": "not_sampled", "reason": "baseline"})
	assert.Positive(t, notSampled, "the rest is sampled")
	c.stop()
}
