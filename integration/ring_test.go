package integration

import (
	"context"
	binenc "encoding/binary"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// traceIDSink records only which trace IDs it received, so that a million
// of them fit.
type traceIDSink struct {
	ptraceotlp.UnimplementedGRPCServer
	addr  string
	mu    sync.Mutex
	ids   map[pcommon.TraceID]struct{}
	spans int
}

func startTraceIDSink(t *testing.T) *traceIDSink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &traceIDSink{addr: l.Addr().String(), ids: map[pcommon.TraceID]struct{}{}}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, s)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *traceIDSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			spans := rss.At(i).ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s.ids[spans.At(k).TraceID()] = struct{}{}
				s.spans++
			}
		}
	}
	return ptraceotlp.NewExportResponse(), nil
}

func (s *traceIDSink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = map[pcommon.TraceID]struct{}{}
	s.spans = 0
}

// oneSpanTraces is n traces of one span each, their IDs from rnd.
func oneSpanTraces(rnd *rand.Rand, n int) (ptrace.Traces, []pcommon.TraceID) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "ring")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	ids := make([]pcommon.TraceID, n)
	for i := range n {
		binenc.BigEndian.PutUint64(ids[i][:8], rnd.Uint64())
		binenc.BigEndian.PutUint64(ids[i][8:], rnd.Uint64())
		s := spans.AppendEmpty()
		s.SetTraceID(ids[i])
		s.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
		s.SetName("x")
	}
	return td, ids
}

// TestRingEqualityTraceRouterAndLoadBalancing: a million random trace IDs
// through the built gateway, once with trace_router and once with contrib's
// load_balancing, to the same five samplers: every trace goes to the same
// sampler with both, and internal/ring (the samplers' handoff view)
// predicts it. Then the set changes (one sampler leaves, another joins,
// the gateway reloads its list) and 200,000 more agree.
func TestRingEqualityTraceRouterAndLoadBalancing(t *testing.T) {
	if testing.Short() {
		t.Skip("a million traces through two gateways")
	}
	var sinks []*traceIDSink
	for range 6 {
		sinks = append(sinks, startTraceIDSink(t))
	}
	sets := [][]*traceIDSink{sinks[:5], append(append([]*traceIDSink{}, sinks[1:5]...), sinks[5])}
	counts := []int{1_000_000, 200_000}
	got := map[string][]map[pcommon.TraceID]string{} // exporter → per set: trace → sampler
	for _, router := range []string{"trace_router", "load_balancing"} {
		dir := t.TempDir()
		listFile := filepath.Join(dir, "samplers.yaml")
		writeList := func(set []*traceIDSink) {
			var addrs []string
			for _, s := range set {
				addrs = append(addrs, s.addr)
			}
			overlay := "exporters:\n  " + router + ":\n    resolver:\n      static:\n        hostnames: [" + strings.Join(addrs, ", ") + "]\n"
			require.NoError(t, os.WriteFile(listFile, []byte(overlay), 0o600))
		}
		configs := []string{configPath("gateway.yaml")}
		if router == "load_balancing" {
			configs = append(configs, configPath("gateway-loadbalancing.yaml"))
		}
		writeList(sets[0])
		gw := startCollector(t, map[string]string{"LOG_LEVEL": "warn", "SAMPLER_COMPRESSION": "none"}, append(configs, listFile)...)
		for si, set := range sets {
			if si > 0 {
				writeList(set)
				require.NoError(t, gw.cmd.Process.Signal(syscall.SIGHUP))
				require.NoError(t, waitGone("http://"+gw.Health+"/", 10*time.Second))
				require.NoError(t, procwatch.WaitReady("http://"+gw.Health+"/", gw.done, 30*time.Second))
			}
			for _, s := range sinks {
				s.reset()
			}
			rnd := rand.New(rand.NewPCG(uint64(si), 235))
			// OTLP/gRPC and OTLP/HTTP in turn: with trace_router the first
			// is routed as received, the second decoded by the otlp
			// receiver and routed by the exporter; both on one ring.
			for sent := 0; sent < counts[si]; sent += 10_000 {
				td, _ := oneSpanTraces(rnd, 10_000)
				if sent/10_000%2 == 0 {
					require.NoError(t, gw.sendGRPC(td))
				} else {
					require.NoError(t, gw.sendHTTP(td))
				}
			}
			eventually(t, 2*time.Minute, func() bool {
				n := 0
				for _, s := range sinks {
					s.mu.Lock()
					n += s.spans
					s.mu.Unlock()
				}
				return n >= counts[si]
			}, "%s: %d traces at the samplers", router, counts[si])
			where := map[pcommon.TraceID]string{}
			for _, s := range sinks {
				s.mu.Lock()
				for id := range s.ids {
					where[id] = s.addr
				}
				s.mu.Unlock()
			}
			require.Len(t, where, counts[si], "%s: every trace once", router)
			got[router] = append(got[router], where)
		}
		gw.stop()
	}
	for si, set := range sets {
		var addrs []string
		for _, s := range set {
			addrs = append(addrs, s.addr)
		}
		rg := ring.New(addrs)
		ours, contrib := got["trace_router"][si], got["load_balancing"][si]
		differ, mispredicted := 0, 0
		for id, at := range contrib {
			if ours[id] != at {
				differ++
			}
			if rg.Owner(id) != at {
				mispredicted++
			}
		}
		assert.Zero(t, differ, "set %d: traces trace_router sent elsewhere than load_balancing", si)
		assert.Zero(t, mispredicted, "set %d: traces internal/ring predicts elsewhere", si)
	}
}
