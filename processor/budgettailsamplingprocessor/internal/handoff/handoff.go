package handoff // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// Sampler is what handoff needs of the sampler it serves.
type Sampler interface {
	// Receive merges what a peer handed over into the buffer; from is the
	// peer's ring endpoint, "" for what this sampler's own sends gave back.
	Receive(ctx context.Context, td ptrace.Traces, from string)
	// Rebalance offers every buffered trace this sampler no longer owns, and
	// the recent decisions whose traces moved, to their owners (Send).
	Rebalance()
}

// The gateways route by trace ID on a hash ring of the samplers; when the
// samplers change, the ring does, and a trace in flight is cut in two. With
// handoff each sampler computes the gateways' ring from the same DNS name
// and keeps only the traces it owns:
//   - on a ring change it sends the buffered traces it no longer owns, and
//     the decisions of the last window, to their owners (rebalance);
//   - a fragment of a trace it does not own, from a gateway still on the
//     old ring, goes on to the owner (proxy), unless this sampler already
//     decided that trace: its late spans follow the decision here;
//   - on shutdown it leaves the ring and hands everything over.
//
// What cannot be sent (peer unreachable, queue full) stays and is decided
// here, as without handoff. Peers speak OTLP/gRPC to each other's handoff
// server; record.go is what rides along.
//
// The processor owns the client and server rather than an exporter in
// another pipeline: it has to know, per trace, whether the peer took it
// (else it keeps and decides it), and an exporter reports nothing back.
//
// Handoff owns the ring view, the peers' senders and the server. What moves
// and when is the Sampler's: this package knows no buffer.
type Handoff struct {
	s      Sampler
	now    func() time.Time
	logger *zap.Logger
	cfg    *Config
	set    component.TelemetrySettings
	self   string // this sampler's ring endpoint
	port   string // where peers' handoff servers listen

	ring    atomic.Pointer[ring.Ring]
	leaving atomic.Bool

	mu     sync.Mutex
	peers  map[string]*peer // by ring endpoint
	exts   map[component.ID]component.Component
	server *grpc.Server
	served chan struct{}
	wg     sync.WaitGroup // peers' senders
	// pending counts items queued or being sent to peers.
	pending atomic.Int64

	stats handoffStats
}

// Stats counts one direction of handoff traffic.

type handoffStats struct {
	sent, received flowStats
	proxiedSpans   atomic.Int64
	failedSpans    [numHandoffFailures]atomic.Int64
	ringChanges    atomic.Int64
}

type flowStats struct {
	traces, spans, decisions atomic.Int64
}

func (f *flowStats) count(kind Kind, spans int) {
	switch kind {
	case KindTrace:
		f.traces.Add(1)
	case KindDecision:
		f.decisions.Add(1)
	}
	f.spans.Add(int64(spans))
}

// Why spans meant for a peer stayed here.
const (
	failureSend      = iota // the peer refused or did not answer within the retries
	failureQueueFull        // the peer's queue was full
	failurePeerDown         // the peer failed a send moments ago
	failureMalformed        // a received handoff carried unreadable metadata (processed as fresh spans)
	numHandoffFailures
)

var handoffFailureNames = [numHandoffFailures]string{"send", "queue_full", "peer_down", "malformed"}

// New returns the handoff of sampler s, which reads time from now.
func New(cfg *Config, set component.TelemetrySettings, now func() time.Time, s Sampler) (*Handoff, error) {
	port, err := cfg.ServerPort()
	if err != nil {
		return nil, err
	}
	return &Handoff{
		s:      s,
		now:    now,
		logger: set.Logger,
		cfg:    cfg,
		set:    set,
		self:   ring.Endpoint(net.ParseIP(cfg.SelfAddress), cfg.RingPort),
		port:   port,
		peers:  map[string]*peer{},
	}, nil
}

// Pending is how many items are queued or being sent to peers.
func (h *Handoff) Pending() int64 { return h.pending.Load() }

// UseRing sets this sampler's view of the ring without moving anything:
// for tests of samplers whose views disagree.
func (h *Handoff) UseRing(r *ring.Ring) { h.ring.Store(r) }

// Window is how long recent decisions travel to a trace's new owner.
func (h *Handoff) Window() time.Duration { return h.cfg.Window }

// CountProxied counts spans of a fragment passed on to its owner.
func (h *Handoff) CountProxied(spans int) { h.stats.proxiedSpans.Add(int64(spans)) }

// CountMalformed counts spans received with unreadable handoff metadata.
func (h *Handoff) CountMalformed(spans int) { h.stats.failedSpans[failureMalformed].Add(int64(spans)) }

// CountReceived counts a peer's handoff: its records and spans.
func (h *Handoff) CountReceived(records map[pcommon.TraceID]Record, td ptrace.Traces) {
	for _, rec := range records {
		h.stats.received.count(rec.Kind, 0)
	}
	h.stats.received.spans.Add(int64(td.SpanCount()))
}

// OwnerOf is the sampler the ring gives the trace to, and whether that is
// this one. An empty ring (nothing resolved yet) leaves every trace here.
func (h *Handoff) OwnerOf(id pcommon.TraceID) (string, bool) {
	r := h.ring.Load()
	if r.Size() == 0 {
		return "", true
	}
	owner := r.Owner(id)
	return owner, owner == h.self
}

// SetMembers takes the addresses peers_dns resolved to; a new ring moves
// what this sampler no longer owns.
func (h *Handoff) SetMembers(ips []net.IP) {
	if h.leaving.Load() {
		return
	}
	r := ringOf(ips, h.cfg.RingPort)
	old := h.ring.Swap(r)
	switch {
	case old == nil:
	case !old.Equal(r):
		h.stats.ringChanges.Add(1)
		h.logger.Info("sampler ring changed; handing over the traces other samplers now own",
			zap.Strings("members", r.Endpoints()), zap.Bool("member", r.Has(h.self)))
		h.s.Rebalance()
		h.retirePeers(r)
	}
}

// MaxHops is how many times an expired trace is passed on; then it is
// decided where it is. Two samplers whose views of the ring differ would
// otherwise pass it back and forth until their views agree.
const MaxHops = 4

// Send queues an item for a peer; false when its queue is full or the peer
// failed a moment ago (the item stays here).
func (h *Handoff) Send(endpoint string, it Item) bool {
	h.mu.Lock()
	pr := h.peers[endpoint]
	if pr == nil || pr.retired {
		pr = h.newPeer(endpoint)
		h.peers[endpoint] = pr
	}
	h.mu.Unlock()
	cause := pr.enqueue(it)
	if cause < 0 {
		return true
	}
	h.stats.failedSpans[cause].Add(int64(it.Spans))
	return false
}

// retirePeers lets the senders of samplers no longer in the ring finish
// their queue and close.
func (h *Handoff) retirePeers(r *ring.Ring) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ep, pr := range h.peers {
		if !r.Has(ep) {
			pr.retire()
			delete(h.peers, ep)
		}
	}
}

// Start opens the handoff server.
func (h *Handoff) Start(ctx context.Context, host component.Host) error {
	h.exts = host.GetExtensions()
	srv, err := h.cfg.Server.ToServer(ctx, h.exts, h.set)
	if err != nil {
		return err
	}
	ln, err := h.cfg.Server.NetAddr.Listen(ctx)
	if err != nil {
		return err
	}
	registerServer(srv, h)
	h.server, h.served = srv, make(chan struct{})
	go func() {
		defer close(h.served)
		if err := srv.Serve(ln); err != nil {
			h.logger.Error("handoff server stopped", zap.Error(err))
		}
	}()
	return nil
}

// Leave stops taking handoffs, leaves the ring and hands the buffer to the
// samplers that stay, within shutdown_timeout. Whatever could not be sent
// is back in the buffer when it returns.
func (h *Handoff) Leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ShutdownTimeout)
	defer cancel()
	h.stopServer(ctx)
	h.leaving.Store(true)
	r := h.ring.Load()
	if r.Size() > 0 {
		h.ring.Store(r.Without(h.self))
	}
	if h.ring.Load().Size() > 0 {
		h.s.Rebalance()
	}
	h.mu.Lock()
	for _, pr := range h.peers {
		pr.retire()
	}
	h.mu.Unlock()
	waitOrCut(ctx, h.wg.Wait, func() {
		// Out of time: senders give up, and what they held comes back here.
		h.mu.Lock()
		for _, pr := range h.peers {
			pr.abort()
		}
		h.mu.Unlock()
	})
}

// waitOrCut runs wait; if ctx ends first it calls cut, which must make
// wait return, and waits for it.
func waitOrCut(ctx context.Context, wait, cut func()) {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		cut()
		<-done
	}
}

func (h *Handoff) stopServer(ctx context.Context) {
	if h.server == nil {
		return
	}
	waitOrCut(ctx, h.server.GracefulStop, h.server.Stop)
	<-h.served
}

// Observe reports handoff's metrics.
func (h *Handoff) Observe(t *metadata.Telemetry, o metric.Observer) {
	sent := metric.WithAttributeSet(attribute.NewSet(attribute.String("direction", "sent")))
	received := metric.WithAttributeSet(attribute.NewSet(attribute.String("direction", "received")))
	st := &h.stats
	for _, f := range []struct {
		stats *flowStats
		attrs metric.MeasurementOption
	}{{&st.sent, sent}, {&st.received, received}} {
		o.ObserveInt64(t.HandoffTraces, f.stats.traces.Load(), f.attrs)
		o.ObserveInt64(t.HandoffSpans, f.stats.spans.Load(), f.attrs)
		o.ObserveInt64(t.HandoffDecisions, f.stats.decisions.Load(), f.attrs)
	}
	o.ObserveInt64(t.HandoffProxied, st.proxiedSpans.Load())
	for i := range st.failedSpans {
		o.ObserveInt64(t.HandoffFailed, st.failedSpans[i].Load(),
			metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", handoffFailureNames[i]))))
	}
	o.ObserveInt64(t.RingMembers, int64(h.ring.Load().Size()))
	o.ObserveInt64(t.RingChanges, st.ringChanges.Load())
}
