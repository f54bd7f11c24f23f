package integration

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the collector's OTLP exporter compresses with gzip

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
)

// otlpSink is a real OTLP/gRPC backend in the test process: it records every
// span it receives, by trace ID, with the time it arrived.
type otlpSink struct {
	ptraceotlp.UnimplementedGRPCServer
	Addr string

	mu       sync.Mutex
	spans    map[pcommon.TraceID][]ptrace.Span
	arrivals []arrival
	// bytesByService is the OTLP size of the ResourceSpans received, by service.name.
	bytesByService map[string]int
}

type arrival struct {
	at           time.Time
	spans, bytes int
}

func startSink(t *testing.T) *otlpSink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &otlpSink{Addr: l.Addr().String(), spans: map[pcommon.TraceID][]ptrace.Span{}, bytesByService: map[string]int{}}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, s)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *otlpSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	td := ptrace.NewTraces()
	req.Traces().CopyTo(td)
	s.mu.Lock()
	defer s.mu.Unlock()
	var m ptrace.ProtoMarshaler
	s.arrivals = append(s.arrivals, arrival{at: time.Now(), spans: td.SpanCount(), bytes: m.TracesSize(td)})
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		one := ptrace.NewTraces()
		rss.At(i).CopyTo(one.ResourceSpans().AppendEmpty())
		svc, _ := rss.At(i).Resource().Attributes().Get("service.name")
		s.bytesByService[svc.AsString()] += m.TracesSize(one)
		spanwalk.ResourceSpans(rss.At(i), func(sp ptrace.Span) {
			s.spans[sp.TraceID()] = append(s.spans[sp.TraceID()], sp)
		})
	}
	return ptraceotlp.NewExportResponse(), nil
}

func (s *otlpSink) trace(id pcommon.TraceID) []ptrace.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spans[id]
}

func (s *otlpSink) spanCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.arrivals {
		n += a.spans
	}
	return n
}

// spansBetween counts spans that arrived in [from, to).
func (s *otlpSink) spansBetween(from, to time.Time) int { return s.between(from, to).spans }

// bytesBetween is the OTLP bytes of the requests that arrived in [from, to).
func (s *otlpSink) bytesBetween(from, to time.Time) int { return s.between(from, to).bytes }

// between sums the requests that arrived in [from, to).
func (s *otlpSink) between(from, to time.Time) arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum arrival
	for _, a := range s.arrivals {
		if !a.at.Before(from) && a.at.Before(to) {
			sum.spans += a.spans
			sum.bytes += a.bytes
		}
	}
	return sum
}

func (s *otlpSink) traceIDs() []pcommon.TraceID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]pcommon.TraceID, 0, len(s.spans))
	for id := range s.spans {
		out = append(out, id)
	}
	return out
}

func (s *otlpSink) serviceBytes() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.bytesByService {
		out[k] = v
	}
	return out
}
