package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// TestRingPredictsTheGatewaysRouting: contrib's load_balancing exporter, in
// the built gateway, routes traces to five sinks; the samplers' ring
// (internal/ring) must name the sink of every one of them, or handoff would
// move traces to samplers the gateways do not send them to.
func TestRingPredictsTheGatewaysRouting(t *testing.T) {
	var sinks []*otlpSink
	var addrs []string
	for range 5 {
		s := startSink(t)
		sinks = append(sinks, s)
		addrs = append(addrs, s.Addr)
	}
	gw := startCollector(t, map[string]string{"LOG_LEVEL": "warn", "SAMPLER_COMPRESSION": "none",
		"SAMPLER_ENDPOINTS": "[" + strings.Join(addrs, ", ") + "]"}, configPath("gateway.yaml"))
	g := workload.NewGenerator(workload.Options{Services: 3, SpansPerTrace: 2, Seed: 21})
	const traces = 3000
	for range traces / 100 {
		td := ptrace.NewTraces()
		for range 100 {
			g.Next(td)
		}
		require.NoError(t, gw.sendGRPC(td))
	}
	total := func() int {
		n := 0
		for _, s := range sinks {
			n += len(s.traceIDs())
		}
		return n
	}
	eventually(t, 30*time.Second, func() bool { return total() == traces }, "all %d traces at the sinks", traces)

	r := ring.New(addrs)
	wrong := 0
	for i, s := range sinks {
		got := s.traceIDs()
		assert.NotEmpty(t, got, "sink %d gets a share", i)
		for _, id := range got {
			if r.Owner(id) != addrs[i] {
				wrong++
			}
		}
	}
	assert.Zero(t, wrong, "traces the ring sends elsewhere than the exporter did")
}
