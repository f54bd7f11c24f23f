package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// consistentHead is an OTEP 235 consistent probability sampler for root
// spans, as an SDK configured for head sampling runs it: keep when the trace
// ID's randomness passes the threshold, and record ot=th in the tracestate,
// which every child inherits.
type consistentHead struct {
	th sampling.Threshold
}

func (s consistentHead) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	if psc.IsValid() {
		return sdktrace.ParentBased(sdktrace.NeverSample()).ShouldSample(p)
	}
	var id pcommon.TraceID
	copy(id[:], p.TraceID[:])
	if !s.th.ShouldSample(sampling.TraceIDToRandomness(id)) {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	ts, err := psc.TraceState().Insert("ot", "th:"+s.th.TValue())
	if err != nil {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
}

func (s consistentHead) Description() string { return "consistent(" + s.th.TValue() + ")" }

// sdkService is one instrumented service: its own TracerProvider with the
// SDK's default batch span processor (5 s schedule delay), exporting over
// OTLP/gRPC or OTLP/HTTP.
type sdkService struct {
	name   string
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

func newSDKService(t *testing.T, c *collector, name string, useHTTP bool, sampler sdktrace.Sampler) *sdkService {
	t.Helper()
	ctx := context.Background()
	var exp sdktrace.SpanExporter
	var err error
	if useHTTP {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(c.HTTP), otlptracehttp.WithInsecure())
	} else {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPC), otlptracegrpc.WithInsecure())
	}
	require.NoError(t, err)
	res := resource.NewWithAttributes("", attribute.String("service.name", name), attribute.String("k8s.pod.name", name+"-7d9f"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
	return &sdkService{name: name, tp: tp, tracer: tp.Tracer("checkout-instrumentation")}
}

// sdkTrace is the ground truth of one trace the SDK clients produced.
type sdkTrace struct {
	id    pcommon.TraceID
	spans int
	err   bool
	slow  bool
	start time.Time
}

// TestRealSDKClientsThroughTheSampler drives configs/tail.yaml (defaults for
// the waits) with real OpenTelemetry Go SDK clients: four services, each
// with its own TracerProvider and default BatchSpanProcessor, two exporting
// over OTLP/gRPC and two over OTLP/HTTP, started at random phases. One entry
// service head-samples at 25% with a consistent sampler (ot=th). Errors sit
// only on the deepest downstream span; 2% of traces are a 3 s slow mode.
func TestRealSDKClientsThroughTheSampler(t *testing.T) {
	const (
		budget          = 150.0 // spans/s for the tier (one instance)
		tracesPerSecond = 100
		adjust          = 5 * time.Second // the default
		runFor          = 60 * time.Second
	)
	sink := startSink(t)
	c := startCollector(t, map[string]string{
		"OTLP_BACKEND_ENDPOINT":   sink.Addr,
		"BUDGET_SPANS_PER_SECOND": fmt.Sprint(budget),
		"ADJUST_INTERVAL":         adjust.String(),
	}, configPath("tail.yaml"), configPath("backend.yaml"))

	rnd := rand.New(rand.NewPCG(11, 12))
	quarter, err := sampling.ProbabilityToThreshold(0.25)
	require.NoError(t, err)
	names := []string{"web", "checkout", "payments", "ledger"}
	var services []*sdkService
	for i, name := range names {
		// Independent export phases, as separately started pods have.
		time.Sleep(time.Duration(rnd.IntN(1500)) * time.Millisecond)
		var sampler sdktrace.Sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
		if name == "checkout" {
			sampler = consistentHead{th: quarter}
		}
		services = append(services, newSDKService(t, c, name, i%2 == 1, sampler))
	}
	entries := []*sdkService{services[0], services[1]}

	var mu sync.Mutex
	var traces []sdkTrace
	offered := 0 // spans that would exist without head sampling
	newTrace := func(now time.Time) {
		entry := entries[rnd.IntN(len(entries))]
		chain := []*sdkService{entry, services[2], services[3]}
		slow := rnd.Float64() < 0.02
		isErr := rnd.Float64() < 0.01
		// Body: 20–200 ms, log-uniform, whole milliseconds; slow mode: 3 s.
		dur := time.Duration(20*math.Pow(10, rnd.Float64())) * time.Millisecond
		if slow {
			dur = 3 * time.Second
		}
		start := now.Add(-dur)
		ctx := context.Background()
		var id pcommon.TraceID
		spans := 0
		var ends []func()
		for depth, svc := range chain {
			kind := trace.WithSpanKind(trace.SpanKindServer)
			sctx, span := svc.tracer.Start(ctx, "GET /"+svc.name, kind, trace.WithTimestamp(start))
			if depth == 0 {
				tid := span.SpanContext().TraceID()
				copy(id[:], tid[:])
			}
			_, child := svc.tracer.Start(sctx, "call downstream", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start.Add(time.Millisecond)))
			end := start.Add(dur - time.Millisecond)
			if depth == len(chain)-1 && isErr {
				child.SetStatus(codes.Error, "insufficient funds")
			}
			span.SetAttributes(attribute.Int("http.response.status_code", 200))
			ends = append(ends, func() { child.End(trace.WithTimestamp(end)) }, func() { span.End(trace.WithTimestamp(start.Add(dur))) })
			if span.SpanContext().IsSampled() {
				spans += 2
			}
			ctx = trace.ContextWithSpanContext(ctx, child.SpanContext())
			start = start.Add(time.Millisecond)
			dur -= 2 * time.Millisecond
		}
		// Children end first, the root last, as in a real request.
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i]()
		}
		mu.Lock()
		offered += 2 * len(chain)
		if spans > 0 {
			traces = append(traces, sdkTrace{id: id, spans: spans, err: isErr, slow: slow, start: now})
		}
		mu.Unlock()
	}

	began := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	for now := range tick.C {
		if now.Sub(began) >= runFor {
			break
		}
		for range tracesPerSecond / 10 {
			newTrace(now)
		}
	}
	tick.Stop()
	ended := time.Now()
	for _, s := range services {
		require.NoError(t, s.tp.Shutdown(context.Background()))
	}

	// Every error and slow-mode trace kept and whole, once decided
	// (decision_wait 15 s + the batch).
	var errIDs, slowIDs []sdkTrace
	for _, tr := range traces {
		if tr.err {
			errIDs = append(errIDs, tr)
		} else if tr.slow {
			slowIDs = append(slowIDs, tr)
		}
	}
	require.NotEmpty(t, errIDs)
	require.NotEmpty(t, slowIDs)
	whole := func(trs []sdkTrace) int {
		n := 0
		for _, tr := range trs {
			if len(sink.trace(tr.id)) == tr.spans {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && (whole(errIDs) < len(errIDs) || whole(slowIDs) < len(slowIDs)) {
		time.Sleep(500 * time.Millisecond)
	}
	errWhole, slowWhole := whole(errIDs), whole(slowIDs)
	for _, tr := range append(append([]sdkTrace{}, errIDs...), slowIDs...) {
		if got := len(sink.trace(tr.id)); got != tr.spans {
			t.Logf("trace %s (error %v, slow %v): %d of %d spans at the sink", tr.id, tr.err, tr.slow, got, tr.spans)
		}
	}
	assert.Equal(t, len(errIDs), errWhole, "error traces kept whole")
	assert.Equal(t, len(slowIDs), slowWhole, "slow-mode traces kept whole")

	fams := c.metrics()
	late, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_late_spans_total", nil)
	// A graceful stop decides and flushes what is still buffered.
	c.stop()

	// th on every kept span; the kept spans' adjusted counts represent the
	// spans offered before both stages.
	var represented float64
	missingTh := 0
	for _, id := range sink.traceIDs() {
		for _, s := range sink.trace(id) {
			w3c, err := sampling.NewW3CTraceState(s.TraceState().AsRaw())
			th, ok := w3c.OTelValue().TValueThreshold()
			if err != nil || !ok {
				missingTh++
				continue
			}
			represented += th.AdjustedCount()
		}
	}
	assert.Zero(t, missingTh, "th on every kept span")

	// Kept volume of the traffic that started 3 adjust intervals after the
	// first decisions (decision_wait_after_root 7 s + the SDK's 5 s export
	// delay), by the traces' start: the sink sees kept spans in bursts (the
	// SDKs export every 5 s), so counting by arrival time would measure the
	// bursts that happen to fall in the window.
	from := began.Add(12*time.Second + 3*adjust)
	keptSpans := 0
	for _, tr := range traces {
		if !tr.start.Before(from) {
			keptSpans += len(sink.trace(tr.id))
		}
	}
	kept := float64(keptSpans) / ended.Sub(from).Seconds()
	assert.InEpsilon(t, budget, kept, 0.10, "kept %.0f spans/s against a budget of %.0f", kept, budget)
	t.Logf("REALCLIENTS offered %d spans (%d traces exported), kept %.0f spans/s vs budget %.0f (%+.1f%%); errors whole %d/%d, slow whole %d/%d; represented %.0f of %d (%+.1f%%); late spans %.0f",
		offered, len(traces), kept, budget, 100*(kept/budget-1), errWhole, len(errIDs), slowWhole, len(slowIDs),
		represented, offered, 100*(represented/float64(offered)-1), late)
	reportRow("real SDK clients (BSP 5 s, head 25%)", offered, sink.spanCount(), 0, 0,
		fmt.Sprintf("kept %+.1f%% of budget; errors %d/%d, slow %d/%d whole; weights represent %+.1f%%",
			100*(kept/budget-1), errWhole, len(errIDs), slowWhole, len(slowIDs), 100*(represented/float64(offered)-1)))
}
