package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/otelcol-cost/otelcol-cost/internal/traceroute"
	"github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver/internal/metadata"
)

// maxPending caps the queue of answered requests; past it (a huge
// max_inflight_bytes of tiny requests) a handler waits for room.
const maxPending = 1 << 16

// handOnQueue bounds the decoded parts waiting for the pipeline.
const handOnQueue = 64

// routerReceiver serves OTLP/gRPC trace export, routing each request's
// encoding through the trace_router exporter's router.
type routerReceiver struct {
	cfg    *Config
	set    receiver.Settings
	next   consumer.Traces
	tel    *metadata.Telemetry
	obsrep *receiverhelper.ObsReport
	// inflight is the bytes held (requests and their indexes, parts,
	// decoded give-backs); admission keeps it within max_inflight_bytes.
	inflight atomic.Int64

	router   traceroute.Router
	server   *grpc.Server
	served   sync.WaitGroup
	handlers gate
	// pending holds the requests answered and not yet in a round;
	// admission (max_inflight_bytes) bounds how many, within its capacity.
	pending chan taken
	// rounds carries the batches of requests (batch) to the encoders.
	rounds       chan []taken
	encodersDone sync.WaitGroup
	senders      *senders
	handOns      chan handOnJob
	handOnDone   sync.WaitGroup
	// stop ends hand-on retries at shutdown.
	stop     chan struct{}
	stopOnce sync.Once

	causes [numCauses]metric.MeasurementOption
}

// Why spans go to the pipeline, or a request is refused.
const (
	causeSendFailed = iota
	causeHeldOff
	causeQueueFull
	causeNotIndexed
	causeNoRoute
	causeInflight
	causeMalformed
	causeTooLarge
	causeEmpty
	numCauses
)

var causeNames = [numCauses]string{"send_failed", "held_off", "queue_full", "not_indexed", "no_route", "inflight", "malformed", "too_large", "empty"}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Traces) (*routerReceiver, error) {
	tel, err := metadata.NewTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	obsrep, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "grpc", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	r := &routerReceiver{cfg: cfg, set: set, next: next, tel: tel, obsrep: obsrep,
		pending: make(chan taken, min(cfg.MaxInflightBytes/requestOverhead+1, maxPending)), rounds: make(chan []taken),
		handOns: make(chan handOnJob, handOnQueue), stop: make(chan struct{})}
	r.senders = newSenders(r)
	for i, name := range causeNames {
		r.causes[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", name)))
	}
	return r, nil
}

// Start finds the exporter (started before any receiver) and serves.
func (r *routerReceiver) Start(ctx context.Context, host component.Host) error {
	router, err := traceroute.Lookup(r.cfg.Exporter)
	if err != nil {
		return err
	}
	r.router = router
	go r.batch()
	for range r.cfg.NumWorkers {
		r.encodersDone.Add(1)
		go r.encode()
		r.handOnDone.Add(1)
		go r.handOnLoop()
	}
	g := r.cfg.Protocols.GRPC
	r.server, err = g.ToServer(ctx, host.GetExtensions(), r.set.TelemetrySettings,
		configgrpc.WithGrpcServerOption(grpc.ForceServerCodec(rawCodec{})))
	if err != nil {
		return err
	}
	r.server.RegisterService(&traceServiceDesc, r)
	ln, err := g.NetAddr.Listen(ctx)
	if err != nil {
		return err
	}
	r.set.Logger.Info("Starting GRPC server; routing requests by trace ID before decoding them",
		zap.String("endpoint", ln.Addr().String()), zap.String("exporter", r.cfg.Exporter.String()))
	r.served.Add(1)
	go func() {
		defer r.served.Done()
		if err := r.server.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	return nil
}

// Shutdown stops taking requests (new ones are refused as Unavailable),
// then waits, within ctx, until every request it took is sent or handed
// to the pipeline (which, with the exporter, shuts down after the
// receivers). When ctx ends first, the server is stopped hard and
// hand-ons the pipeline still refuses are dropped, counted and logged.
func (r *routerReceiver) Shutdown(ctx context.Context) error {
	if !r.handlers.close() {
		return nil // never started, or already shut down
	}
	giveUp := func() { r.stopOnce.Do(func() { close(r.stop) }) }
	if r.server != nil {
		stopped := make(chan struct{})
		go func() {
			r.server.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
			r.server.Stop()
			giveUp()
		}
	}
	r.served.Wait()
	done := make(chan struct{})
	go func() {
		// Handlers that passed the gate are done before pending closes.
		r.handlers.wait()
		close(r.pending)
		r.encodersDone.Wait()
		r.senders.close()
		close(r.handOns)
		r.handOnDone.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// Hand-ons give up now, counted; sends end within their timeout.
		// A handler still held by the pipeline is not waited for.
		giveUp()
		return fmt.Errorf("trace_router: shutdown's time ran out before every request taken was sent or handed on: %w", ctx.Err())
	}
}

// gate counts the handlers in export, and lets none in once closed.
type gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	zero   *sync.Cond
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *gate) exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.zero != nil {
		g.zero.Broadcast()
	}
}

// close shuts the gate; false if it was already shut.
func (g *gate) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	return true
}

func (g *gate) wait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.zero == nil {
		g.zero = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.zero.Wait()
	}
}
