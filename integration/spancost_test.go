package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// TestSpanCostPerServiceThroughTheBinary sends known traffic for two
// services and checks the per-service bytes and cost on the metrics endpoint.
func TestSpanCostPerServiceThroughTheBinary(t *testing.T) {
	c := startCollector(t, map[string]string{"PRICING_PRESET": "saas_indexed"}, configPath("tail.yaml"))
	var m ptrace.ProtoMarshaler
	wantBytes := map[string]int{}
	wantSpans := map[string]int{}
	for i, svc := range []string{"checkout", "search", "checkout"} {
		g := workload.NewGenerator(workload.Options{Services: 1, SpansPerTrace: 3 + i, Seed: uint64(i)})
		td, _ := g.Batch(40 + 30*i)
		workload.SetService(td, svc)
		// One service per request: its bytes are the request's OTLP size.
		wantBytes[svc] += m.TracesSize(td)
		wantSpans[svc] += td.SpanCount()
		require.NoError(t, c.sendGRPC(td))
	}
	eventually(t, 20*time.Second, func() bool {
		v, _ := metricValue(c.metrics(), "otelcol_processor_span_cost_spans_total", map[string]string{"stage": "kept"})
		return int(v) == wantSpans["checkout"]+wantSpans["search"]
	}, "all spans metered at the kept stage")

	fams := c.metrics()
	for svc, bytes := range wantBytes {
		labels := map[string]string{"stage": "received", "service_name": svc}
		gotBytes, ok := metricValue(fams, "otelcol_processor_span_cost_bytes_total", labels)
		require.True(t, ok, svc)
		assert.InEpsilon(t, float64(bytes), gotBytes, 0.01, "%s bytes", svc)
		gotSpans, _ := metricValue(fams, "otelcol_processor_span_cost_spans_total", labels)
		assert.Equal(t, float64(wantSpans[svc]), gotSpans)
		// saas_indexed: $0.10 per GiB ingested + $1.70 per million spans.
		wantCost := float64(bytes)/(1<<30)*0.10 + float64(wantSpans[svc])/1e6*1.70
		gotCost, _ := metricValue(fams, "otelcol_processor_span_cost_cost_total", labels)
		assert.InEpsilon(t, wantCost, gotCost, 0.01, "%s cost", svc)
		projected, ok := metricValue(fams, "otelcol_processor_span_cost_projected_monthly_cost", labels)
		require.True(t, ok)
		assert.Greater(t, projected, gotCost, "a month of this rate costs more than what was seen")
	}
	c.stop()
}
