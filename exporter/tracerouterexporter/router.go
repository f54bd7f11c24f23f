package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
	"github.com/otelcol-cost/otelcol-cost/internal/traceroute"
)

// router encodes each request once, splits the encoding by trace ID on the
// ring (the records of each sampler's spans copied, with their resource
// and scope) and sends each part as it is. A part a sampler does not take
// is decoded back and returned to the exporter's queue, which routes it
// again on the ring as it is then.
type router struct {
	cfg    *Config
	set    exporter.Settings
	tel    *metadata.Telemetry
	logger *zap.Logger
	res    resolver
	host   component.Host

	// routes is read per request; the resolver replaces it.
	routes atomic.Pointer[routes]
	mu     sync.Mutex // serializes route changes
	// conns are the open connections, by endpoint, kept across changes.
	conns map[string]*grpc.ClientConn

	indexes sync.Pool
	// buffers hold one part's encoding while it is sent.
	buffers sync.Pool
	invalid [numInvalid]metric.MeasurementOption
	// unregister removes the router from the receiver's registry.
	unregister func()
}

// routes is one ring and a backend per member, in the ring's order.
type routes struct {
	ring     *ring.Ring
	backends []*backend
}

type backend struct {
	endpoint string
	conn     *grpc.ClientConn
	attrs    metric.MeasurementOption
	// heldUntil (Unix ns): after a failed send, the receiver's rounds give
	// this sampler's parts back without sending them until then (holdOff).
	heldUntil atomic.Int64
}

// holdOff is how long the trace_router receiver's rounds send a sampler
// nothing after it failed a send: its parts go down the pipeline to the
// exporter's queue, whose retries back off as contrib's load_balancing
// does. memory_limiter re-checks its memory once a second (check_interval
// in the shipped configs); without the pause a refusing sampler was sent
// every round's fresh spans, twice contrib's refused volume in the
// overload test, and its resident memory grew past its limit.
const holdOff = time.Second

// errHeldOff: a part not sent because its sampler is held off.
var errHeldOff = errors.New("held off after a failed send")

const (
	invalidZeroTraceID = iota
	invalidNoBackend
	numInvalid
)

func newRouter(set exporter.Settings, cfg *Config) (*router, error) {
	tel, err := metadata.NewTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	r := &router{cfg: cfg, set: set, tel: tel, logger: set.Logger, conns: map[string]*grpc.ClientConn{}}
	r.indexes.New = func() any { return new(otlpwire.Index) }
	r.buffers.New = func() any { return new([]byte) }
	for i, cause := range []string{"zero_trace_id", "no_backend"} {
		r.invalid[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", cause)))
	}
	r.routes.Store(&routes{})
	if cfg.Resolver.Static.HasValue() {
		r.res = &staticResolver{hostnames: cfg.Resolver.Static.Get().Hostnames}
	} else {
		r.res = newDNSResolver(*cfg.Resolver.DNS.Get(), set.Logger, func() { tel.ResolveFailed.Add(context.Background(), 1) })
	}
	return r, nil
}

func (r *router) start(ctx context.Context, host component.Host) error {
	r.host = host
	if err := r.res.start(ctx, r.setEndpoints); err != nil {
		return err
	}
	// The trace_router receiver finds this exporter by its ID.
	r.unregister = traceroute.Register(r.set.ID, r)
	return nil
}

func (r *router) shutdown(context.Context) error {
	if r.unregister != nil {
		r.unregister()
	}
	r.res.shutdown()
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for ep, c := range r.conns {
		errs = append(errs, c.Close())
		delete(r.conns, ep)
	}
	r.routes.Store(&routes{})
	return errors.Join(errs...)
}

// setEndpoints builds the ring of a new set of samplers, opening
// connections to new ones and closing those of samplers that left (their
// sends in flight fail, and go back to the queue).
func (r *router) setEndpoints(eps []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rg := ring.New(eps)
	next := &routes{ring: rg}
	keep := map[string]bool{}
	for _, ep := range rg.Endpoints() {
		c, ok := r.conns[ep]
		if !ok {
			var err error
			if c, err = r.dial(ep); err != nil {
				// A sampler whose connection cannot even be configured
				// stays in the ring (the ring must match the gateways'):
				// its sends fail and return to the queue.
				r.logger.Error("cannot configure a connection to a sampler", zap.String("endpoint", ep), zap.Error(err))
			} else {
				r.conns[ep] = c
			}
		}
		keep[ep] = true
		next.backends = append(next.backends, &backend{endpoint: ep, conn: c,
			attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("endpoint", ep)))})
	}
	r.routes.Store(next)
	for ep, c := range r.conns {
		if !keep[ep] {
			_ = c.Close()
			delete(r.conns, ep)
		}
	}
	r.tel.RingChanges.Add(context.Background(), 1)
	r.tel.Backends.Record(context.Background(), int64(len(eps)))
	r.logger.Info("samplers changed; routing on the new ring", zap.Strings("endpoints", eps))
}

// dial opens a client connection to ep with the configured gRPC settings.
func (r *router) dial(ep string) (*grpc.ClientConn, error) {
	cc := r.cfg.Protocol.OTLP.ClientConfig
	cc.Endpoint = withPort(ep)
	return cc.ToClientConn(context.Background(), r.host.GetExtensions(), r.set.TelemetrySettings)
}

// withPort adds the OTLP port to an endpoint without one, as
// load_balancing does (its ring hashes the endpoint as the resolver gave
// it).
func withPort(ep string) string {
	if _, _, err := net.SplitHostPort(ep); err == nil {
		return ep
	}
	return net.JoinHostPort(ring.Host(ep), defaultPort)
}

// push routes td: the exporter's path, after the pipeline decoded it.
func (r *router) push(ctx context.Context, td ptrace.Traces) error {
	sp := r.newSplit()
	if err := sp.idx.Marshal(td); err != nil {
		sp.release()
		return consumererror.NewPermanent(fmt.Errorf("cannot index the request's encoding: %w", err))
	}
	switch err := sp.split(ctx); {
	case errors.Is(err, traceroute.ErrNoRoute):
		r.tel.InvalidSpans.Add(ctx, int64(td.SpanCount()), r.invalid[invalidNoBackend])
		return fmt.Errorf("%w: the resolver has found none", err)
	case err != nil:
		return consumererror.NewPermanent(fmt.Errorf("cannot route the request's encoding: %w", err))
	}
	// The queue's retries are paced by retry_on_failure: no hold-off.
	out := r.sendAll(ctx, []traceroute.Split{sp}, false)
	if out.Failed == (ptrace.Traces{}) {
		return nil
	}
	return consumererror.NewTraces(out.Err, out.Failed)
}

// Split indexes a request's encoding as received, before anything decodes
// it, and splits it by trace ID on the ring as it is now: the
// trace_router receiver's path. Nothing is sent until SendAll.
func (r *router) Split(req []byte) (traceroute.Split, error) {
	sp := r.newSplit()
	if err := sp.idx.Parse(req); err != nil {
		sp.release()
		return nil, traceroute.ErrNotIndexed
	}
	switch err := sp.split(context.Background()); {
	case errors.Is(err, traceroute.ErrNoRoute):
		return nil, err
	case err != nil:
		// A trace_id of another length than 16: decoding says what it is.
		return nil, traceroute.ErrNotIndexed
	}
	return sp, nil
}

// split is one request, indexed, and its spans per sampler of the ring
// it was split on; it holds a pooled index until SendAll (or a failed split)
// releases it.
type split struct {
	r     *router
	idx   *otlpwire.Index
	rt    *routes
	parts parts
}

func (r *router) newSplit() *split {
	return &split{r: r, idx: r.indexes.Get().(*otlpwire.Index)}
}

func (sp *split) release() {
	sp.idx.Reset()
	sp.r.indexes.Put(sp.idx)
	sp.idx = nil
}

// split links each span into its sampler's chain; on an error the index
// is released and nothing is sent.
func (sp *split) split(ctx context.Context) error {
	sp.rt = sp.r.routes.Load()
	if len(sp.rt.backends) == 0 {
		sp.release()
		return traceroute.ErrNoRoute
	}
	var err error
	if sp.parts, err = splitIndex(sp.idx, sp.rt.ring); err != nil {
		sp.release()
		return err
	}
	if sp.parts.zero > 0 {
		// No trace to route by: dropped, and counted, as the samplers would.
		sp.r.tel.InvalidSpans.Add(ctx, int64(sp.parts.zero), sp.r.invalid[invalidZeroTraceID])
	}
	return nil
}

// Spans is how many spans the parts hold.
func (sp *split) Spans() int {
	n := 0
	for _, c := range sp.parts.spans {
		n += c
	}
	return n
}

// Dropped is how many spans had a zero trace ID.
func (sp *split) Dropped() int { return sp.parts.zero }

// SendAll sends the splits' parts, each sampler one request holding its
// parts of all of them (the concatenation of encoded TracesData is one
// TracesData), the samplers at once, and releases the splits. Merging keeps
// what a sampler receives in few, large requests, as the exporter's queue
// merges them; splits made on different rings (the ring changed between
// them) are sent apart. A sampler held off after a failed send (holdOff)
// is not sent to: its parts are in Failed.
func (r *router) SendAll(ctx context.Context, splits []traceroute.Split) traceroute.Outcome {
	return r.sendAll(ctx, splits, true)
}

func (r *router) sendAll(ctx context.Context, splits []traceroute.Split, holding bool) traceroute.Outcome {
	var out traceroute.Outcome
	var errs []error
	for len(splits) > 0 {
		rt := splits[0].(*split).rt
		group, rest := splits[:0:0], splits[:0:0]
		for _, s := range splits {
			if s.(*split).rt == rt {
				group = append(group, s)
			} else {
				rest = append(rest, s)
			}
		}
		o := r.sendGroup(ctx, rt, group, holding)
		out.Sent += o.Sent
		if o.Err != nil {
			errs = append(errs, o.Err)
			if out.Failed == (ptrace.Traces{}) {
				out.Failed = o.Failed
			} else {
				o.Failed.ResourceSpans().MoveAndAppendTo(out.Failed.ResourceSpans())
			}
		}
		splits = rest
	}
	out.Err = errors.Join(errs...)
	return out
}

// sendGroup sends splits made on one ring: one request per sampler;
// holding: skip samplers held off, and hold off the ones that fail.
func (r *router) sendGroup(ctx context.Context, rt *routes, group []traceroute.Split, holding bool) traceroute.Outcome {
	defer func() {
		for _, s := range group {
			s.(*split).release()
		}
	}()
	var (
		mu   sync.Mutex
		out  traceroute.Outcome
		errs []error
		wg   sync.WaitGroup
	)
	sendPart := func(e int) {
		b := rt.backends[e]
		bp := r.buffers.Get().(*[]byte)
		buf, spans := (*bp)[:0], 0
		for _, s := range group {
			sp := s.(*split)
			if first := sp.parts.first[e]; first >= 0 {
				buf = sp.idx.AppendEncoding(buf, first)
				spans += sp.parts.spans[e]
			}
		}
		var err error
		if holding && time.Now().UnixNano() < b.heldUntil.Load() {
			err = errHeldOff
		} else if err = r.send(ctx, b, buf); err != nil {
			r.tel.SendFailed.Add(ctx, int64(spans), b.attrs)
			if holding {
				b.heldUntil.Store(time.Now().Add(holdOff).UnixNano())
			}
		}
		mu.Lock()
		if err != nil {
			errs = append(errs, fmt.Errorf("sampler %s: %w", b.endpoint, err))
			out.Failed = r.giveBack(out.Failed, buf)
		} else {
			out.Sent += spans
			r.tel.Spans.Add(ctx, int64(spans), b.attrs)
			r.tel.Bytes.Add(ctx, int64(len(buf)), b.attrs)
		}
		mu.Unlock()
		*bp = buf[:0]
		r.buffers.Put(bp)
	}
	last := -1
	for e := range rt.backends {
		has := false
		for _, s := range group {
			has = has || s.(*split).parts.first[e] >= 0
		}
		if !has {
			continue
		}
		if last >= 0 {
			wg.Add(1)
			go func(e int) {
				defer wg.Done()
				sendPart(e)
			}(last)
		}
		last = e
	}
	if last >= 0 {
		sendPart(last)
	}
	wg.Wait()
	if len(errs) > 0 {
		out.Err = errors.Join(errs...)
		r.tel.Rerouted.Add(ctx, int64(out.Failed.SpanCount()))
	}
	return out
}

// giveBack adds a part a sampler did not take to what goes back to the
// queue (decoded: the queue holds pdata).
func (r *router) giveBack(failed ptrace.Traces, part []byte) ptrace.Traces {
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(part)
	if err != nil {
		// It was cut from pdata's own encoding: cannot happen.
		r.logger.Error("cannot decode a part to return to the queue", zap.Error(err))
		return failed
	}
	if failed == (ptrace.Traces{}) {
		return td
	}
	td.ResourceSpans().MoveAndAppendTo(failed.ResourceSpans())
	return failed
}

func (r *router) capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// parts are a request's spans per ring member: the first of each member's
// chain in the index (-1: none) and how many; zero counts the spans with a
// zero trace ID, in no part.
type parts struct {
	first []int32
	spans []int
	zero  int
}

// splitIndex links each span of the indexed request into the chain of the
// ring member its trace ID belongs to, reading trace IDs from the encoding;
// idx.AppendEncoding(first[e]) is then member e's request. A ResourceSpans
// whose spans all go to one member is copied as one record.
func splitIndex(idx *otlpwire.Index, rg *ring.Ring) (parts, error) {
	n := rg.Size()
	p := parts{first: make([]int32, n), spans: make([]int, n)}
	last := make([]int32, n)
	for i := range p.first {
		p.first[i], last[i] = -1, -1
	}
	for i := 0; i < idx.ResourceSpans(); i++ {
		firstSS, numSS := idx.ScopeSpans(i)
		one, owner := true, -1
		for j := firstSS; j < firstSS+numSS; j++ {
			at, numSpans := idx.Spans(j)
			if numSpans == 0 {
				one = false // copied whole, it would carry an empty scope
			}
			for s := at; s < at+numSpans; s++ {
				id, err := idx.TraceID(s)
				if err != nil {
					return p, err
				}
				if id == ([16]byte{}) {
					p.zero++
					one = false
					continue
				}
				e := rg.OwnerIndex(id)
				if owner >= 0 && e != owner {
					one = false
				}
				owner = e
				if last[e] < 0 {
					p.first[e] = int32(s)
				} else {
					idx.Link(last[e], int32(s))
				}
				last[e] = int32(s)
				p.spans[e]++
			}
		}
		idx.SetWhole(i, one && owner >= 0)
	}
	return p, nil
}
