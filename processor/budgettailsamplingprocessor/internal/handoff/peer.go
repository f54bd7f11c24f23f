package handoff // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// A request to a peer holds at most this many items.
const maxItemsPerRequest = 512

// A peer that failed is not offered new traces for this long: they stay
// and are decided here rather than wait out its retries.
const peerDownFor = 2 * time.Second

// peer is the sender to one other sampler: a bounded queue drained by one
// goroutine, which sends in batches with the configured timeout and retries
// and gives back what the peer would not take.
type peer struct {
	h        *Handoff
	endpoint string
	addr     string

	mu        sync.Mutex
	queue     []Item
	wake      chan struct{}
	retired   bool
	downUntil time.Time
	ctx       context.Context
	cancel    context.CancelFunc
}

func (h *Handoff) newPeer(endpoint string) *peer {
	ctx, cancel := context.WithCancel(context.Background())
	pr := &peer{
		h:        h,
		endpoint: endpoint,
		addr:     net.JoinHostPort(ring.Host(endpoint), h.port),
		wake:     make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
	}
	h.wg.Add(1)
	go pr.run()
	return pr
}

// enqueue queues an item, or says why it cannot (-1: queued).
func (pr *peer) enqueue(it Item) int {
	pr.mu.Lock()
	switch {
	case pr.retired || time.Now().Before(pr.downUntil):
		pr.mu.Unlock()
		return failurePeerDown
	case len(pr.queue) >= pr.h.cfg.QueueSize:
		pr.mu.Unlock()
		return failureQueueFull
	}
	pr.queue = append(pr.queue, it)
	pr.h.pending.Add(1)
	pr.mu.Unlock()
	select {
	case pr.wake <- struct{}{}:
	default:
	}
	return -1
}

// retire: send what is queued, then stop.
func (pr *peer) retire() {
	pr.mu.Lock()
	pr.retired = true
	pr.mu.Unlock()
	select {
	case pr.wake <- struct{}{}:
	default:
	}
}

// abort gives up sending: queued items come back to this sampler.
func (pr *peer) abort() {
	pr.retire()
	pr.cancel()
}

func (pr *peer) take() ([]Item, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	n := min(len(pr.queue), maxItemsPerRequest)
	batch := pr.queue[:n:n]
	pr.queue = pr.queue[n:]
	if len(pr.queue) == 0 {
		pr.queue = nil
	}
	return batch, pr.retired && n == 0
}

func (pr *peer) run() {
	defer pr.h.wg.Done()
	defer pr.cancel()
	var conn *grpc.ClientConn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		batch, done := pr.take()
		if done {
			return
		}
		if len(batch) == 0 {
			<-pr.wake
			continue
		}
		if conn == nil {
			var err error
			if conn, err = pr.dial(); err != nil {
				pr.h.logger.Warn("cannot connect to handoff peer", zap.String("peer", pr.addr), zap.Error(err))
			}
		}
		pr.deliver(conn, batch)
		pr.h.pending.Add(-int64(len(batch)))
	}
}

func (pr *peer) dial() (*grpc.ClientConn, error) {
	cc := pr.h.cfg.Client
	cc.Endpoint = pr.addr
	// Connect from self_address: the receiver knows the sender by it (a
	// decision's sender gets the trace's other parts back).
	local := &net.TCPAddr{IP: net.ParseIP(pr.h.cfg.SelfAddress)}
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: local}
		return d.DialContext(ctx, "tcp", addr)
	}
	return cc.ToClientConn(pr.ctx, pr.h.exts, pr.h.set, configgrpc.WithGrpcDialOption(grpc.WithContextDialer(dialer)))
}

// deliver sends a batch, retrying per retry_on_failure; on failure the
// batch is taken back into this sampler's buffer.
func (pr *peer) deliver(conn *grpc.ClientConn, batch []Item) {
	h := pr.h
	td := ptrace.NewTraces()
	var u ptrace.ProtoUnmarshaler
	for i := range batch {
		if err := batch[i].encode(td, h.now(), &u); err != nil {
			h.logger.Error("cannot decode a buffered fragment for handoff", zap.Error(err))
		}
	}
	err := errors.New("no connection")
	if conn != nil {
		err = pr.export(ptraceotlp.NewGRPCClient(conn), td)
	}
	if err == nil {
		for _, it := range batch {
			h.stats.sent.count(it.Kind, it.Spans)
		}
		settle(batch)
		return
	}
	pr.mu.Lock()
	pr.downUntil = time.Now().Add(peerDownFor)
	pr.mu.Unlock()
	spans := td.SpanCount()
	h.stats.failedSpans[failureSend].Add(int64(spans))
	h.logger.Warn("handoff to peer failed; deciding its traces here", zap.String("peer", pr.addr), zap.Int("spans", spans), zap.Error(err))
	h.s.Receive(context.Background(), td, "")
	settle(batch)
}

// settle tells each item's owner that it is delivered or taken back.
func settle(batch []Item) {
	for _, it := range batch {
		if it.Settled != nil {
			it.Settled()
		}
	}
}

func (pr *peer) export(client ptraceotlp.GRPCClient, td ptrace.Traces) error {
	cfg := pr.h.cfg
	req := ptraceotlp.NewExportRequestFromTraces(td)
	attempt := func() (struct{}, error) {
		ctx, cancel := context.WithTimeout(pr.ctx, cfg.Timeout)
		defer cancel()
		_, err := client.Export(ctx, req)
		if err != nil && !retryable(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}
	if !cfg.RetryOnFailure.Enabled {
		_, err := attempt()
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = cfg.RetryOnFailure.InitialInterval
	b.MaxInterval = cfg.RetryOnFailure.MaxInterval
	b.Multiplier = cfg.RetryOnFailure.Multiplier
	b.RandomizationFactor = cfg.RetryOnFailure.RandomizationFactor
	_, err := backoff.Retry(pr.ctx, attempt, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(cfg.RetryOnFailure.MaxElapsedTime))
	return err
}

// retryable: what OTLP says a client may retry.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange,
		codes.Unavailable, codes.DataLoss, codes.ResourceExhausted:
		return true
	}
	return false
}

// server takes peers' handoffs.
type server struct {
	ptraceotlp.UnimplementedGRPCServer
	h *Handoff
}

func registerServer(srv *grpc.Server, h *Handoff) {
	ptraceotlp.RegisterGRPCServer(srv, &server{h: h})
}

func (s *server) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	if s.h.leaving.Load() {
		return ptraceotlp.NewExportResponse(), status.Error(codes.Unavailable, "sampler is leaving the ring")
	}
	s.h.s.Receive(ctx, req.Traces(), s.h.senderEndpoint(ctx))
	return ptraceotlp.NewExportResponse(), nil
}

// senderEndpoint is the ring endpoint of the peer that sent this request:
// its address with the ring port (peers connect from the address the ring
// knows them by).
func (h *Handoff) senderEndpoint(ctx context.Context) string {
	pr, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return ""
	}
	ap, err := netip.ParseAddrPort(pr.Addr.String())
	if err != nil {
		return ""
	}
	return ring.Endpoint(net.IP(ap.Addr().Unmap().AsSlice()), h.cfg.RingPort)
}
