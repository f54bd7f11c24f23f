package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
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

// export routes one request. Its spans are routed (sent to their samplers
// from the bytes as received), dropped with a zero trace ID (reported as
// rejected in the response's partial success), or decoded and handed to
// the pipeline, whose error, if any, is the client's.
func (r *routerReceiver) export(ctx context.Context, req []byte) (any, error) {
	n := int64(len(req))
	if r.inflight.Add(n) > r.cfg.MaxInflightBytes {
		r.inflight.Add(-n)
		r.tel.Refused.Add(ctx, 1, r.causes[causeInflight])
		return nil, status.Error(codes.Unavailable, "trace_router: max_inflight_bytes reached; retry later")
	}
	defer r.inflight.Add(-n)

	ctx = r.obsrep.StartTracesOp(ctx)
	out, err := r.router.RouteEncoded(ctx, req)
	var toPipeline ptrace.Traces
	cause := causeSendFailed
	switch {
	case err == nil:
		r.tel.Routed.Add(ctx, int64(out.Sent))
		toPipeline = out.Failed
	case errors.Is(err, traceroute.ErrNotIndexed), errors.Is(err, traceroute.ErrNoRoute):
		// Decode it, as the otlp receiver would, and let the pipeline
		// take it (or say why it is malformed).
		var u ptrace.ProtoUnmarshaler
		td, derr := u.UnmarshalTraces(req)
		if derr != nil {
			r.tel.Refused.Add(ctx, 1, r.causes[causeMalformed])
			r.obsrep.EndTracesOp(ctx, "protobuf", 0, consumererror.NewPermanent(derr))
			return nil, status.Errorf(codes.InvalidArgument, "trace_router: not an OTLP trace request: %v", derr)
		}
		toPipeline = td
		cause = causeNotIndexed
		if errors.Is(err, traceroute.ErrNoRoute) {
			cause = causeNoRoute
		}
	default:
		r.obsrep.EndTracesOp(ctx, "protobuf", 0, err)
		return nil, status.Error(codes.Internal, err.Error())
	}
	var perr error
	spans := out.Sent
	if toPipeline != (ptrace.Traces{}) {
		c := toPipeline.SpanCount()
		spans += c
		r.tel.ToPipeline.Add(ctx, int64(c), r.causes[cause])
		perr = r.next.ConsumeTraces(ctx, toPipeline)
	}
	r.obsrep.EndTracesOp(ctx, "protobuf", spans, perr)
	if perr != nil {
		code := codes.Unavailable
		if consumererror.IsPermanent(perr) {
			code = codes.Internal
		}
		return nil, status.Error(code, perr.Error())
	}
	resp := exportResponse(out.Dropped)
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
