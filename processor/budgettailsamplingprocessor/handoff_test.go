package budgettailsamplingprocessor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
)

// members is what the fake DNS answers for peers_dns.
type members struct {
	mu  sync.Mutex
	ips []net.IP
}

func (m *members) set(addrs ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ips = nil
	for _, a := range addrs {
		m.ips = append(m.ips, net.ParseIP(a))
	}
}

func (m *members) lookup(_ context.Context, network, _ string) ([]net.IP, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if network != "ip4" || len(m.ips) == 0 {
		return nil, errors.New("no such host")
	}
	return append([]net.IP(nil), m.ips...), nil
}

// handoffTier is samplers on 127.0.0.2, .3, … with handoff servers on one
// port, a fake DNS and one fake clock; the samplers' tickers do not run:
// tests refresh the ring and decide by hand.
type handoffTier struct {
	t        *testing.T
	port     int
	dns      *members
	clock    atomic.Int64
	samplers map[string]*testSampler // by address
}

func newHandoffTier(t *testing.T, addrs []string, tune func(*Config)) *handoffTier {
	ht := &handoffTier{t: t, dns: &members{}, samplers: map[string]*testSampler{}}
	ht.clock.Store(time.Unix(1_700_000_000, 0).UnixNano())
	port, err := procwatch.FreePort()
	require.NoError(t, err)
	ht.port = port
	for _, a := range addrs {
		ht.start(a, tune)
	}
	return ht
}

func (ht *handoffTier) now() time.Time { return time.Unix(0, ht.clock.Load()) }

func (ht *handoffTier) advance(d time.Duration) {
	ht.clock.Add(int64(d))
	for _, ts := range ht.samplers {
		ts.p.decideExpired(context.Background())
	}
}

func (ht *handoffTier) start(addr string, tune func(*Config)) *testSampler {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 1e9 // keep everything: a split shows as a trace at two sinks
	cfg.Budget.PeersDNS = "samplers.test"
	cfg.Handoff.Enabled = true
	cfg.Handoff.SelfAddress = addr
	cfg.Handoff.Server.NetAddr.Endpoint = fmt.Sprintf("%s:%d", addr, ht.port)
	cfg.Handoff.RetryOnFailure.MaxInterval = 200 * time.Millisecond
	cfg.Handoff.RetryOnFailure.MaxElapsedTime = 500 * time.Millisecond
	cfg.Handoff.Timeout = 300 * time.Millisecond
	if tune != nil {
		tune(cfg)
	}
	ts := newTestSampler(ht.t, cfg)
	ts.p.now = ht.now
	ts.p.lookup = ht.dns.lookup
	ts.p.adj.Pin(policy.KeepAll(0))
	require.NoError(ht.t, ts.p.handoff.Start(context.Background(), componenttest.NewNopHost()))
	ht.t.Cleanup(func() { ts.p.handoff.Leave(context.Background()) })
	ht.samplers[addr] = ts
	return ts
}

// resolve gives every sampler the DNS answer now.
func (ht *handoffTier) resolve(addrs ...string) {
	ht.dns.set(addrs...)
	for _, ts := range ht.samplers {
		ts.p.refreshPeers()
	}
}

// settle waits until no sampler has anything queued for, or in flight to, a peer.
func (ht *handoffTier) settle() {
	ht.t.Helper()
	require.Eventually(ht.t, func() bool {
		for _, ts := range ht.samplers {
			if ts.p.handoff.Pending() != 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
}

// where maps each kept trace to the samplers whose sink holds its spans,
// with the count of spans.
func (ht *handoffTier) where() map[pcommon.TraceID]map[string]int {
	out := map[pcommon.TraceID]map[string]int{}
	for addr, ts := range ht.samplers {
		for id, spans := range ts.keptSpans() {
			if out[id] == nil {
				out[id] = map[string]int{}
			}
			out[id][addr] += len(spans)
		}
	}
	return out
}

// multipart sends n traces of 6 spans, the first parts now and the root
// last, and returns the last parts (to be sent later) by trace ID.
func multipart(t *testing.T, to *testSampler, n int) map[pcommon.TraceID]ptrace.Traces {
	g := workload.NewGenerator(workload.Options{Services: 4, SpansPerTrace: 6, Seed: 11, Start: to.p.now()})
	later := map[pcommon.TraceID]ptrace.Traces{}
	for range n {
		td := ptrace.NewTraces()
		tr := g.Next(td)
		parts := workload.Interleave(td, 2)
		require.NoError(t, to.p.ConsumeTraces(context.Background(), parts[1]))
		later[tr.ID] = parts[0] // the part with the root
	}
	return later
}

func TestHandoffMovesTracesToTheirNewOwnerWithTheirArrivalTime(t *testing.T) {
	forEachCompression(t, func(t *testing.T, tune func(*Config)) {
		ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, tune)
		a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
		ht.resolve("127.0.0.2") // B is not in the ring yet: A owns everything
		later := multipart(t, a, 300)
		require.EqualValues(t, 300, a.p.bufferedTraces())

		ht.advance(4 * time.Second)
		ht.resolve("127.0.0.2", "127.0.0.3") // scale out: B joins
		ht.settle()
		r := ring.New([]string{"127.0.0.2:4317", "127.0.0.3:4317"})
		toB := 0
		for id := range later {
			if r.Owner(id) == "127.0.0.3:4317" {
				toB++
			}
		}
		require.Positive(t, toB)
		assert.EqualValues(t, 300-toB, a.p.bufferedTraces(), "A keeps only what it owns")
		assert.EqualValues(t, toB, b.p.bufferedTraces(), "B holds what moved")
		assert.EqualValues(t, toB, b.metric("otelcol_processor_budget_tail_sampling_handoff_traces", attributeDirection("received")))
		assert.EqualValues(t, toB, a.metric("otelcol_processor_budget_tail_sampling_handoff_traces", attributeDirection("sent")))

		// Gateways still on the old ring send the roots to A: A passes B's on.
		for _, part := range later {
			require.NoError(t, a.p.ConsumeTraces(context.Background(), part))
		}
		ht.settle()
		assert.EqualValues(t, toB, b.p.bufferedTraces())
		assert.Positive(t, a.metric("otelcol_processor_budget_tail_sampling_handoff_proxied_spans"))

		// Decision_wait (10 s) counts from the first arrival at A, 4 s before
		// the handoff: both decide at 10 s, not 14.
		ht.advance(1 * time.Second) // the roots arrived at 4 s: 2 s after root is 6 s
		ht.advance(1 * time.Second)
		assert.Zero(t, a.p.bufferedTraces()+b.p.bufferedTraces(), "decided 2 s after the root, as without handoff")
		assertWhole(t, ht.where(), 300)
	})
}

// forEachCompression runs a handoff test with the buffer held as is and
// S2-compressed: what travels to a peer is OTLP either way.
func forEachCompression(t *testing.T, test func(t *testing.T, tune func(*Config))) {
	for _, compression := range []string{compressionNone, compressionS2} {
		t.Run(compression, func(t *testing.T) {
			test(t, func(c *Config) { c.BufferCompression = compression })
		})
	}
}

func attributeDirection(d string) attribute.KeyValue { return attribute.String("direction", d) }

func TestHandedTracesKeepTheirDecisionWait(t *testing.T) {
	ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, nil)
	a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
	ht.resolve("127.0.0.2")
	later := multipart(t, a, 100) // no root yet: decision_wait (10 s) applies
	ht.advance(6 * time.Second)
	ht.resolve("127.0.0.3") // A leaves the ring
	ht.settle()
	require.Zero(t, a.p.bufferedTraces())
	require.EqualValues(t, len(later), b.p.bufferedTraces())
	ht.advance(3 * time.Second)
	assert.EqualValues(t, len(later), b.p.bufferedTraces(), "9 s after the first span: still waiting")
	ht.advance(1100 * time.Millisecond)
	assert.Zero(t, b.p.bufferedTraces(), "10 s after the first span arrived at A: decided at B")
}

func TestRecentDecisionsTravelWithTheRing(t *testing.T) {
	ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, func(c *Config) { c.Handoff.Window = 20 * time.Second })
	a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
	ht.resolve("127.0.0.2")
	// A decides: half kept, half not (a baseline of 0.5 on trace randomness).
	storeBaselinePolicy(a, "svc", 0.5)
	var ids []pcommon.TraceID
	for i := range 200 {
		id := traceIDWithRandomness(uint64(i+1), float64(i%100)/100)
		ids = append(ids, id)
		require.NoError(t, a.p.ConsumeTraces(context.Background(), oneSpan("svc", id, 1, 0, ht.now(), time.Millisecond)))
	}
	ht.advance(3 * time.Second)
	require.Zero(t, a.p.bufferedTraces())
	keptAtA := a.keptSpans()
	require.NotEmpty(t, keptAtA)
	require.Less(t, len(keptAtA), 200)

	// Late spans of the moved traces reach B (gateways on the new ring).
	moved, r := joinAndSendLate(t, ht, b, ids, func(id pcommon.TraceID) ptrace.Traces {
		return oneSpan("svc", id, 2, 1, ht.now(), time.Millisecond)
	})
	assert.Zero(t, b.p.bufferedTraces(), "late spans follow the decision made at A, not a new one")
	for id, spans := range b.keptSpans() {
		_, keptBefore := keptAtA[id]
		assert.True(t, keptBefore, "B keeps late spans only of traces A kept")
		assert.Equal(t, thOf(keptAtA[id][0]), thOf(spans[0]), "with A's threshold")
	}
	keptLate := 0
	for _, id := range ids {
		if _, ok := keptAtA[id]; ok && r.Owner(id) == "127.0.0.3:4317" {
			keptLate++
		}
	}
	assert.Len(t, b.keptSpans(), keptLate)
	assert.EqualValues(t, moved, b.metric("otelcol_processor_budget_tail_sampling_handoff_decisions", attributeDirection("received")))

	// Decisions older than the window stay: they are not worth the traffic.
	ht.advance(30 * time.Second)
	before := a.metric("otelcol_processor_budget_tail_sampling_handoff_decisions", attributeDirection("sent"))
	ht.resolve("127.0.0.2")
	ht.resolve("127.0.0.2", "127.0.0.3")
	ht.settle()
	assert.Equal(t, before, a.metric("otelcol_processor_budget_tail_sampling_handoff_decisions", attributeDirection("sent")))
}

// joinAndSendLate adds 127.0.0.3 (b) to the ring beside 127.0.0.2, waits
// for the handoff, and sends b a late span (late's) of each of ids the
// new ring gives it; it returns how many and the ring.
func joinAndSendLate(t *testing.T, ht *handoffTier, b *testSampler, ids []pcommon.TraceID, late func(pcommon.TraceID) ptrace.Traces) (int, *ring.Ring) {
	t.Helper()
	ht.resolve("127.0.0.2", "127.0.0.3")
	ht.settle()
	r := ring.New([]string{"127.0.0.2:4317", "127.0.0.3:4317"})
	moved := 0
	for _, id := range ids {
		if r.Owner(id) == "127.0.0.3:4317" {
			moved++
			require.NoError(t, b.p.ConsumeTraces(context.Background(), late(id)))
		}
	}
	require.Positive(t, moved)
	return moved, r
}

func thOf(s ptrace.Span) string { return s.TraceState().AsRaw() }

func TestGracefulLeaveHandsTheBufferOver(t *testing.T) {
	forEachCompression(t, func(t *testing.T, tune func(*Config)) {
		ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}, tune)
		a := ht.samplers["127.0.0.2"]
		ht.resolve("127.0.0.2", "127.0.0.3", "127.0.0.4")
		r := ring.New([]string{"127.0.0.2:4317", "127.0.0.3:4317", "127.0.0.4:4317"})
		later := multipart(t, a, 300)
		owned := 0
		for id := range later {
			if r.Owner(id) == "127.0.0.2:4317" {
				owned++
			}
		}
		require.Positive(t, owned)
		ht.settle() // what A does not own went on at once
		require.EqualValues(t, owned, a.p.bufferedTraces())

		ht.dns.set("127.0.0.3", "127.0.0.4") // A's endpoint leaves the Service, then SIGTERM
		require.NoError(t, a.p.Shutdown(context.Background()))
		assert.Empty(t, a.sink.AllTraces(), "A decided nothing: it handed everything over")
		for addr, ts := range ht.samplers {
			if addr == "127.0.0.2" {
				continue
			}
			ts.p.refreshPeers() // the others see A gone
			for id, part := range later {
				if r.Without("127.0.0.2:4317").Owner(id) == addr+":4317" {
					require.NoError(t, ts.p.ConsumeTraces(context.Background(), part))
				}
			}
		}
		ht.settle()
		ht.advance(11 * time.Second)
		assertWhole(t, ht.where(), 300)
	})
}

// refusingPeer answers every handoff with an error after delay.
type refusingPeer struct {
	ptraceotlp.UnimplementedGRPCServer
	delay time.Duration
	calls atomic.Int64
}

func (r *refusingPeer) Export(ctx context.Context, _ ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r.calls.Add(1)
	select {
	case <-time.After(r.delay):
	case <-ctx.Done():
	}
	return ptraceotlp.NewExportResponse(), status.Error(codes.Unavailable, "refusing")
}

func TestPeerThatRefusesOrHangsDegradesToLocalDecisions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		serve bool
	}{
		{"nobody listening", 0, false},
		{"refuses", 0, true},
		{"hangs past the timeout", 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ht := newHandoffTier(t, []string{"127.0.0.2"}, nil)
			a := ht.samplers["127.0.0.2"]
			if tc.serve {
				srv := grpc.NewServer()
				peer := &refusingPeer{delay: tc.delay}
				ptraceotlp.RegisterGRPCServer(srv, peer)
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.3:%d", ht.port))
				require.NoError(t, err)
				go func() { _ = srv.Serve(ln) }()
				t.Cleanup(srv.Stop)
				defer func() { assert.Positive(t, peer.calls.Load()) }()
			}
			ht.resolve("127.0.0.2")
			later := multipart(t, a, 200)
			ht.resolve("127.0.0.2", "127.0.0.3")
			// Intake never waits for the peer: roots of traces the peer owns
			// are queued (or kept here) at once.
			start := time.Now()
			for _, part := range later {
				require.NoError(t, a.p.ConsumeTraces(context.Background(), part))
			}
			assert.Less(t, time.Since(start), 2*time.Second, "intake does not stall on a bad peer")
			ht.settle()
			assert.EqualValues(t, 200, a.p.bufferedTraces(), "what the peer did not take is back in A's buffer")
			assert.Positive(t, a.metric("otelcol_processor_budget_tail_sampling_handoff_failed_spans", attribute.String("cause", "send")))
			ht.advance(11 * time.Second)
			where := ht.where()
			assert.Len(t, where, 200, "every trace decided and kept at A")
			for _, at := range where {
				assert.Equal(t, 6, at["127.0.0.2"])
			}
		})
	}
}

// A handoff whose metadata is missing or unreadable loses nothing: its
// spans are processed as if they had just arrived, and counted.
func TestMalformedHandoffIsProcessedAsFreshSpans(t *testing.T) {
	ht := newHandoffTier(t, []string{"127.0.0.2"}, nil)
	a := ht.samplers["127.0.0.2"]
	ht.resolve("127.0.0.2")
	td := oneSpan("svc", pcommon.TraceID{9, 9, 9}, 1, 0, ht.now(), time.Millisecond)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(handoff.Attribute, "not bytes")
	a.p.receive(context.Background(), td, "127.0.0.9:4317")
	assert.EqualValues(t, 1, a.p.bufferedTraces())
	assert.EqualValues(t, 1, a.metric("otelcol_processor_budget_tail_sampling_handoff_failed_spans", attribute.String("cause", "malformed")))
	ht.advance(3 * time.Second)
	kept := a.keptSpans()
	require.Len(t, kept, 1)
	for _, spans := range kept {
		_, leaked := spans[0].Attributes().Get(handoff.Attribute)
		assert.False(t, leaked)
	}
	assert.Equal(t, 0, a.sink.AllTraces()[0].ResourceSpans().At(0).Resource().Attributes().Len()-1, "only service.name is left on the resource")
}

// assertWhole: n traces kept, each whole (6 spans) at one sampler.
func assertWhole(t *testing.T, where map[pcommon.TraceID]map[string]int, n int) {
	t.Helper()
	split, partial := 0, 0
	for _, at := range where {
		if len(at) > 1 {
			split++
		}
		total := 0
		for _, k := range at {
			total += k
		}
		if total != 6 {
			partial++
		}
	}
	assert.Equal(t, n, len(where), "traces kept")
	assert.Zero(t, split, "traces kept by two samplers")
	assert.Zero(t, partial, "traces not whole")
}

// Two samplers whose views of the ring disagree pass an expired trace back
// and forth at most handoff.MaxHops times; then it is decided, once, whole.
func TestDisagreeingViewsDoNotPassATraceForever(t *testing.T) {
	ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, nil)
	a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
	both := ring.New([]string{"127.0.0.2:4317", "127.0.0.3:4317"})
	var id pcommon.TraceID
	for i := uint64(1); ; i++ {
		id = traceIDWithRandomness(i, 0.5)
		if both.Owner(id) == "127.0.0.3:4317" {
			break
		}
	}
	a.p.handoff.UseRing(both)                                 // A: B owns it
	b.p.handoff.UseRing(ring.New([]string{"127.0.0.2:4317"})) // B: A owns it
	// A holds the trace (its owner was unreachable when it came, say).
	f := fragmentOf(a, oneSpan("svc", id, 1, 0, ht.now(), time.Millisecond))
	a.p.ingest(a.p.shardOf(id), f, spanmem.Chunk{Data: f.Encoded}, arrivedNow(ht.now()), &forward.Kept{})
	for range 3 * handoff.MaxHops {
		ht.advance(11 * time.Second)
		ht.settle()
	}
	where := ht.where()
	require.Len(t, where, 1)
	assert.Len(t, where[id], 1, "decided by one sampler")
	assert.Zero(t, a.p.bufferedTraces()+b.p.bufferedTraces())
	passed := a.metric("otelcol_processor_budget_tail_sampling_handoff_traces", attributeDirection("sent")) +
		b.metric("otelcol_processor_budget_tail_sampling_handoff_traces", attributeDirection("sent"))
	assert.EqualValues(t, handoff.MaxHops, passed, "passed on handoff.MaxHops times, then decided")
}

// fragmentOf splits a one-trace request as intake does.
func fragmentOf(ts *testSampler, td ptrace.Traces) *split.Fragment {
	req, err := ts.p.splitRequest(td)
	if err != nil || len(req.Frags) != 1 {
		panic(fmt.Sprint("not one fragment: ", err))
	}
	f := req.Frags[0]
	ts.p.encode(req, &f, nil, new([]byte))
	req.Release()
	return &f
}

// A gateway that retries a request after one of its samplers failed
// re-sends the parts other samplers already took: each is dropped once seen.
func TestFragmentDeliveredTwiceIsKeptOnce(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	ts.p.adj.Pin(policy.KeepAll(0))
	g := workload.NewGenerator(workload.Options{Services: 2, SpansPerTrace: 8, Seed: 5, Start: ts.now})
	td := ptrace.NewTraces()
	g.Next(td)
	parts := workload.Interleave(td, 3)
	for _, i := range []int{0, 1, 0, 2, 1} {
		c := ptrace.NewTraces()
		parts[i].CopyTo(c)
		ts.send(c)
	}
	ts.advance(11 * time.Second)
	// After the decision too: a retry that comes late is not followed twice.
	for _, i := range []int{2, 1} {
		c := ptrace.NewTraces()
		parts[i].CopyTo(c)
		ts.send(c)
	}
	for _, spans := range ts.keptSpans() {
		assert.Len(t, spans, 8, "every span once")
	}
	assert.EqualValues(t, parts[0].SpanCount()+2*parts[1].SpanCount()+parts[2].SpanCount(),
		ts.metric("otelcol_processor_budget_tail_sampling_invalid_spans", attribute.String("cause", "duplicate")))
}

// A decision that reaches a sampler holding part of the trace takes that
// part back to the sampler that decided: the whole trace leaves from one.
func TestAdoptedDecisionTakesTheHeldPartBackToTheDecider(t *testing.T) {
	forEachCompression(t, func(t *testing.T, tune func(*Config)) {
		ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, tune)
		a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
		both := ring.New([]string{"127.0.0.2:4317", "127.0.0.3:4317"})
		var ids []pcommon.TraceID
		for i := uint64(1); len(ids) < 20; i++ {
			if id := traceIDWithRandomness(i, 0.5); both.Owner(id) == "127.0.0.3:4317" {
				ids = append(ids, id)
			}
		}
		ht.resolve("127.0.0.2")
		b.p.handoff.UseRing(both) // B already sees the new ring, A not yet
		for _, id := range ids {
			require.NoError(t, a.p.ConsumeTraces(context.Background(), oneSpan("svc", id, 1, 0, ht.now(), time.Millisecond)))
			require.NoError(t, b.p.ConsumeTraces(context.Background(), oneSpan("svc", id, 2, 1, ht.now(), time.Millisecond)))
		}
		ht.advance(3 * time.Second) // A decides on what it has; B waits (no root)
		require.Len(t, a.keptSpans(), len(ids))
		require.EqualValues(t, len(ids), b.p.bufferedTraces())
		ht.dns.set("127.0.0.2", "127.0.0.3")
		a.p.refreshPeers() // A learns: its decisions travel to B
		ht.settle()
		assert.Zero(t, b.p.bufferedTraces(), "B follows A's decisions")
		assert.Empty(t, b.keptSpans(), "and gives its parts back to A")
		for _, id := range ids {
			assert.Len(t, a.keptSpans()[id], 2, "trace whole at A")
		}
	})
}

// Two samplers whose rule slots differ — one has run since before a rule
// was added ahead of the others, one started with the new file — hand a
// drop rule's decisions over: the late errors of the dropped traces are
// dropped at the new owner too, though its slot of that index is a keep
// rule (a decision travels as "a drop rule's", not as a slot).
func TestReloadRuleSlotsDifferAcrossAHandoff(t *testing.T) {
	health := RuleConfig{Name: "health", Action: "drop", Conditions: []string{`name == "/healthz"`}}
	vip := RuleConfig{Name: "vip", Action: "keep", Conditions: []string{`resource.attributes["customer.tier"] == "gold"`}}
	ht := newHandoffTier(t, nil, nil)
	a := ht.start("127.0.0.2", func(c *Config) { c.Handoff.Window = 20 * time.Second; c.Rules = []RuleConfig{health} })
	b := ht.start("127.0.0.3", func(c *Config) { c.Handoff.Window = 20 * time.Second; c.Rules = []RuleConfig{vip, health} })
	ht.resolve("127.0.0.2")
	var ids []pcommon.TraceID
	for i := range 100 {
		id := traceIDWithRandomness(uint64(i+1), 0.5)
		ids = append(ids, id)
		td := oneSpan("svc", id, 1, 0, ht.now(), time.Millisecond)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName("/healthz")
		require.NoError(t, a.p.ConsumeTraces(context.Background(), td))
	}
	ht.advance(3 * time.Second)
	require.Empty(t, a.keptSpans(), "dropped by health at A")

	joinAndSendLate(t, ht, b, ids, func(id pcommon.TraceID) ptrace.Traces {
		late := oneSpan("db", id, 2, 1, ht.now(), time.Millisecond)
		late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
		return late
	})
	assert.Zero(t, b.p.bufferedTraces(), "late errors follow A's decision")
	assert.Empty(t, b.keptSpans(), "a drop rule drops late errors, at the new owner too")
}
