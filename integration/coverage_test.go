package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestRareEndpointAndREDThroughTheBinaryWithSDKClients (issue 40) runs
// configs/tail.yaml with fairness per (service, route) and rare.interval
// 20 s, fed by real OpenTelemetry SDK clients (their default batch span
// processor: 5 s). Three loud endpoints take 40 traces/s; /refund, the rare
// one, a trace every 5 s. The budget (2 spans/s for 160 offered) is so
// tight that fairness alone keeps a /refund trace with p ≈ 0.06: most
// intervals would have none. With rare, every interval keeps one whole.
// And the RED metrics count every request and span sent, whatever was kept.
func TestRareEndpointAndREDThroughTheBinaryWithSDKClients(t *testing.T) {
	const (
		interval = 20 * time.Second
		runFor   = 70 * time.Second
	)
	sink := startSink(t)
	c := startCollector(t, map[string]string{
		"OTLP_BACKEND_ENDPOINT":   sink.Addr,
		"BUDGET_SPANS_PER_SECOND": "4",
		"BASELINE_KEYS":           "[service.name, http.route]",
		"RARE_INTERVAL":           interval.String(),
		"DECISION_WAIT":           "12s",
	}, configPath("tail.yaml"), configPath("backend.yaml"))

	web := newSDKService(t, c, "web", false, sdktrace.AlwaysSample())
	store := newSDKService(t, c, "store", true, sdktrace.AlwaysSample())
	rnd := rand.New(rand.NewPCG(40, 2))

	type sent struct {
		id    pcommon.TraceID
		route string
		spans int
		start time.Time
	}
	var mu sync.Mutex
	var traces []sent
	var errs int
	request := func(route string, now time.Time) {
		// web's server span, its client call, store's server span and its
		// query: four spans, one resource per service.
		dur := time.Duration(5+rnd.IntN(40)) * time.Millisecond
		start := now.Add(-dur)
		ctx, root := web.tracer.Start(context.Background(), "GET "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
		root.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", 200))
		cctx, call := web.tracer.Start(ctx, "call store", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
		sctx, srv := store.tracer.Start(cctx, "POST /items", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
		_, q := store.tracer.Start(sctx, "SELECT", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
		isErr := rnd.IntN(200) == 0
		if isErr {
			q.SetStatus(codes.Error, "deadlock")
		}
		end := start.Add(dur)
		q.End(trace.WithTimestamp(end))
		srv.End(trace.WithTimestamp(end))
		call.End(trace.WithTimestamp(end))
		root.End(trace.WithTimestamp(end))
		var id pcommon.TraceID
		tid := root.SpanContext().TraceID()
		copy(id[:], tid[:])
		mu.Lock()
		traces = append(traces, sent{id: id, route: route, spans: 4, start: now})
		if isErr {
			errs++
		}
		mu.Unlock()
	}

	began := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	steps := 0
	for now := range tick.C {
		if now.Sub(began) >= runFor {
			break
		}
		for range 4 {
			request([]string{"/cart", "/items", "/search"}[rnd.IntN(3)], now)
		}
		if steps%50 == 0 {
			request("/refund", now)
		}
		steps++
	}
	tick.Stop()
	for _, s := range []*sdkService{web, store} {
		require.NoError(t, s.tp.Shutdown(context.Background()))
	}

	var rare []sent
	spans := 0
	for _, tr := range traces {
		spans += tr.spans
		if tr.route == "/refund" {
			rare = append(rare, tr)
		}
	}
	// Every trace decided: decision_wait after the last export.
	eventually(t, 40*time.Second, func() bool {
		v, _ := metricValue(c.metrics(), "otelcol_processor_budget_tail_sampling_red_requests_total", nil)
		return int(v) >= len(traces)
	}, "RED counts every request")
	fams := c.metrics()
	requests, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_red_requests_total", nil)
	redSpans, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_red_spans_total", nil)
	redErrs, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_red_errors_total", nil)
	refund, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_red_requests_total", map[string]string{"key": "web|/refund"})
	assert.EqualValues(t, len(traces), requests, "RED requests: every trace the SDKs sent, once")
	assert.EqualValues(t, spans, redSpans, "RED spans: every span the SDKs sent, once")
	assert.EqualValues(t, errs, redErrs, "RED errors")
	assert.EqualValues(t, len(rare), refund, "RED per key")

	// The rare endpoint kept whole at least once an interval: the kept
	// /refund traces are never more than two intervals apart (one is kept in
	// each clock-aligned interval of decision time; a decision comes 7–17 s
	// after the trace starts), and there is one for each interval of the run.
	var kept []time.Time
	for _, tr := range rare {
		got := len(sink.trace(tr.id))
		if got > 0 {
			assert.Equal(t, tr.spans, got, "a kept /refund trace is whole")
			kept = append(kept, tr.start)
		}
	}
	slices.SortFunc(kept, func(a, b time.Time) int { return a.Compare(b) })
	intervals := int(runFor / interval)
	require.GreaterOrEqual(t, len(kept), intervals, "a /refund trace kept each interval: %d kept of %d sent", len(kept), len(rare))
	assert.Less(t, kept[0].Sub(began), interval+10*time.Second, "the first interval has one")
	for i := 1; i < len(kept); i++ {
		assert.LessOrEqual(t, kept[i].Sub(kept[i-1]), 2*interval+10*time.Second, "kept /refund traces %d and %d", i-1, i)
	}
	keptSpans := sink.spanCount()
	t.Logf("RARE sent %d traces (%d /refund, %d spans); kept %d spans; /refund kept %d; RED requests %.0f spans %.0f errors %.0f",
		len(traces), len(rare), spans, keptSpans, len(kept), requests, redSpans, redErrs)
	reportRow("real SDK clients, rare endpoint + RED", spans, keptSpans, 0, 0,
		fmt.Sprintf("/refund kept whole in each of %d intervals (%d of %d traces); RED counted %.0f of %d spans", intervals, len(kept), len(rare), redSpans, spans))
}
