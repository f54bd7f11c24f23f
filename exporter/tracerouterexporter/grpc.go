package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"context"
	"errors"

	"google.golang.org/grpc"
)

// exportMethod is OTLP/gRPC's trace export.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// rawCodec sends bytes that already are an ExportTraceServiceRequest (a
// TracesData's encoding is one: the same field 1) and ignores the
// response, whose only content is partial success, which OTLP says not to
// retry. It is named "proto" so the content type stays application/grpc.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("trace_router: not raw bytes")
}

func (rawCodec) Unmarshal([]byte, any) error { return nil }

func (rawCodec) Name() string { return "proto" }

var callCodec = grpc.ForceCodec(rawCodec{})

// send exports one encoded part to one sampler.
func (r *router) send(ctx context.Context, b *backend, part []byte) error {
	if b.conn == nil {
		return errors.New("no connection")
	}
	if t := r.cfg.Protocol.OTLP.Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	var resp []byte
	return b.conn.Invoke(ctx, exportMethod, &part, &resp, callCodec)
}
