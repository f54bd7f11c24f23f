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

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Recorder is an OTLP/gRPC trace server standing for a sampler.
type Recorder struct {
	ptraceotlp.UnimplementedGRPCServer
	// Addr is the address it listens on.
	Addr string
	// Refuse makes it answer Unavailable, recording nothing.
	Refuse atomic.Bool
	calls  atomic.Int64
	mu     sync.Mutex
	spans  map[pcommon.SpanID]int
	traces map[pcommon.TraceID]bool
}

// Start serves a Recorder on addr ("127.0.0.1:0" for any port) until the
// test ends.
func Start(t testing.TB, addr string) *Recorder {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	r := &Recorder{Addr: ln.Addr().String(), spans: map[pcommon.SpanID]int{}, traces: map[pcommon.TraceID]bool{}}
	srv := grpc.NewServer()
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
func (r *Recorder) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r.calls.Add(1)
	if r.Refuse.Load() {
		return ptraceotlp.NewExportResponse(), status.Error(codes.Unavailable, "refusing")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	EachSpan(req.Traces(), func(sp ptrace.Span) {
		r.spans[sp.SpanID()]++
		r.traces[sp.TraceID()] = true
	})
	return ptraceotlp.NewExportResponse(), nil
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
