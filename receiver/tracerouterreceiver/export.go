package tracerouterreceiver // import "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/client"
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

// requestOverhead is what a request costs besides its bytes and index
// while it waits (its handler's goroutine, its split), charged against
// max_inflight_bytes so that many tiny requests are bounded too.
const requestOverhead = 4096

// export takes one request. A request the router splits is answered as
// soon as it is split: its parts are sent in the background (merged with
// other requests of the same client metadata into rounds, then each
// sampler's part through that sampler's sender), its bytes and index held
// (and counted against max_inflight_bytes) until its parts are encoded.
// Spans with a zero trace ID are reported rejected in the response's
// partial success. A request the collector's decoder would refuse is
// refused as invalid before anything is taken; one the router cannot split
// is decoded here and handed to the pipeline, whose answer is the
// client's, as with the otlp receiver.
func (r *routerReceiver) export(ctx context.Context, req []byte) (any, error) {
	if !r.handlers.enter() {
		return nil, status.Error(codes.Unavailable, "trace_router: shutting down; retry on another gateway")
	}
	defer r.handlers.exit()
	held := int64(len(req)) + requestOverhead
	if held > r.cfg.MaxInflightBytes {
		// It could never be taken: retrying it would be refused forever.
		r.tel.Refused.Add(ctx, 1, r.causes[causeTooLarge])
		return nil, status.Errorf(codes.InvalidArgument, "trace_router: a request of %d bytes is larger than max_inflight_bytes (%d) can hold; send smaller requests", len(req), r.cfg.MaxInflightBytes)
	}
	if !r.admit(held) {
		r.tel.Refused.Add(ctx, 1, r.causes[causeInflight])
		return nil, status.Error(codes.Unavailable, "trace_router: max_inflight_bytes reached; retry later")
	}
	ctx = r.obsrep.StartTracesOp(ctx)
	sp, err := r.router.Split(req, r.cfg.MaxRecordsPerRequest)
	switch {
	case errors.Is(err, traceroute.ErrInvalid), errors.Is(err, traceroute.ErrTooLarge), errors.Is(err, traceroute.ErrNoSpans):
		r.release(held)
		c := causeMalformed
		if errors.Is(err, traceroute.ErrTooLarge) {
			c = causeTooLarge
		} else if errors.Is(err, traceroute.ErrNoSpans) {
			c = causeEmpty
		}
		r.tel.Refused.Add(ctx, 1, r.causes[c])
		r.obsrep.EndTracesOp(ctx, "protobuf", 0, consumererror.NewPermanent(err))
		return nil, status.Errorf(codes.InvalidArgument, "trace_router: %v", err)
	case err != nil:
		defer r.release(held)
		return r.decodeAndConsume(ctx, req, err)
	}
	// The index is charged too: a request of many small records indexes
	// to several times its size.
	held += int64(sp.MemoryBytes())
	r.charge(int64(sp.MemoryBytes()))
	spans := sp.Spans()
	r.obsrep.EndTracesOp(ctx, "protobuf", spans, nil)
	resp := exportResponse(sp.Dropped())
	// The client's call ends now; its metadata stays with the parts, and
	// only requests of the same metadata share a round.
	r.pending <- taken{ctx: context.WithoutCancel(ctx), tenant: tenantOf(ctx, r.router.MetadataKeys()), split: sp, spans: spans, held: held}
	return &resp, nil
}

// admit charges n bytes if they fit under max_inflight_bytes.
func (r *routerReceiver) admit(n int64) bool {
	if r.inflight.Add(n) > r.cfg.MaxInflightBytes {
		r.inflight.Add(-n)
		return false
	}
	return true
}

// charge counts n bytes held after admission (a request's index, the
// encodings of parts, decoded give-backs): new requests are refused while
// they are held.
func (r *routerReceiver) charge(n int64) { r.inflight.Add(n) }

func (r *routerReceiver) release(n int64) { r.inflight.Add(-n) }

// taken is a request answered and waiting for its round.
type taken struct {
	ctx    context.Context
	tenant string
	split  traceroute.Split
	spans  int // split.Spans(), counted once when taken
	held   int64
}

// tenantOf names a request's values of the client metadata keys the
// router sends on with its parts (the exporter's forward_metadata: a
// tenant's key or token). Requests whose names differ never share a
// round, as exporterhelper's metadata_keys keeps batches apart.
func tenantOf(ctx context.Context, keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	info := client.FromContext(ctx)
	// Each key's count of values, then each value's length and bytes: a
	// "-bin" key's value may hold any byte, so no separator is safe.
	var b []byte
	for _, k := range keys {
		vs := info.Metadata.Get(k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return string(b)
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
