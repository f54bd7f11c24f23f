package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestE2EOverloadStressReliefSDKErrorTracesWhole is the overload as users
// produce it: five services instrumented with the OpenTelemetry Go SDK
// (default batch span processor, OTLP/gRPC) send about 30k spans/s through
// the gateway to one sampler scaled as a 256 MiB container (memory_limiter
// at 80% with the chart's 20% spike, GOMEMLIMIT at 80%, heap buffer,
// max_buffered_bytes 32 MiB). Every trace has one span per service, the
// error, in 2% of traces, on the fourth: its fragment reaches the sampler
// in the fourth service's batch, often after the others were decided at
// arrival. Relief must start, nothing be refused or lost at the senders,
// every error trace leave whole, and the kept volume stay within ±10% of
// the budget while relief is on.
func TestE2EOverloadStressReliefSDKErrorTracesWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const (
		budget          = 3000 // spans/s: 10% of the load
		tracesPerSecond = 6000
		load            = 45 * time.Second
	)
	tr := startTier(t, tierOptions{samplers: 1, budget: budget, samplerEnv: map[string]string{
		"MEMORY_LIMIT_MIB":         "204", // 80% of 256 MiB
		"MEMORY_SPIKE_LIMIT_MIB":   "51",  // 20% of 256 MiB
		"GOMEMLIMIT":               "204MiB",
		"MAX_BUFFERED_BYTES":       fmt.Sprint(32 << 20),
		"BUFFER_MEMORY":            "heap",
		"DECISION_WAIT":            "15s",
		"DECISION_WAIT_AFTER_ROOT": "7s",
		"STRESS_RELIEF_MODE":       "monitor",
		"SAMPLER_INSTANCES":        "1",
	}})
	names := []string{"edge", "web", "checkout", "payments", "ledger"}
	var services []*sdkService
	rnd := rand.New(rand.NewPCG(21, 22))
	for _, name := range names {
		time.Sleep(time.Duration(rnd.IntN(500)) * time.Millisecond) // independent export phases
		services = append(services, newSDKService(t, tr.gateway, name, false, sdktrace.AlwaysSample()))
	}

	var mu sync.Mutex
	type truth struct {
		spans int
		err   bool
	}
	traces := map[pcommon.TraceID]*truth{}
	created := 0
	newTrace := func(now time.Time, isErr bool) {
		ctx := context.Background()
		var id pcommon.TraceID
		var ends []func()
		start := now.Add(-50 * time.Millisecond)
		for depth, svc := range services {
			kind := trace.SpanKindServer
			sctx, span := svc.tracer.Start(ctx, "GET /"+svc.name, trace.WithSpanKind(kind), trace.WithTimestamp(start))
			if depth == 0 {
				tid := span.SpanContext().TraceID()
				copy(id[:], tid[:])
			}
			if depth == 3 && isErr {
				span.SetStatus(codes.Error, "upstream failed")
			}
			end := start.Add(time.Duration(50-depth*5) * time.Millisecond)
			ends = append(ends, func() { span.End(trace.WithTimestamp(end)) })
			ctx = sctx
			start = start.Add(time.Millisecond)
		}
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i]()
		}
		mu.Lock()
		traces[id] = &truth{spans: len(services), err: isErr}
		created += len(services)
		mu.Unlock()
	}
	peaks := watchRSSGrowth(tr.samplers)
	began := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	n := 0
	for now := range tick.C {
		if now.Sub(began) >= load {
			break
		}
		for range tracesPerSecond / 100 {
			n++
			newTrace(now, n%50 == 0)
		}
	}
	tick.Stop()
	ended := time.Now()
	for _, s := range services {
		require.NoError(t, s.tp.Shutdown(context.Background()))
	}
	growth := peaks()

	gw := tr.gateway.metrics()
	accepted, _ := metricValue(gw, "otelcol_receiver_accepted_spans_total", map[string]string{"receiver": "trace_router"})
	refusedAtGateway, _ := metricValue(gw, "otelcol_receiver_refused_spans_total", map[string]string{"receiver": "trace_router"})
	// Decisions settle: the buffered traces' decision_wait, the queue.
	waitQuiet(t, tr.sinks, 5*time.Second)
	time.Sleep(16 * time.Second)
	waitQuiet(t, tr.sinks, 3*time.Second)

	sm := tr.samplers[0].metrics()
	activations, _ := metricValue(sm, "otelcol_processor_budget_tail_sampling_stress_relief_activations_total", nil)
	refused, _ := metricValue(sm, "otelcol_processor_memory_limiter_refused_spans_total", nil)
	recalled, _ := metricValue(sm, "otelcol_processor_budget_tail_sampling_stress_relief_recalled_spans_total", nil)
	evicted, _ := metricValue(sm, "otelcol_processor_budget_tail_sampling_stress_relief_recall_evicted_spans_total", nil)

	sink := tr.sinks[0]
	errTraces, whole, keptWhole, keptTraces := 0, 0, 0, 0
	for id, tt := range traces {
		got := len(sink.trace(id))
		if got > 0 {
			keptTraces++
			if got == tt.spans {
				keptWhole++
			}
		}
		if tt.err {
			errTraces++
			if got == tt.spans {
				whole++
			}
		}
	}
	// Kept volume while relief holds the budget: past the first decision
	// wait, until the load ends.
	from, to := began.Add(20*time.Second), ended
	keptToBudget := float64(sink.spansBetween(from, to)) / (budget * to.Sub(from).Seconds())
	lost := created - int(accepted)
	t.Logf("created %d spans (%d traces, %d with an error), gateway accepted %.0f, refused %.0f; relief started %.0f times, memory_limiter refused %.0f; error traces whole %d of %d; kept traces whole %d of %d; recalled %.0f, evicted %.0f; kept %.2f of the budget",
		created, len(traces), errTraces, accepted, refusedAtGateway, activations, refused, whole, errTraces, keptWhole, keptTraces, recalled, evicted, keptToBudget)
	// Its errors column counts error traces kept whole (the other rows
	// count error spans kept).
	reportOverloadRow("SDK senders, relief on", int(refused), max(lost, 0), whole, errTraces, keptToBudget, growth[0], 204)

	assert.Positive(t, activations, "relief started")
	assert.Zero(t, refused, "memory_limiter refused nothing")
	assert.Zero(t, lost, "the senders lost nothing: every span created was accepted")
	assert.Equal(t, errTraces, whole, "every error trace kept whole")
	assert.InDelta(t, 1, keptToBudget, 0.10, "kept volume within ±10%% of the budget")
}
