// Package workload builds the reference request streams that tests and
// benchmarks share (a typical span has 6 attributes, its
// resource 3, ≈ 280 OTLP bytes).
package workload

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Options shape a stream of traces.
type Options struct {
	Services      int // distinct service.name values
	SpansPerTrace int // spans in each trace (the first is the root)
	// MaxSpansPerTrace, when above SpansPerTrace, varies trace sizes:
	// uniform between the two.
	MaxSpansPerTrace int
	ErrorEvery       int           // every Nth trace has an ERROR span; 0 = none
	SlowEvery        int           // every Nth trace is slow; 0 = none
	BaseDuration     time.Duration // root duration of an ordinary trace
	SlowDuration     time.Duration // root duration of a slow trace
	Seed             uint64
	Start            time.Time
}

// Trace is one generated trace: its ID and its spans grouped by service.
type Trace struct {
	ID      pcommon.TraceID
	Service string
	Error   bool
	Slow    bool
	Spans   int
}

// Generator produces traces deterministically from its seed.
type Generator struct {
	opt Options
	rnd *rand.Rand
	n   int
}

// NewGenerator returns a generator with defaults filled in.
func NewGenerator(opt Options) *Generator {
	if opt.Services <= 0 {
		opt.Services = 10
	}
	if opt.SpansPerTrace <= 0 {
		opt.SpansPerTrace = 4
	}
	if opt.BaseDuration == 0 {
		opt.BaseDuration = 40 * time.Millisecond
	}
	if opt.SlowDuration == 0 {
		opt.SlowDuration = 2 * time.Second
	}
	if opt.Start.IsZero() {
		opt.Start = time.Unix(1_700_000_000, 0)
	}
	return &Generator{opt: opt, rnd: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15))}
}

// ServiceName is the name of service i.
func ServiceName(i int) string { return fmt.Sprintf("svc-%03d", i) }

// Next appends the next trace to td (one ResourceSpans for the whole trace)
// and describes it.
func (g *Generator) Next(td ptrace.Traces) Trace {
	g.n++
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.rnd.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.rnd.Uint64()|1)
	t := Trace{
		ID:      tid,
		Service: ServiceName(g.rnd.IntN(g.opt.Services)),
		Error:   g.opt.ErrorEvery > 0 && g.n%g.opt.ErrorEvery == 0,
		Slow:    g.opt.SlowEvery > 0 && g.n%g.opt.SlowEvery == 0,
		Spans:   g.opt.SpansPerTrace,
	}
	if g.opt.MaxSpansPerTrace > g.opt.SpansPerTrace {
		t.Spans += g.rnd.IntN(g.opt.MaxSpansPerTrace - g.opt.SpansPerTrace + 1)
	}
	// Log-normal around BaseDuration: the long right tail real latencies have.
	dur := time.Duration(float64(g.opt.BaseDuration) * math.Exp(0.5*g.rnd.NormFloat64()))
	if t.Slow {
		dur = g.opt.SlowDuration
	}
	start := g.opt.Start.Add(time.Duration(g.n) * time.Millisecond)
	rs := td.ResourceSpans().AppendEmpty()
	FillResource(rs.Resource(), t.Service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("io.opentelemetry.http")
	ss.Scope().SetVersion("1.40.0")
	var rootID pcommon.SpanID
	for i := 0; i < t.Spans; i++ {
		span := ss.Spans().AppendEmpty()
		var sid pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], g.rnd.Uint64()|1)
		span.SetTraceID(tid)
		span.SetSpanID(sid)
		if i == 0 {
			rootID = sid
			span.SetName("GET /api/orders")
			span.SetKind(ptrace.SpanKindServer)
			span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
			span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(dur)))
		} else {
			span.SetParentSpanID(rootID)
			span.SetName(fmt.Sprintf("SELECT orders %d", i))
			span.SetKind(ptrace.SpanKindClient)
			off := dur * time.Duration(i) / time.Duration(t.Spans+1)
			span.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(off)))
			span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(off + dur/time.Duration(t.Spans+1))))
		}
		FillSpanAttributes(span.Attributes(), i)
		if t.Error && i == t.Spans-1 {
			span.Status().SetCode(ptrace.StatusCodeError)
			span.Status().SetMessage("upstream failed")
		}
	}
	return t
}

// Batch returns a request of n traces.
func (g *Generator) Batch(n int) (ptrace.Traces, []Trace) {
	td := ptrace.NewTraces()
	out := make([]Trace, 0, n)
	for range n {
		out = append(out, g.Next(td))
	}
	return td, out
}

// FillResource sets the 3 reference resource attributes.
func FillResource(r pcommon.Resource, service string) {
	a := r.Attributes()
	a.PutStr("service.name", service)
	a.PutStr("deployment.environment.name", "production")
	a.PutStr("host.name", "node-7f9c2")
}

// FillSpanAttributes sets the 6 reference span attributes.
func FillSpanAttributes(a pcommon.Map, i int) {
	a.PutStr("http.request.method", "GET")
	a.PutStr("url.path", "/api/orders")
	a.PutInt("http.response.status_code", 200)
	a.PutStr("server.address", "orders.internal")
	a.PutInt("server.port", 8080)
	a.PutStr("db.system", "postgresql")
	_ = i
}

// SplitBySpan returns the spans of td regrouped into requests of at most
// perRequest spans each, every span keeping a copy of its resource and scope:
// how a trace arrives when its spans are exported from many places.
func SplitBySpan(td ptrace.Traces, perRequest int) []ptrace.Traces {
	var out []ptrace.Traces
	cur := ptrace.NewTraces()
	count := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				nrs := cur.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(nrs.Resource())
				nss := nrs.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(nss.Scope())
				ss.Spans().At(k).CopyTo(nss.Spans().AppendEmpty())
				count++
				if count == perRequest {
					out = append(out, cur)
					cur = ptrace.NewTraces()
					count = 0
				}
			}
		}
	}
	if count > 0 {
		out = append(out, cur)
	}
	return out
}

// SplitRoots returns td's root spans and its other spans as two requests,
// so that a test can deliver a trace's children before its root.
func SplitRoots(td ptrace.Traces) (roots, children ptrace.Traces) {
	roots, children = ptrace.NewTraces(), ptrace.NewTraces()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			var rootSS, childSS ptrace.ScopeSpans
			for k := 0; k < ss.Spans().Len(); k++ {
				span := ss.Spans().At(k)
				dst := &childSS
				out := children
				if span.ParentSpanID().IsEmpty() {
					dst, out = &rootSS, roots
				}
				if *dst == (ptrace.ScopeSpans{}) {
					nrs := out.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(nrs.Resource())
					*dst = nrs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(dst.Scope())
				}
				span.CopyTo(dst.Spans().AppendEmpty())
			}
		}
	}
	return roots, children
}

// Interleave spreads td's spans over parts requests: request k holds the
// k-th share of every trace's spans, so each request carries pieces of many
// traces and each trace arrives in parts requests.
func Interleave(td ptrace.Traces, parts int) []ptrace.Traces {
	out := make([]ptrace.Traces, parts)
	for i := range out {
		out[i] = ptrace.NewTraces()
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			n := ss.Spans().Len()
			for part := 0; part < parts; part++ {
				lo, hi := part*n/parts, (part+1)*n/parts
				if lo == hi {
					continue
				}
				nrs := out[part].ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(nrs.Resource())
				nss := nrs.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(nss.Scope())
				for k := lo; k < hi; k++ {
					ss.Spans().At(k).CopyTo(nss.Spans().AppendEmpty())
				}
			}
		}
	}
	return out
}

// SetService sets service.name on every resource of td.
func SetService(td ptrace.Traces, service string) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rss.At(i).Resource().Attributes().PutStr("service.name", service)
	}
}

// PerSpanResources spreads td's traces over parts requests, each span in a
// ResourceSpans of its own whose resource also names the span's pod
// (k8s.pod.name differs from span to span, so no two spans share a
// resource), and each trace's root in the last part: how traces arrive from
// many pods, each exporting on its own schedule, the entry service last.
// A trace's other spans are dealt over the parts in turn.
func PerSpanResources(td ptrace.Traces, parts int) []ptrace.Traces {
	out := make([]ptrace.Traces, parts)
	for i := range out {
		out[i] = ptrace.NewTraces()
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		next := 0
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				span := ss.Spans().At(k)
				part := parts - 1
				if !span.ParentSpanID().IsEmpty() {
					part = next % parts
					next++
				}
				nrs := out[part].ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(nrs.Resource())
				id := span.SpanID()
				nrs.Resource().Attributes().PutStr("k8s.pod.name",
					fmt.Sprintf("pod-%x", binary.BigEndian.Uint16(id[6:])))
				nss := nrs.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(nss.Scope())
				span.CopyTo(nss.Spans().AppendEmpty())
			}
		}
	}
	return out
}
