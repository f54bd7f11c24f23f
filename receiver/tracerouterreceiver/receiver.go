package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"errors"
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

// routerReceiver serves OTLP/gRPC trace export, routing each request's
// encoding through the trace_router exporter's router.
type routerReceiver struct {
	cfg    *Config
	set    receiver.Settings
	next   consumer.Traces
	tel    *metadata.Telemetry
	obsrep *receiverhelper.ObsReport
	// inflight is the bytes of requests held while routed, at most
	// cfg.MaxInflightBytes.
	inflight atomic.Int64

	router traceroute.Router
	server *grpc.Server
	served sync.WaitGroup
	// pending holds the requests answered and not yet sent; admission
	// (max_inflight_bytes) bounds how many, within its capacity.
	pending chan taken
	// rounds carries the batches of requests (batch) to the workers.
	rounds      chan []taken
	workersDone sync.WaitGroup
	// stop ends hand-on retries at shutdown.
	stop     chan struct{}
	stopping atomic.Bool

	causes [numCauses]metric.MeasurementOption
}

// Why spans go to the pipeline, or a request is refused.
const (
	causeSendFailed = iota
	causeNotIndexed
	causeNoRoute
	causeInflight
	causeMalformed
	numCauses
)

var causeNames = [numCauses]string{"send_failed", "not_indexed", "no_route", "inflight", "malformed"}

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
		stop: make(chan struct{})}
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
		r.workersDone.Add(1)
		go r.work()
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

// Shutdown stops taking requests, then waits until every request taken
// is sent or handed to the pipeline (which, with the exporter, shuts down
// after the receivers); a hand-on the pipeline still refuses is dropped,
// counted and logged.
func (r *routerReceiver) Shutdown(context.Context) error {
	if r.server != nil {
		r.server.GracefulStop()
	}
	r.served.Wait()
	if r.stopping.CompareAndSwap(false, true) {
		close(r.stop)
		close(r.pending) // no handler is left to add to it
	}
	r.workersDone.Wait()
	return nil
}
