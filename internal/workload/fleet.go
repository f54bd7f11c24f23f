package workload

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FleetOptions model traffic as real services send it: every pod exports
// through an SDK batch span processor (spans leave when they end, in batches
// every ExportDelay at the pod's own phase, or sooner when MaxExportBatch
// have queued), a trace crosses several services, and the shapes production
// has — head sampling, bimodal and quantized latency, missing roots, clock
// skew, errors only downstream — can be switched on one by one.
type FleetOptions struct {
	Services        int           // distinct services (default 6)
	PodsPerService  int           // pods per service, each with its own resource and export phase (default 3)
	Depth           int           // services one trace crosses, entry first (default 3)
	SpansPerService int           // spans each crossed service adds: one SERVER span and its children (default 2)
	ExportDelay     time.Duration // batch span processor schedule delay (default 5s, every SDK's default)
	MaxExportBatch  int           // batch span processor max export batch size (default 512)
	// Latency: a body uniform in log space between BodyMin and BodyMax, and a
	// slow mode of SlowShare of the traces at SlowDuration (±10%).
	BodyMin, BodyMax time.Duration
	SlowShare        float64
	SlowDuration     time.Duration
	QuantizeMillis   bool    // durations in whole milliseconds
	ErrorShare       float64 // traces with an error, on the deepest service's last span only
	MissingRootShare float64 // traces whose root (a proxy's span) is never exported
	ClockSkew        time.Duration
	// HeadProbabilities, when set, head-samples each entry service with one of
	// these probabilities (consistent, OTEP 235: th on every span).
	HeadProbabilities []float64
	Seed              uint64
}

// FleetTrace is the ground truth of one generated trace.
type FleetTrace struct {
	ID      pcommon.TraceID
	Service string // entry service
	Error   bool
	Slow    bool
	Spans   int     // spans exported (0 when head sampling dropped it)
	HeadP   float64 // head sampling probability (1 = none)
	Start   time.Time
}

// Request is one export of one pod.
type Request struct {
	Service string
	Traces  ptrace.Traces
}

type fleetSpan struct {
	traceID       pcommon.TraceID
	spanID, paren pcommon.SpanID
	name          string
	kind          ptrace.SpanKind
	start, end    time.Time // true time; the pod's skew is added on export
	err           bool
	traceState    string
}

type pod struct {
	service  string
	name     string
	skew     time.Duration
	next     time.Time // next scheduled export
	pending  []fleetSpan
	queue    []fleetSpan
	headProb float64
}

// Fleet generates traces and delivers them as the pods' exports.
type Fleet struct {
	opt     FleetOptions
	rnd     *rand.Rand
	pods    [][]*pod // by service
	Offered int      // spans that would exist without head sampling
}

// NewFleet returns a fleet whose first exports are due within ExportDelay of start.
func NewFleet(opt FleetOptions, start time.Time) *Fleet {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opt.Services, 6)
	def(&opt.PodsPerService, 3)
	def(&opt.Depth, 3)
	def(&opt.SpansPerService, 2)
	def(&opt.MaxExportBatch, 512)
	if opt.ExportDelay <= 0 {
		opt.ExportDelay = 5 * time.Second
	}
	if opt.BodyMin <= 0 {
		opt.BodyMin = 20 * time.Millisecond
	}
	if opt.BodyMax <= opt.BodyMin {
		opt.BodyMax = 10 * opt.BodyMin
	}
	if opt.SlowDuration <= 0 {
		opt.SlowDuration = 5 * time.Second
	}
	f := &Fleet{opt: opt, rnd: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x5851f42d4c957f2d))}
	for s := 0; s < opt.Services; s++ {
		var pods []*pod
		headProb := 1.0
		if len(opt.HeadProbabilities) > 0 {
			headProb = opt.HeadProbabilities[s%len(opt.HeadProbabilities)]
		}
		for i := 0; i < opt.PodsPerService; i++ {
			skew := time.Duration(0)
			if opt.ClockSkew > 0 {
				skew = time.Duration((f.rnd.Float64()*2 - 1) * float64(opt.ClockSkew))
			}
			pods = append(pods, &pod{
				service:  ServiceName(s),
				name:     fmt.Sprintf("%s-%d", ServiceName(s), i),
				skew:     skew,
				next:     start.Add(time.Duration(f.rnd.Float64() * float64(opt.ExportDelay))),
				headProb: headProb,
			})
		}
		f.pods = append(f.pods, pods)
	}
	return f
}

// HeadThreshold is the OTEP 235 threshold of a head probability.
func HeadThreshold(p float64) sampling.Threshold {
	th, err := sampling.ProbabilityToThresholdWithPrecision(p, 4)
	if err != nil {
		return sampling.AlwaysSampleThreshold
	}
	return th
}

// Start begins one trace at now and returns its ground truth.
func (f *Fleet) Start(now time.Time) FleetTrace {
	o := f.opt
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[:8], f.rnd.Uint64())
	binary.BigEndian.PutUint64(id[8:], f.rnd.Uint64())
	entry := f.rnd.IntN(o.Services)
	tr := FleetTrace{ID: id, Service: ServiceName(entry), HeadP: 1, Start: now}
	tr.Slow = f.rnd.Float64() < o.SlowShare
	tr.Error = f.rnd.Float64() < o.ErrorShare
	dur := time.Duration(float64(o.BodyMin) * math.Pow(float64(o.BodyMax)/float64(o.BodyMin), f.rnd.Float64()))
	if tr.Slow {
		dur = time.Duration(float64(o.SlowDuration) * (0.9 + 0.2*f.rnd.Float64()))
	}
	if o.QuantizeMillis {
		dur = dur.Round(time.Millisecond)
	}
	f.Offered += o.Depth * o.SpansPerService
	ts := ""
	entryPod := f.pods[entry][f.rnd.IntN(o.PodsPerService)]
	if entryPod.headProb < 1 {
		th := HeadThreshold(entryPod.headProb)
		tr.HeadP = th.Probability()
		if !th.ShouldSample(sampling.TraceIDToRandomness(id)) {
			return tr
		}
		ts = "ot=th:" + th.TValue()
	}
	missingRoot := f.rnd.Float64() < o.MissingRootShare
	var parent pcommon.SpanID
	if missingRoot {
		parent = f.spanID() // the proxy's span, never exported
	}
	start, end := now, now.Add(dur)
	svc := entry
	for d := 0; d < o.Depth; d++ {
		p := entryPod
		if d > 0 {
			svc = (entry + d) % o.Services
			p = f.pods[svc][f.rnd.IntN(o.PodsPerService)]
		}
		server := fleetSpan{traceID: id, spanID: f.spanID(), paren: parent, name: fmt.Sprintf("GET /%s/op", ServiceName(svc)),
			kind: ptrace.SpanKindServer, start: start, end: end, traceState: ts}
		p.pending = append(p.pending, server)
		// Children split the server span's time; the last one calls the next service.
		child := server
		for c := 1; c < o.SpansPerService; c++ {
			width := (end.Sub(start)) / time.Duration(o.SpansPerService)
			cs := start.Add(width * time.Duration(c-1) / 2)
			child = fleetSpan{traceID: id, spanID: f.spanID(), paren: server.spanID, name: fmt.Sprintf("call %d", c),
				kind: ptrace.SpanKindClient, start: cs, end: end.Add(-width / 4), traceState: ts}
			p.pending = append(p.pending, child)
		}
		parent = child.spanID
		// The next service's server span sits inside the caller's span.
		inset := end.Sub(start) / 20
		start, end = start.Add(inset), end.Add(-inset)
		tr.Spans += o.SpansPerService
		if d == o.Depth-1 && tr.Error {
			last := &p.pending[len(p.pending)-1]
			last.err = true
		}
	}
	return tr
}

func (f *Fleet) spanID() pcommon.SpanID {
	var s pcommon.SpanID
	binary.BigEndian.PutUint64(s[:], f.rnd.Uint64()|1)
	return s
}

// Exports returns what the pods export by now: spans that ended join their
// pod's queue; a pod exports when its schedule comes or its queue is full.
func (f *Fleet) Exports(now time.Time) []Request {
	var out []Request
	for _, pods := range f.pods {
		for _, p := range pods {
			keep := p.pending[:0]
			for _, s := range p.pending {
				if !s.end.After(now) {
					p.queue = append(p.queue, s)
				} else {
					keep = append(keep, s)
				}
			}
			p.pending = keep
			for len(p.queue) >= f.opt.MaxExportBatch {
				out = append(out, p.export(f.opt.MaxExportBatch))
			}
			for !p.next.After(now) {
				if len(p.queue) > 0 {
					out = append(out, p.export(len(p.queue)))
				}
				p.next = p.next.Add(f.opt.ExportDelay)
			}
		}
	}
	return out
}

// Drain exports everything still pending, as SDKs do on shutdown.
func (f *Fleet) Drain() []Request {
	var out []Request
	for _, pods := range f.pods {
		for _, p := range pods {
			p.queue = append(p.queue, p.pending...)
			p.pending = nil
			sort.SliceStable(p.queue, func(i, j int) bool { return p.queue[i].end.Before(p.queue[j].end) })
			if len(p.queue) > 0 {
				out = append(out, p.export(len(p.queue)))
			}
		}
	}
	return out
}

func (p *pod) export(n int) Request {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	a := rs.Resource().Attributes()
	a.PutStr("service.name", p.service)
	a.PutStr("k8s.pod.name", p.name)
	a.PutStr("deployment.environment.name", "production")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	for _, s := range p.queue[:n] {
		span := ss.Spans().AppendEmpty()
		span.SetTraceID(s.traceID)
		span.SetSpanID(s.spanID)
		span.SetParentSpanID(s.paren)
		span.SetName(s.name)
		span.SetKind(s.kind)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(s.start.Add(p.skew)))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(s.end.Add(p.skew)))
		if s.traceState != "" {
			span.TraceState().FromRaw(s.traceState)
		}
		span.Attributes().PutStr("http.request.method", "GET")
		span.Attributes().PutInt("http.response.status_code", 200)
		if s.err {
			span.Status().SetCode(ptrace.StatusCodeError)
			span.Attributes().PutInt("http.response.status_code", 503)
		}
	}
	p.queue = append(p.queue[:0], p.queue[n:]...)
	return Request{Service: p.service, Traces: td}
}
