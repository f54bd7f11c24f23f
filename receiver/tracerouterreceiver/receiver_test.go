package tracerouterreceiver

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"
	"github.com/otelcol-cost/otelcol-cost/internal/otlptest"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
	"github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver/internal/metadata"
)

// startExporter starts a trace_router exporter on the samplers; queue
// turns its sending_queue on (what the pipeline hands it then waits there
// for its retries).
func startExporter(t *testing.T, addrs []string, queue bool) exporter.Traces {
	t.Helper()
	f := tracerouterexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*tracerouterexporter.Config)
	cfg.Resolver.Static = configoptional.Some(tracerouterexporter.StaticResolver{Hostnames: addrs})
	cfg.Protocol.OTLP.ClientConfig.TLS.Insecure = true
	cfg.Protocol.OTLP.ClientConfig.Compression = configcompression.TypeZstd
	cfg.BackOffConfig.InitialInterval = 50 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 200 * time.Millisecond
	if !queue {
		cfg.QueueSettings = configoptional.None[exporterhelper.QueueBatchConfig]()
	}
	require.NoError(t, cfg.Validate())
	set := exportertest.NewNopSettings(f.Type())
	set.ID = component.NewID(f.Type()) // the receiver's default
	exp, err := f.CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return exp
}

// lifecycleHost is the generated lifecycle test's host: the receiver routes
// through its collector's trace_router exporter, so one is started (towards
// an address nothing listens at).
func lifecycleHost(t *testing.T) component.Host {
	startExporter(t, []string{"127.0.0.1:1"}, false)
	return componenttest.NewNopHost()
}

// startReceiver starts the receiver on a free port in front of the
// started trace_router exporter, with next as its pipeline.
func startReceiver(t *testing.T, next consumer.Traces, edit func(*Config)) (addr string, tel *componenttest.Telemetry) {
	t.Helper()
	addr, tel, _ = startReceiverWith(t, next, edit, nil)
	return addr, tel
}

// startReceiverWith is startReceiver; tiny sets max_inflight_bytes after
// validation, below what a valid config allows (a bound a test can fill
// with a request or two). It returns the receiver too.
func startReceiverWith(t *testing.T, next consumer.Traces, edit func(*Config), tiny *int64) (addr string, tel *componenttest.Telemetry, r *routerReceiver) {
	t.Helper()
	tel = componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	cfg := createDefaultConfig()
	cfg.Protocols.GRPC.NetAddr.Endpoint = "127.0.0.1:0"
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	if tiny != nil {
		cfg.MaxInflightBytes = *tiny
	}
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	r, err := newReceiver(set, cfg, next)
	require.NoError(t, err)
	// Listen on a port chosen here, so the test knows it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr = ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg.Protocols.GRPC.NetAddr.Endpoint = addr
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
	return addr, tel, r
}

type point struct {
	attrs attribute.Set
	value int64
}

func sumPoints(m metricdata.Metrics) []point {
	var out []point
	if s, ok := m.Data.(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			out = append(out, point{attrs: dp.Attributes, value: dp.Value})
		}
	}
	return out
}

func counter(t *testing.T, tel *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var total int64
	for _, dp := range sumPoints(m) {
		ok := true
		for _, a := range attrs {
			if v, has := dp.attrs.Value(a.Key); !has || v != a.Value {
				ok = false
			}
		}
		if ok {
			total += dp.value
		}
	}
	return total
}

// Real SDK clients (the Go SDK's OTLP/gRPC exporter and batch span
// processor, two services, spans of one trace in different requests): every
// span reaches the sampler the ring gives its trace to, once, and none
// was decoded on the way (the pipeline received nothing).
func TestSDKRequestsAreRoutedAsReceived(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	startExporter(t, addrs, false)
	pipeline := new(consumertest.TracesSink)
	addr, tel := startReceiver(t, pipeline, nil)

	ctx := context.Background()
	var providers []*sdktrace.TracerProvider
	for _, svc := range []string{"frontend", "checkout"} {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
		require.NoError(t, err)
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(50*time.Millisecond)),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", svc))))
		providers = append(providers, tp)
	}
	const traces = 300
	for i := range traces {
		rootCtx, root := providers[0].Tracer("http").Start(ctx, "GET /cart")
		_, child := providers[1].Tracer("db").Start(rootCtx, "SELECT", oteltrace.WithAttributes(attribute.Int("i", i)))
		if i%10 == 0 {
			child.SetStatus(codes.Error, "down")
		}
		child.End()
		root.End()
	}
	for _, tp := range providers {
		require.NoError(t, tp.Shutdown(ctx))
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, s := range samplers {
			n += s.Count()
		}
		return n == 2*traces
	}, 10*time.Second, 20*time.Millisecond)
	rg := ring.New(addrs)
	for _, s := range samplers {
		assert.NotEmpty(t, s.TraceIDs(), "three samplers share 300 traces")
		for _, id := range s.TraceIDs() {
			assert.Equal(t, s.Addr, rg.Owner(id), "trace at the wrong sampler")
		}
		assert.Empty(t, s.Twice(), "spans received twice")
	}
	assert.Zero(t, pipeline.SpanCount(), "nothing decoded into the pipeline")
	require.Eventually(t, func() bool { return counter(t, tel, metadata.MetricRouted) == int64(2*traces) },
		5*time.Second, 10*time.Millisecond, "every span counted as routed")
}

// interleavedRequest is valid OTLP the wire split does not read:
// ResourceSpans{scope_spans{span}, schema_url, scope_spans{span}}.
func interleavedRequest() []byte {
	span := func(b byte) []byte {
		tid := protowire.AppendTag(nil, 1, protowire.BytesType)
		tid = protowire.AppendBytes(tid, []byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
		sp := protowire.AppendTag(nil, 2, protowire.BytesType)
		return protowire.AppendBytes(sp, tid)
	}
	scope := func(b byte) []byte {
		ss := protowire.AppendTag(nil, 2, protowire.BytesType)
		return protowire.AppendBytes(ss, span(b))
	}
	var body []byte
	body = append(body, scope(1)...)
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendString(body, "https://opentelemetry.io/schemas/1.26.0")
	body = append(body, scope(2)...)
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(req, body)
}

// sendRequests sends n requests of traces two-span traces each, all
// taken, and returns the spans sent.
func sendRequests(t *testing.T, c *rawClient, n, traces int) int {
	t.Helper()
	var next uint64
	sent := 0
	for range n {
		td := request(traces, &next)
		sent += td.SpanCount()
		_, err := c.export(encode(t, td))
		require.NoError(t, err)
	}
	return sent
}

// rawClient sends bytes as an OTLP/gRPC trace export.
type rawClient struct{ conn *grpc.ClientConn }

type rawCodecClient struct{}

func (rawCodecClient) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodecClient) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodecClient) Name() string { return "proto" }

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &rawClient{conn: conn}
}

func (c *rawClient) export(req []byte) ([]byte, error) {
	var resp []byte
	err := c.conn.Invoke(context.Background(), exportMethod, &req, &resp, grpc.ForceCodec(rawCodecClient{}))
	return resp, err
}

// request is n traces of two spans each, under one resource, in pdata's
// encoding; span IDs count from *next.
func request(n int, next *uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range n {
		tid := pcommon.TraceID{byte(*next), byte(*next >> 8), byte(i), 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1}
		for range 2 {
			*next++
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(tid)
			sp.SetSpanID(pcommon.SpanID{byte(*next), byte(*next >> 8), byte(*next >> 16), 1})
			sp.SetName("op")
		}
	}
	return td
}

func encode(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	var m ptrace.ProtoMarshaler
	b, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// A sampler that refuses: its part, and only it, is decoded and handed to
// the pipeline; the client is told the request was taken.
func TestARefusedPartGoesDownThePipeline(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	samplers[1].Refuse.Store(true)
	startExporter(t, addrs, false)
	pipeline := new(consumertest.TracesSink)
	addr, tel := startReceiver(t, pipeline, nil)
	c := dialRaw(t, addr)
	sent := sendRequests(t, c, 20, 30)
	require.Eventually(t, func() bool {
		return samplers[0].Count()+samplers[2].Count()+pipeline.SpanCount() == sent
	}, 5*time.Second, 10*time.Millisecond, "every span sent or handed on")
	rg := ring.New(addrs)
	handed := 0
	for _, td := range pipeline.AllTraces() {
		otlptest.EachSpan(td, func(sp ptrace.Span) {
			handed++
			assert.Equal(t, samplers[1].Addr, rg.Owner(sp.TraceID()), "only the refusing sampler's spans")
		})
	}
	assert.Equal(t, sent, samplers[0].Count()+samplers[2].Count()+handed, "every span sent or handed on")
	assert.Positive(t, handed)
	assert.Equal(t, int64(handed), counter(t, tel, metadata.MetricToPipeline, attribute.String("cause", "send_failed")))
}

// Through the real exporter as the pipeline: the refused part waits in the
// exporter's queue and its retries reach the sampler once it takes spans
// again. Nothing lost, nothing received twice.
func TestARefusedPartIsRetriedThroughTheExportersQueue(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	samplers[2].Refuse.Store(true)
	exp := startExporter(t, addrs, true)
	addr, _ := startReceiver(t, exp, nil)
	c := dialRaw(t, addr)
	sent := sendRequests(t, c, 20, 30)
	time.Sleep(200 * time.Millisecond) // retries fail meanwhile
	samplers[2].Refuse.Store(false)
	require.Eventually(t, func() bool {
		n := 0
		for _, s := range samplers {
			n += s.Count()
		}
		return n == sent
	}, 15*time.Second, 20*time.Millisecond)
	for _, s := range samplers {
		require.Empty(t, s.Twice(), "spans received twice")
	}
}

// Spans without a trace ID cannot be routed: dropped, and said so in the
// response's partial success, as OTLP asks.
func TestZeroTraceIDsAreReportedAsRejected(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 2)
	startExporter(t, addrs, false)
	addr, _ := startReceiver(t, new(consumertest.TracesSink), nil)
	var next uint64
	td := request(10, &next)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.At(0).SetTraceID(pcommon.TraceID{})
	spans.At(3).SetTraceID(pcommon.TraceID{})
	resp, err := dialRaw(t, addr).export(encode(t, td))
	require.NoError(t, err)
	r := ptraceotlp.NewExportResponse()
	require.NoError(t, r.UnmarshalProto(resp))
	assert.Equal(t, int64(2), r.PartialSuccess().RejectedSpans())
	assert.Contains(t, r.PartialSuccess().ErrorMessage(), "zero trace ID")
	require.Eventually(t, func() bool { return samplers[0].Count()+samplers[1].Count() == 18 }, 5*time.Second, 10*time.Millisecond)
}

// Requests the wire split does not read are decoded and go down the
// pipeline (still valid OTLP: a field between two ScopeSpans); what is not
// OTLP at all is refused as invalid and counted, never a crash.
func TestRequestsTheSplitDoesNotReadAreDecodedOrRefused(t *testing.T) {
	_, addrs := otlptest.StartN(t, 2)
	startExporter(t, addrs, false)
	pipeline := new(consumertest.TracesSink)
	addr, tel := startReceiver(t, pipeline, nil)
	c := dialRaw(t, addr)

	_, err := c.export(interleavedRequest())
	require.NoError(t, err)
	assert.Equal(t, 2, pipeline.SpanCount(), "decoded and handed on")
	assert.Equal(t, int64(2), counter(t, tel, metadata.MetricToPipeline, attribute.String("cause", "not_indexed")))

	badTraceID := []byte{0x0a, 0x09, 0x12, 0x07, 0x12, 0x05, 0x0a, 0x03, 1, 2, 3}
	for name, b := range map[string][]byte{
		"truncated":              {0x0a, 0x05, 0x12},
		"trace_id of 3 bytes":    badTraceID,
		"not protobuf":           []byte("GET / HTTP/1.1\r\n"),
		"deep field of bad type": {0x0a, 0x04, 0x12, 0x02, 0x12, 0x01},
	} {
		_, err := c.export(b)
		require.Error(t, err, name)
		assert.Equal(t, grpccodes.InvalidArgument, status.Code(err), name)
	}
	assert.Equal(t, int64(4), counter(t, tel, metadata.MetricRefused, attribute.String("cause", "malformed")))
	assert.Equal(t, 2, pipeline.SpanCount())
}

// Past max_inflight_bytes a request is refused with a retryable code,
// before anything of it is held or sent.
func TestMaxInflightBytesRefusesRetryably(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 2)
	startExporter(t, addrs, false)
	var next uint64
	small, big := request(1, &next), request(50, &next)
	// The big request fits alone, not with the small one taken.
	limit := int64(len(encode(t, big))) + requestOverhead + 1024
	addr, tel, _ := startReceiverWith(t, new(consumertest.TracesSink), nil, &limit)
	c := dialRaw(t, addr)
	_, err := c.export(encode(t, small))
	require.NoError(t, err, "a request under the bound passes")
	_, err = c.export(encode(t, big))
	require.Error(t, err)
	assert.Equal(t, grpccodes.Unavailable, status.Code(err))
	assert.Equal(t, int64(1), counter(t, tel, metadata.MetricRefused, attribute.String("cause", "inflight")))
	require.Eventually(t, func() bool { return samplers[0].Count()+samplers[1].Count() == 2 }, 5*time.Second, 10*time.Millisecond,
		"the small request's spans arrive")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 2, samplers[0].Count()+samplers[1].Count(), "only the small request's spans")
}

// A request answered as taken is not dropped when the pipeline refuses
// the part a sampler did not take (memory_limiter above its limit): the
// part is handed on again until the pipeline takes it, its bytes held
// meanwhile, so that new requests are refused (retryably) instead.
func TestAHandedOnPartIsHeldWhileThePipelineRefuses(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 1)
	samplers[0].Refuse.Store(true)
	startExporter(t, addrs, false)
	pipeline := &refusingSink{refusals: 5}
	var next uint64
	first, second := encode(t, request(20, &next)), encode(t, request(1, &next))
	limit := int64(len(first)) + requestOverhead + 1024
	addr, tel, _ := startReceiverWith(t, pipeline, nil, &limit)
	c := dialRaw(t, addr)
	_, err := c.export(first)
	require.NoError(t, err, "taken: its part is sent in the background")
	_, err = c.export(second)
	require.Error(t, err, "refused while the first request's part waits for the pipeline")
	assert.Equal(t, grpccodes.Unavailable, status.Code(err))
	require.Eventually(t, func() bool { return pipeline.sink.SpanCount() == 40 }, 10*time.Second, 10*time.Millisecond,
		"the part reaches the pipeline once it takes data again")
	assert.Equal(t, int32(5), pipeline.refused.Load())
	assert.Zero(t, counter(t, tel, metadata.MetricLost))
	_, err = c.export(second)
	require.NoError(t, err, "taken again once the first is handed on")
}

// refusingSink refuses its first refusals calls, retryably, as
// memory_limiter does, then takes data.
type refusingSink struct {
	sink     consumertest.TracesSink
	refusals int32
	refused  atomic.Int32
}

func (*refusingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *refusingSink) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if s.refused.Load() < s.refusals {
		s.refused.Add(1)
		return errors.New("data refused due to high memory usage")
	}
	return s.sink.ConsumeTraces(ctx, td)
}

// A request the router does not split is decoded and handed to the
// pipeline before the call returns: the pipeline's refusal is the
// client's, with its retryability, as with the otlp receiver.
func TestThePipelinesRefusalOfADecodedRequestIsTheClients(t *testing.T) {
	_, addrs := otlptest.StartN(t, 1)
	startExporter(t, addrs, false)
	addr, _ := startReceiver(t, consumertest.NewErr(errors.New("data refused due to high memory usage")), nil)
	// Valid OTLP the split does not read: a field between two ScopeSpans.
	_, err := dialRaw(t, addr).export(interleavedRequest())
	require.Error(t, err)
	assert.Equal(t, grpccodes.Unavailable, status.Code(err))
}

// With no trace_router exporter started under the configured ID, start-up
// fails and names it.
func TestStartFailsWithoutItsExporter(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Protocols.GRPC.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Exporter = component.MustNewIDWithName("trace_router", "missing")
	r, err := newReceiver(receivertest.NewNopSettings(metadata.Type), cfg, new(consumertest.TracesSink))
	require.NoError(t, err)
	err = r.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"trace_router/missing"`)
	require.NoError(t, r.Shutdown(context.Background()))
}
