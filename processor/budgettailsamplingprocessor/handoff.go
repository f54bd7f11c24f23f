package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

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
// server; handoffwire.go is what rides along.
//
// The processor owns the client and server rather than an exporter in
// another pipeline: it has to know, per trace, whether the peer took it
// (else it keeps and decides it), and an exporter reports nothing back.
type handoff struct {
	p    *budgetTailSampler
	cfg  *HandoffConfig
	set  component.TelemetrySettings
	self string // this sampler's ring endpoint
	port string // where peers' handoff servers listen

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

type handoffStats struct {
	sent, received flowStats
	proxiedSpans   atomic.Int64
	failedSpans    [numHandoffFailures]atomic.Int64
	ringChanges    atomic.Int64
}

// flowStats count one direction of handoff traffic.
type flowStats struct {
	traces, spans, decisions atomic.Int64
}

func (f *flowStats) count(kind recordKind, spans int) {
	switch kind {
	case recordTrace:
		f.traces.Add(1)
	case recordDecision:
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

func newHandoff(p *budgetTailSampler, set component.TelemetrySettings) (*handoff, error) {
	port, err := p.cfg.Handoff.serverPort()
	if err != nil {
		return nil, err
	}
	return &handoff{
		p:     p,
		cfg:   &p.cfg.Handoff,
		set:   set,
		self:  ring.Endpoint(net.ParseIP(p.cfg.Handoff.SelfAddress), p.cfg.Handoff.RingPort),
		port:  port,
		peers: map[string]*peer{},
	}, nil
}

// ownerOf is the sampler the ring gives the trace to, and whether that is
// this one. An empty ring (nothing resolved yet) leaves every trace here.
func (h *handoff) ownerOf(id pcommon.TraceID) (string, bool) {
	r := h.ring.Load()
	if r.Size() == 0 {
		return "", true
	}
	owner := r.Owner(id)
	return owner, owner == h.self
}

// setMembers takes the addresses peers_dns resolved to; a new ring moves
// what this sampler no longer owns.
func (h *handoff) setMembers(ips []net.IP) {
	if h.leaving.Load() {
		return
	}
	r := ringOf(ips, h.cfg.RingPort)
	old := h.ring.Swap(r)
	switch {
	case old == nil:
	case !old.Equal(r):
		h.stats.ringChanges.Add(1)
		h.p.logger.Info("sampler ring changed; handing over the traces other samplers now own",
			zap.Strings("members", r.Endpoints()), zap.Bool("member", r.Has(h.self)))
		h.rebalance()
		h.retirePeers(r)
	}
}

// rebalance sends every buffered trace this sampler does not own to its
// owner, and the decisions of the last window whose traces moved. A trace whose owner cannot take it now stays; it is offered again
// when its wait is over (decideOrPassOn).
//
// Nothing else moves traces between samplers: a sampler holding a trace it
// does not own, because a peer with another view of the ring sent it, keeps
// it until its own view changes or the trace's wait is over — sending it
// back at once would bounce it while the views differ.
func (h *handoff) rebalance() {
	now := h.p.now()
	cutoff := now.Add(-h.cfg.Window).UnixNano()
	for _, sh := range h.p.shards {
		sh.mu.Lock()
		sh.each(func(t *trace) { h.passOn(sh, t, false) })
		for _, which := range []decision{sampled, notSampled} {
			sh.recentDecisions(which, func(id pcommon.TraceID, d decided) bool {
				if d.at < cutoff {
					return false
				}
				if owner, mine := h.ownerOf(id); !mine {
					h.send(owner, handoffItem{kind: recordDecision, id: id, decision: d, sampled: which == sampled})
				}
				return true
			})
		}
		sh.mu.Unlock()
	}
}

// An expired trace is passed on at most this many times; then it is decided
// where it is. Two samplers whose views of the ring differ would otherwise
// pass it back and forth until their views agree.
const maxHops = 4

// passOn sends a buffered trace to its owner when that is another sampler
// and takes it out of the buffer; false: it stays here. expired: its wait
// is over, and this is a hop. Called with sh.mu held.
func (h *handoff) passOn(sh *shard, t *trace, expired bool) bool {
	owner, mine := h.ownerOf(t.id)
	if mine || (expired && t.hops >= maxHops) {
		return false
	}
	it := handoffItem{kind: recordTrace, id: t.id, chunks: h.p.encodedChunks(sh.held(t).chunks), arrived: h.p.timeAt(t.arrived), spans: t.spans, hops: t.hops}
	if expired {
		it.hops++
	}
	if t.hasRoot {
		it.rootArrived = h.p.timeAt(t.rootArrived)
	}
	if !h.send(owner, it) {
		return false
	}
	sh.remove(t)
	sh.forget(t.id)
	sh.release(t)
	return true
}

// proxy sends a fragment of a trace this sampler does not own, and has not
// decided, to its owner; false: it stays here.
func (h *handoff) proxy(sh *shard, id pcommon.TraceID, f *fragment, now time.Time) bool {
	owner, mine := h.ownerOf(id)
	if mine {
		return false
	}
	sh.mu.Lock()
	k, ok := sh.lookup(id)
	sh.mu.Unlock()
	if ok && k.ref == 0 { // decided here: its late spans follow the decision here
		return false
	}
	if !h.send(owner, handoffItem{kind: recordFragment, id: id, chunks: [][]byte{bytes.Clone(f.encoded)}, arrived: now, spans: f.spans}) {
		return false
	}
	h.stats.proxiedSpans.Add(int64(f.spans))
	return true
}

// send queues an item for a peer; false when its queue is full or the peer
// failed a moment ago (the item stays here).
func (h *handoff) send(endpoint string, it handoffItem) bool {
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
	h.stats.failedSpans[cause].Add(int64(it.spans))
	return false
}

// retirePeers lets the senders of samplers no longer in the ring finish
// their queue and close.
func (h *handoff) retirePeers(r *ring.Ring) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ep, pr := range h.peers {
		if !r.Has(ep) {
			pr.retire()
			delete(h.peers, ep)
		}
	}
}

// start opens the handoff server.
func (h *handoff) start(ctx context.Context, host component.Host) error {
	h.exts = host.GetExtensions()
	srv, err := h.cfg.Server.ToServer(ctx, h.exts, h.set)
	if err != nil {
		return err
	}
	ln, err := h.cfg.Server.NetAddr.Listen(ctx)
	if err != nil {
		return err
	}
	registerHandoffServer(srv, h)
	h.server, h.served = srv, make(chan struct{})
	go func() {
		defer close(h.served)
		if err := srv.Serve(ln); err != nil {
			h.p.logger.Error("handoff server stopped", zap.Error(err))
		}
	}()
	return nil
}

// leave stops taking handoffs, leaves the ring and hands the buffer to the
// samplers that stay, within shutdown_timeout. Whatever could not be sent
// is back in the buffer when it returns.
func (h *handoff) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ShutdownTimeout)
	defer cancel()
	h.stopServer(ctx)
	h.leaving.Store(true)
	r := h.ring.Load()
	if r.Size() > 0 {
		h.ring.Store(r.Without(h.self))
	}
	if h.ring.Load().Size() > 0 {
		h.rebalance()
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

func (h *handoff) stopServer(ctx context.Context) {
	if h.server == nil {
		return
	}
	waitOrCut(ctx, h.server.GracefulStop, h.server.Stop)
	<-h.served
}

func (h *handoff) observe(t *metadata.Telemetry, o metric.Observer) {
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
