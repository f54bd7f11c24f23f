package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/collector/client"
	"google.golang.org/grpc/metadata"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// exportMethod is OTLP/gRPC's trace export.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// rawCodec sends bytes that already are an ExportTraceServiceRequest (a
// TracesData's encoding is one: the same field 1) and takes the response's
// bytes as they are (its only content is partial success). It is named
// "proto" so the content type stays application/grpc.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("trace_router: not raw bytes")
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = data
	}
	return nil
}

func (rawCodec) Name() string { return "proto" }

var callCodec = grpc.ForceCodec(rawCodec{})

// send exports one encoded part to one sampler, within protocol.otlp's
// timeout, and returns how many spans its answer reports rejected.
func (r *router) send(ctx context.Context, b *backend, part []byte) (int, error) {
	if b.conn == nil {
		return 0, errors.New("no connection")
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Protocol.OTLP.Timeout)
	defer cancel()
	if keys := r.cfg.Protocol.OTLP.ForwardMetadata; len(keys) > 0 {
		info := client.FromContext(ctx)
		md := metadata.MD{}
		for _, k := range keys {
			if v := info.Metadata.Get(k); len(v) > 0 {
				md[strings.ToLower(k)] = v
			}
		}
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	var resp []byte
	if err := b.conn.Invoke(ctx, exportMethod, &part, &resp, callCodec); err != nil {
		return 0, err
	}
	return rejectedSpans(resp), nil
}

// rejectedSpans reads ExportTraceServiceResponse.partial_success
// .rejected_spans from a response's encoding (0 when absent or unreadable).
func rejectedSpans(resp []byte) int {
	rejected := 0
	for len(resp) > 0 {
		num, typ, n := protowire.ConsumeTag(resp)
		if n < 0 {
			return rejected
		}
		resp = resp[n:]
		if num == 1 && typ == protowire.BytesType {
			ps, m := protowire.ConsumeBytes(resp)
			if m < 0 {
				return rejected
			}
			for len(ps) > 0 {
				pn, pt, k := protowire.ConsumeTag(ps)
				if k < 0 {
					break
				}
				ps = ps[k:]
				if pn == 1 && pt == protowire.VarintType {
					v, l := protowire.ConsumeVarint(ps)
					if l < 0 {
						break
					}
					rejected = int(min(v, 1<<31))
				}
				l := protowire.ConsumeFieldValue(pn, pt, ps)
				if l < 0 {
					break
				}
				ps = ps[l:]
			}
			resp = resp[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, resp)
		if m < 0 {
			return rejected
		}
		resp = resp[m:]
	}
	return rejected
}
