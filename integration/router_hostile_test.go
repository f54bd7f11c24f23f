package integration

import (
	"context"
	binenc "encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-cost/otelcol-cost/internal/otlptest"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// startRouterGateway runs the shipped gateway (configs/gateway.yaml, the
// trace_router receiver and exporter) in front of samplers, with overlay
// YAML added last.
func startRouterGateway(t *testing.T, samplers []string, overlay string) *collector {
	t.Helper()
	file := filepath.Join(t.TempDir(), "overlay.yaml")
	yaml := "exporters:\n  trace_router:\n    resolver:\n      static:\n        hostnames: [" + strings.Join(samplers, ", ") + "]\n" + overlay
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	return startCollector(t, map[string]string{"LOG_LEVEL": "warn"}, configPath("gateway.yaml"), file)
}

// rawCodec sends and receives OTLP messages as bytes, as a hostile client
// can.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

const traceExport = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// rawClient sends encoded export requests.
type rawClient struct{ conn *grpc.ClientConn }

func dialRawClient(t *testing.T, addr string) rawClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.ForceCodec(rawCodec{})))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rawClient{conn}
}

func (c rawClient) export(ctx context.Context, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var resp []byte
	err := c.conn.Invoke(ctx, traceExport, &req, &resp)
	return resp, err
}

// goodLoad is well-behaved clients: each request a batch of spans with
// span IDs unique over the run, resent (as SDKs do) while the answer is
// retryable.
type goodLoad struct {
	next     atomic.Uint64
	mu       sync.Mutex
	sent     map[pcommon.SpanID]pcommon.TraceID
	lost     atomic.Int64
	requests atomic.Int64
	tenant   string
}

func newGoodLoad() *goodLoad { return &goodLoad{sent: map[pcommon.SpanID]pcommon.TraceID{}} }

// request is n spans of n/4 traces (fragments of a trace together, as an
// SDK batch holds them), under a resource naming the load's tenant.
func (g *goodLoad) request(rnd *rand.Rand, n int) ([]byte, []pcommon.SpanID, []pcommon.TraceID) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "good")
	if g.tenant != "" {
		rs.Resource().Attributes().PutStr("tenant", g.tenant)
	}
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	var ids []pcommon.SpanID
	var traces []pcommon.TraceID
	var trace pcommon.TraceID
	for i := range n {
		if i%4 == 0 {
			binenc.BigEndian.PutUint64(trace[:8], rnd.Uint64())
			binenc.BigEndian.PutUint64(trace[8:], rnd.Uint64())
		}
		var id pcommon.SpanID
		binenc.BigEndian.PutUint64(id[:], g.next.Add(1))
		sp := spans.AppendEmpty()
		sp.SetTraceID(trace)
		sp.SetSpanID(id)
		sp.SetName("GET /good")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(time.Millisecond)))
		sp.Attributes().PutStr("http.route", "/good")
		ids = append(ids, id)
		traces = append(traces, trace)
	}
	var m ptrace.ProtoMarshaler
	b, _ := m.MarshalTraces(td)
	return b, ids, traces
}

// run sends from clients goroutines, each perSecond requests of spans
// spans a second, for d; ctx carries headers when set.
func (g *goodLoad) run(ctx context.Context, t *testing.T, addr string, clients, perSecond, spans int, d time.Duration) {
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRawClient(t, addr)
			rnd := rand.New(rand.NewPCG(uint64(w), 99))
			tick := time.NewTicker(time.Second / time.Duration(perSecond))
			defer tick.Stop()
			end := time.Now().Add(d)
			for time.Now().Before(end) {
				<-tick.C
				req, ids, traces := g.request(rnd, spans)
				g.mu.Lock()
				for i, id := range ids {
					g.sent[id] = traces[i]
				}
				g.mu.Unlock()
				g.requests.Add(1)
				ok := false
				for attempt := 0; attempt < 40 && !ok; attempt++ {
					_, err := c.export(ctx, req)
					switch status.Code(err) {
					case codes.OK:
						ok = true
					case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Aborted:
						time.Sleep(100 * time.Millisecond)
					default:
						t.Errorf("a good request was answered %v", err)
						attempt = 40
					}
				}
				if !ok {
					g.lost.Add(int64(len(ids)))
				}
			}
		}()
	}
	wg.Wait()
}

// missing counts the spans sent that no sampler took.
func (g *goodLoad) missing(samplers []*otlptest.Recorder) int {
	got := map[pcommon.SpanID]bool{}
	for _, s := range samplers {
		for id := range s.SpanIDs() {
			got[id] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for id := range g.sent {
		if !got[id] {
			n++
		}
	}
	return n
}

// Encodings of the bad-input classes of the receiver's README.
func field(n protowire.Number, body []byte) []byte {
	b := protowire.AppendTag(nil, n, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

func varintField(n protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// oneSpan is a request of one span whose fields are given.
func oneSpan(spanFields ...[]byte) []byte {
	return field(1, field(2, field(2, cat(spanFields...))))
}

var goodTraceID = field(1, []byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})

type badInput struct {
	name  string
	req   []byte
	code  codes.Code // the answer
	cause string     // refused_requests' cause; "" when taken
}

func badInputs() []badInput {
	nested := field(1, nil)
	for range 100 {
		nested = field(5, field(1, nested)) // AnyValue.array_value.values
	}
	var flood []byte
	for range 200_000 {
		flood = append(flood, 0x0a, 0x00)
	}
	bigSpan := oneSpan(goodTraceID, field(5, make([]byte, 10<<20)))
	return []badInput{
		{"truncated", []byte{0x0a, 0x05, 0x12}, codes.InvalidArgument, "malformed"},
		{"not protobuf", []byte("GET / HTTP/1.1\r\n\r\n"), codes.InvalidArgument, "malformed"},
		{"resource_spans as a varint", varintField(1, 1), codes.InvalidArgument, "malformed"},
		{"resource as a varint", field(1, varintField(1, 1)), codes.InvalidArgument, "malformed"},
		{"scope as a varint", field(1, field(2, varintField(1, 1))), codes.InvalidArgument, "malformed"},
		{"span name as a varint", oneSpan(goodTraceID, varintField(5, 1)), codes.InvalidArgument, "malformed"},
		{"attribute value of the wrong type", oneSpan(goodTraceID, field(9, cat(field(1, []byte("k")), field(2, varintField(1, 3))))), codes.InvalidArgument, "malformed"},
		{"event time as a varint", oneSpan(goodTraceID, field(11, varintField(1, 1))), codes.InvalidArgument, "malformed"},
		{"link trace ID of 5 bytes", oneSpan(goodTraceID, field(13, field(1, []byte{1, 2, 3, 4, 5}))), codes.InvalidArgument, "malformed"},
		{"status code as bytes", oneSpan(goodTraceID, field(15, field(3, []byte{1}))), codes.InvalidArgument, "malformed"},
		{"length past the end", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12}, codes.InvalidArgument, "malformed"},
		{"overflowing varint length", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, codes.InvalidArgument, "malformed"},
		{"short trace ID", oneSpan(field(1, []byte{1, 2, 3})), codes.InvalidArgument, "malformed"},
		{"attributes nested 100 deep", oneSpan(goodTraceID, field(9, cat(field(1, []byte("k")), field(2, nested)))), codes.InvalidArgument, "malformed"},
		{"a flood of empty ResourceSpans", flood, codes.InvalidArgument, "too_large"},
		{"one 10 MiB span", bigSpan, codes.InvalidArgument, "too_large"},
		{"no spans", field(1, field(2, nil)), codes.InvalidArgument, "empty"},
		{"unknown fields", oneSpan(goodTraceID, field(2, []byte{1, 2, 3, 4, 5, 6, 7, 8}), varintField(99, 5)), codes.OK, ""},
		{"zero trace ID", oneSpan(field(2, []byte{1, 2, 3, 4, 5, 6, 7, 8})), codes.OK, ""},
	}
}

// TestHostileInputThroughTheGateway: good clients at load through the
// built gateway while one client sends every class of the receiver's
// bad-input table, over and over, so that bad requests are taken in the
// same rounds as good ones, and one sampler refuses for the first seconds
// (its merged parts go back down the pipeline). Every class gets the
// answer and the count the table promises; the good clients lose nothing.
func TestHostileInputThroughTheGateway(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	samplers[0].Refuse.Store(true)
	// gRPC's 4 MiB default would refuse the 10 MiB span before the
	// receiver sees it; raised, the receiver's own limit answers.
	gw := startRouterGateway(t, addrs, "receivers:\n  trace_router:\n    protocols:\n      grpc:\n        max_recv_msg_size_mib: 16\n")
	good := newGoodLoad()
	done := make(chan struct{})
	go func() {
		defer close(done)
		good.run(context.Background(), t, gw.GRPC, 4, 40, 50, 8*time.Second)
	}()
	time.AfterFunc(2*time.Second, func() { samplers[0].Refuse.Store(false) })

	bad := dialRawClient(t, gw.GRPC)
	wantRefused := map[string]int{}
	wrong := map[string]string{} // class → the first wrong answer
	rounds := 0
	for end := time.Now().Add(7 * time.Second); time.Now().Before(end); rounds++ {
		for _, b := range badInputs() {
			resp, err := bad.export(context.Background(), b.req)
			if status.Code(err) != b.code && wrong[b.name] == "" {
				wrong[b.name] = fmt.Sprintf("want %v, got %v", b.code, err)
			}
			if b.cause != "" {
				wantRefused[b.cause]++
			}
			if b.name == "zero trace ID" && len(resp) == 0 && wrong[b.name] == "" {
				wrong[b.name] = "no partial_success"
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	assert.Empty(t, wrong, "every class gets the answer the table promises")
	<-done
	require.Eventually(t, func() bool { return good.missing(samplers) == 0 }, 60*time.Second, 200*time.Millisecond,
		"every good span reaches a sampler")
	assert.Zero(t, good.lost.Load(), "no good request was given up")
	t.Logf("%d good requests (%d spans), %d rounds of %d bad inputs", good.requests.Load(), len(good.sent), rounds, len(badInputs()))

	fams := gw.metrics()
	for cause, n := range wantRefused {
		v, _ := metricValue(fams, "otelcol_receiver_trace_router_refused_requests_total", map[string]string{"cause": cause})
		assert.Equal(t, float64(n), v, "refused_requests{cause=%q}", cause)
	}
	for _, name := range []string{"otelcol_receiver_trace_router_dropped_spans_total", "otelcol_exporter_trace_router_undecodable_spans_total"} {
		v, _ := metricValue(fams, name, nil)
		assert.Zero(t, v, name)
	}
	zero, _ := metricValue(fams, "otelcol_exporter_trace_router_invalid_spans_total", map[string]string{"cause": "zero_trace_id"})
	assert.Equal(t, float64(rounds), zero, "one zero-trace-ID span per round, counted")
}

// TestSlowSamplerThroughTheGateway: one of three samplers answers each
// request 10 s late. The other two keep getting their traces at the pace
// they are sent (at least 90% of their share within a second of its
// sending), and once the slow sampler answers promptly again every span
// reaches a sampler: nothing is lost.
func TestSlowSamplerThroughTheGateway(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	samplers[2].Delay.Store(int64(10 * time.Second))
	gw := startRouterGateway(t, addrs, "")
	good := newGoodLoad()
	good.run(context.Background(), t, gw.GRPC, 4, 40, 50, 10*time.Second)
	time.Sleep(1500 * time.Millisecond) // a round's flush_timeout and the sends

	rg := ring.New(addrs) // the gateway's ring: the hostnames as given
	share := map[int]int{}
	good.mu.Lock()
	for _, trace := range good.sent {
		share[rg.OwnerIndex(trace)]++
	}
	good.mu.Unlock()
	for _, s := range samplers[:2] {
		got, want := len(s.SpanIDs()), share[rg.OwnerIndex(firstTrace(t, s))]
		t.Logf("sampler %s: %d of its %d spans within the load", s.Addr, got, want)
		assert.GreaterOrEqual(t, float64(got), 0.9*float64(want), "a fast sampler kept its throughput")
	}
	samplers[2].Delay.Store(0)
	require.Eventually(t, func() bool { return good.missing(samplers) == 0 }, 90*time.Second, 500*time.Millisecond,
		"once the slow sampler answers again, every span reaches a sampler")
	assert.Zero(t, good.lost.Load())
	v, _ := metricValue(gw.metrics(), "otelcol_receiver_trace_router_dropped_spans_total", nil)
	assert.Zero(t, v)
}

// firstTrace is one trace a sampler took (its ring position names it).
func firstTrace(t *testing.T, s *otlptest.Recorder) pcommon.TraceID {
	t.Helper()
	ids := s.TraceIDs()
	require.NotEmpty(t, ids, "sampler %s took nothing", s.Addr)
	return ids[0]
}

// TestTenantHeadersThroughTheGateway: two tenants, each with its own
// authorization header, send at once through the gateway, which forwards
// that header (protocol.otlp.forward_metadata) and keeps the queue's
// batches apart by it. Every request a sampler receives carries one
// tenant's header and only that tenant's spans.
func TestTenantHeadersThroughTheGateway(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	overlay := `    sending_queue:
      batch:
        partition:
          metadata_keys: [authorization]
    protocol:
      otlp:
        forward_metadata: [authorization]
receivers:
  trace_router:
    protocols:
      grpc:
        include_metadata: true
`
	gw := startRouterGateway(t, addrs, overlay)
	var wg sync.WaitGroup
	loads := map[string]*goodLoad{}
	for _, tenant := range []string{"a", "b"} {
		g := newGoodLoad()
		g.tenant = tenant
		g.next.Store(map[string]uint64{"a": 0, "b": 1 << 40}[tenant])
		loads[tenant] = g
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tenant-"+tenant)
			g.run(ctx, t, gw.GRPC, 2, 40, 30, 4*time.Second)
		}()
	}
	wg.Wait()
	for _, g := range loads {
		require.Eventually(t, func() bool { return g.missing(samplers) == 0 }, 30*time.Second, 200*time.Millisecond)
	}
	requests := 0
	for _, s := range samplers {
		for _, r := range s.Requests() {
			requests++
			auth := r.Metadata.Get("authorization")
			require.Len(t, auth, 1, "one authorization header per request")
			require.Len(t, r.Tenants, 1, "one tenant's spans per request: %v", r.Tenants)
			for tenant := range r.Tenants {
				require.Equal(t, "Bearer tenant-"+tenant, auth[0], "the request carries its own tenant's header")
			}
		}
	}
	t.Logf("%d sampler requests, each one tenant's", requests)
	assert.Positive(t, requests)
}
