// Package otlptest runs OTLP/gRPC trace servers on loopback for tests of
// the gateway's router: a Recorder counts every span it is sent, by span
// and trace ID, and refuses (Unavailable, as memory_limiter does) while
// told to. It owns nothing of routing or of the collector's components.
package otlptest // import "github.com/otelcol-cost/otelcol-cost/internal/otlptest"

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	// Registers gRPC's zstd codec (the collector's own), which the
	// gateway compresses with by default.
	_ "go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Recorder is an OTLP/gRPC trace server standing for a sampler.
type Recorder struct {
	ptraceotlp.UnimplementedGRPCServer
	// Addr is the address it listens on.
	Addr string
	// Refuse makes it answer Unavailable, recording nothing.
	Refuse atomic.Bool
	// Delay (ns) makes it answer that late: a slow sampler. It records
	// the request when it answers, whether the sender still waits or not.
	Delay atomic.Int64
	// Reject makes it report that many spans of each request rejected
	// (partial success), recording the others.
	Reject atomic.Int64
	calls  atomic.Int64
	// requests are what each request it took held, in order.
	requests []Request
	mu       sync.Mutex
	spans    map[pcommon.SpanID]int
	traces   map[pcommon.TraceID]bool
}

// Request is what one request a Recorder took held.
type Request struct {
	// Metadata is the request's gRPC metadata (headers).
	Metadata metadata.MD
	// Tenants are the values of the "tenant" resource attribute of its
	// spans' resources.
	Tenants map[string]int
	Spans   int
	Bytes   int
}

// Start serves a Recorder on addr ("127.0.0.1:0" for any port) until the
// test ends; opts are the gRPC server's (its max_recv_msg_size, say).
func Start(t testing.TB, addr string, opts ...grpc.ServerOption) *Recorder {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	r := &Recorder{Addr: ln.Addr().String(), spans: map[pcommon.SpanID]int{}, traces: map[pcommon.TraceID]bool{}}
	srv := grpc.NewServer(opts...)
	ptraceotlp.RegisterGRPCServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

// StartN serves n Recorders on loopback ports and returns them with their
// addresses.
func StartN(t testing.TB, n int) ([]*Recorder, []string) {
	t.Helper()
	var rs []*Recorder
	var addrs []string
	for range n {
		r := Start(t, "127.0.0.1:0")
		rs = append(rs, r)
		addrs = append(addrs, r.Addr)
	}
	return rs, addrs
}

// Export records the request's spans, or refuses it.
func (r *Recorder) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r.calls.Add(1)
	if d := r.Delay.Load(); d > 0 {
		// A slow peer, until the caller gives up (the server's stop ends
		// the call's context too): no handler outlives its test.
		select {
		case <-time.After(time.Duration(d)):
		case <-ctx.Done():
			return ptraceotlp.NewExportResponse(), ctx.Err()
		}
	}
	if r.Refuse.Load() {
		return ptraceotlp.NewExportResponse(), status.Error(codes.Unavailable, "refusing")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	rec := Request{Metadata: md.Copy(), Tenants: map[string]int{}, Spans: req.Traces().SpanCount()}
	b, _ := req.MarshalProto()
	rec.Bytes = len(b)
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		if v, ok := rss.At(i).Resource().Attributes().Get("tenant"); ok {
			rec.Tenants[v.Str()]++
		}
	}
	r.requests = append(r.requests, rec)
	reject := int(r.Reject.Load())
	EachSpan(req.Traces(), func(sp ptrace.Span) {
		if reject > 0 {
			reject--
			return
		}
		r.spans[sp.SpanID()]++
		r.traces[sp.TraceID()] = true
	})
	resp := ptraceotlp.NewExportResponse()
	if n := r.Reject.Load(); n > 0 {
		resp.PartialSuccess().SetRejectedSpans(min(n, int64(rec.Spans)))
		resp.PartialSuccess().SetErrorMessage("rejected by the test")
	}
	return resp, nil
}

// Requests are what each request it took held, in order.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Count is how many spans it took, a span received twice counted twice.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.spans {
		n += c
	}
	return n
}

// SpanIDs are the spans it took, with how often.
func (r *Recorder) SpanIDs() map[pcommon.SpanID]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[pcommon.SpanID]int, len(r.spans))
	for id, c := range r.spans {
		out[id] = c
	}
	return out
}

// Calls is how many requests it was sent, refused ones included.
func (r *Recorder) Calls() int64 { return r.calls.Load() }

// TraceIDs are the traces it took spans of.
func (r *Recorder) TraceIDs() []pcommon.TraceID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]pcommon.TraceID, 0, len(r.traces))
	for id := range r.traces {
		out = append(out, id)
	}
	return out
}

// Twice are the spans it took more than once.
func (r *Recorder) Twice() []pcommon.SpanID {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pcommon.SpanID
	for id, c := range r.spans {
		if c > 1 {
			out = append(out, id)
		}
	}
	return out
}

// EachSpan calls f with every span of td.
func EachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(spans.At(k))
			}
		}
	}
}
