package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-cost/otelcol-cost/internal/traceroute"
)

// traceServiceDesc is OTLP's TraceService with its one method, served on
// raw bytes: the request's encoding is what the router splits.
var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: exportHandler}},
	Metadata:    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

func exportHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	var req []byte
	if err := dec(&req); err != nil {
		return nil, err
	}
	r := srv.(*routerReceiver)
	if interceptor == nil {
		return r.export(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: exportMethod}
	return interceptor(ctx, &req, info, func(ctx context.Context, req any) (any, error) {
		return r.export(ctx, *req.(*[]byte))
	})
}

// rawCodec hands the request's bytes over as they arrived (gRPC has
// already decompressed them) and writes the response's bytes as given.
// Named "proto" so that the content type stays application/grpc.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, fmt.Errorf("trace_router: cannot encode %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("trace_router: cannot decode into %T", v)
	}
	*b = data // gRPC's V1 codec bridge gives a copy that stays ours
	return nil
}

func (rawCodec) Name() string { return "proto" }

// requestOverhead is what a request costs besides its bytes while it
// waits for a worker (a goroutine's stack, its split), charged against
// max_inflight_bytes so that many tiny requests are bounded too.
const requestOverhead = 4096

// export takes one request. A request the router splits is answered as
// soon as it is split: its parts are sent in the background by one of
// num_workers (merged with other requests' parts, batch), its bytes held
// (and counted against max_inflight_bytes) until every part is sent or
// handed to the pipeline. Spans with a zero
// trace ID are reported rejected in the response's partial success. A
// request the router cannot split is decoded here and handed to the
// pipeline, whose answer is the client's, as with the otlp receiver.
func (r *routerReceiver) export(ctx context.Context, req []byte) (any, error) {
	held := int64(len(req)) + requestOverhead
	if r.inflight.Add(held) > r.cfg.MaxInflightBytes {
		r.inflight.Add(-held)
		r.tel.Refused.Add(ctx, 1, r.causes[causeInflight])
		return nil, status.Error(codes.Unavailable, "trace_router: max_inflight_bytes reached; retry later")
	}
	ctx = r.obsrep.StartTracesOp(ctx)
	sp, err := r.router.Split(req)
	if err != nil {
		defer r.inflight.Add(-held)
		return r.decodeAndConsume(ctx, req, err)
	}
	spans := sp.Spans()
	r.obsrep.EndTracesOp(ctx, "protobuf", spans, nil)
	resp := exportResponse(sp.Dropped())
	// The client's call ends now; its metadata stays with the parts.
	// Admission bounds how many wait, so the queue never blocks.
	r.pending <- taken{ctx: context.WithoutCancel(ctx), split: sp, spans: spans, held: held}
	return &resp, nil
}

// taken is a request answered and waiting for a worker.
type taken struct {
	ctx   context.Context
	split traceroute.Split
	spans int // split.Spans(), counted once when taken
	held  int64
}

// batch forms rounds from the requests taken: a round starts with the
// first request waiting and takes the ones after it until batch.min_size
// spans wait or batch.flush_timeout has passed since the first, at most
// batch.max_size spans. At shutdown (pending closed) the round being
// formed goes at once.
func (r *routerReceiver) batch() {
	defer close(r.rounds)
	b := r.cfg.Batch
	timer := time.NewTimer(b.FlushTimeout)
	timer.Stop()
	var carry *taken // taken, but over max_size for the round before
	for {
		var first taken
		if carry != nil {
			first, carry = *carry, nil
		} else {
			t, ok := <-r.pending
			if !ok {
				return
			}
			first = t
		}
		round := []taken{first}
		spans := first.spans
		timer.Reset(b.FlushTimeout)
		open := true
	fill:
		for spans < b.MinSize {
			select {
			case t, ok := <-r.pending:
				if !ok {
					open = false
					break fill
				}
				if spans+t.spans > b.MaxSize {
					carry = &t
					break fill
				}
				round = append(round, t)
				spans += t.spans
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		r.rounds <- round
		if !open {
			return
		}
	}
}

// work sends rounds: each sampler gets one request with its parts of
// every request in the round; what a sampler did not take goes to the
// pipeline.
func (r *routerReceiver) work() {
	defer r.workersDone.Done()
	splits := make([]traceroute.Split, 0, 64)
	for round := range r.rounds {
		splits = splits[:0]
		for _, t := range round {
			splits = append(splits, t.split)
		}
		ctx := round[0].ctx
		out := r.router.SendAll(ctx, splits)
		r.tel.Routed.Add(ctx, int64(out.Sent))
		if out.Failed != (ptrace.Traces{}) {
			r.handOn(ctx, out.Failed)
		}
		for _, t := range round {
			r.inflight.Add(-t.held)
		}
	}
}

// handOn gives spans a sampler did not take to the pipeline
// (memory_limiter, then the exporter's queue). While the pipeline refuses
// them (memory_limiter above its limit), it retries, their request's bytes
// still held, so that max_inflight_bytes fills and new requests are
// refused instead: what a client was told is taken is not dropped. It gives
// up, counted and logged, only on a permanent error or at shutdown.
func (r *routerReceiver) handOn(ctx context.Context, td ptrace.Traces) {
	n := int64(td.SpanCount())
	r.tel.ToPipeline.Add(ctx, n, r.causes[causeSendFailed])
	wait := 50 * time.Millisecond
	for {
		err := r.next.ConsumeTraces(ctx, td)
		if err == nil {
			return
		}
		if consumererror.IsPermanent(err) || r.stopping.Load() {
			r.tel.Lost.Add(ctx, n)
			r.set.Logger.Error("spans a sampler did not take were refused by the pipeline; dropped", zap.Int64("spans", n), zap.Error(err))
			return
		}
		select {
		case <-time.After(wait):
		case <-r.stop:
		}
		wait = min(2*wait, time.Second)
	}
}

// decodeAndConsume is the path of a request the router did not split
// (why: cause): decoded, as the otlp receiver would, and handed to the
// pipeline, whose error is the client's.
func (r *routerReceiver) decodeAndConsume(ctx context.Context, req []byte, cause error) (any, error) {
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(req)
	if err != nil {
		r.tel.Refused.Add(ctx, 1, r.causes[causeMalformed])
		r.obsrep.EndTracesOp(ctx, "protobuf", 0, consumererror.NewPermanent(err))
		return nil, status.Errorf(codes.InvalidArgument, "trace_router: not an OTLP trace request: %v", err)
	}
	c := causeNotIndexed
	if errors.Is(cause, traceroute.ErrNoRoute) {
		c = causeNoRoute
	}
	spans := td.SpanCount()
	r.tel.ToPipeline.Add(ctx, int64(spans), r.causes[c])
	err = r.next.ConsumeTraces(ctx, td)
	r.obsrep.EndTracesOp(ctx, "protobuf", spans, err)
	if err != nil {
		code := codes.Unavailable
		if consumererror.IsPermanent(err) {
			code = codes.Internal
		}
		return nil, status.Error(code, err.Error())
	}
	var resp []byte
	return &resp, nil
}

// exportResponse encodes an ExportTraceServiceResponse; rejected spans
// (no trace ID to route by) are reported in its partial_success, as OTLP
// asks of a server that drops part of a request.
func exportResponse(rejected int) []byte {
	if rejected == 0 {
		return nil
	}
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType) // rejected_spans
	ps = protowire.AppendVarint(ps, uint64(rejected))
	ps = protowire.AppendTag(ps, 2, protowire.BytesType) // error_message
	ps = protowire.AppendString(ps, "spans with a zero trace ID cannot be routed by trace ID")
	b := protowire.AppendTag(nil, 1, protowire.BytesType) // partial_success
	return protowire.AppendBytes(b, ps)
}
