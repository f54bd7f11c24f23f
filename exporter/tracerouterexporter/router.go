package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"

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
}

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

// push routes td: the exporter's path, after the pipeline decoded it. Its
// parts go to their samplers at once; what a sampler did not take goes
// back to the queue, whose retries (retry_on_failure) pace it.
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
	parts := r.Encode([]traceroute.Split{sp})
	results := make([]traceroute.SendResult, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.Send(ctx, p)
		}()
	}
	wg.Wait()
	var failed ptrace.Traces
	var errs []error
	for i, p := range parts {
		if results[i].Err == nil {
			r.Recycle(p)
			continue
		}
		errs = append(errs, fmt.Errorf("sampler %s: %w", p.Sampler, results[i].Err))
		// A part cut from pdata's own encoding always decodes.
		back, _ := r.GiveBack(p)
		if failed == (ptrace.Traces{}) {
			failed = back
		} else {
			back.ResourceSpans().MoveAndAppendTo(failed.ResourceSpans())
		}
	}
	if len(errs) == 0 {
		return nil
	}
	r.tel.Rerouted.Add(ctx, int64(failed.SpanCount()))
	return consumererror.NewTraces(errors.Join(errs...), failed)
}

// Split checks a request's encoding as received as pdata's decoder would,
// indexes it before anything decodes it, and splits it by trace ID on the
// ring as it is now: the trace_router receiver's path. Nothing is sent
// until Encode and Send.
func (r *router) Split(req []byte, maxRecords int) (traceroute.Split, error) {
	sp := r.newSplit()
	lim := otlpwire.Limits{MaxRecords: maxRecords, MaxSpanBytes: r.cfg.Protocol.OTLP.MaxRequestBytes}
	switch err := sp.idx.ParseChecked(req, lim); {
	case errors.Is(err, otlpwire.ErrInvalid):
		sp.release()
		return nil, fmt.Errorf("%w: %w", traceroute.ErrInvalid, err)
	case errors.Is(err, otlpwire.ErrTooLarge):
		sp.release()
		return nil, fmt.Errorf("%w: %w", traceroute.ErrTooLarge, err)
	case err != nil:
		sp.release()
		return nil, traceroute.ErrNotIndexed
	}
	if sp.idx.NumSpans() == 0 {
		sp.release()
		return nil, traceroute.ErrNoSpans
	}
	switch err := sp.split(context.Background()); {
	case errors.Is(err, traceroute.ErrNoRoute):
		return nil, err
	case errors.Is(err, errPartTooLarge):
		return nil, fmt.Errorf("%w: %w", traceroute.ErrTooLarge, err)
	case err != nil:
		return nil, traceroute.ErrNotIndexed
	}
	return sp, nil
}

// split is one request, indexed, and its spans per sampler of the ring
// it was split on; it holds a pooled index until Encode (or a failed
// split) releases it.
type split struct {
	r     *router
	idx   *otlpwire.Index
	rt    *routes
	parts parts
}

func (r *router) newSplit() *split {
	return &split{r: r, idx: r.indexes.Get().(*otlpwire.Index)}
}

// maxPooledIndex is the largest index kept for reuse: one built for a
// rare huge request is let go rather than held by the pool.
const maxPooledIndex = 4 << 20

func (sp *split) release() {
	sp.idx.Reset()
	if sp.idx.MemoryBytes() <= maxPooledIndex {
		sp.r.indexes.Put(sp.idx)
	}
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
	if sp.parts, err = splitIndex(sp.idx, sp.rt.ring, sp.r.cfg.Protocol.OTLP.MaxRequestBytes); err != nil {
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

// MemoryBytes is what the split holds besides the request's bytes.
func (sp *split) MemoryBytes() int { return sp.idx.MemoryBytes() + 16*len(sp.parts.first) }

// Encode assembles the splits' parts: for each sampler, its records of
// every split (encoded TracesData concatenate into one), cut into
// requests of at most max_request_bytes, and releases the splits. Splits
// made on different rings (the ring changed between them) go apart.
func (r *router) Encode(splits []traceroute.Split) []*traceroute.Part {
	var out []*traceroute.Part
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
		out = r.encodeGroup(out, rt, group)
		splits = rest
	}
	return out
}

func (r *router) encodeGroup(out []*traceroute.Part, rt *routes, group []traceroute.Split) []*traceroute.Part {
	maxBytes := r.cfg.Protocol.OTLP.MaxRequestBytes
	total := make([]int, len(group)) // each split's spans, summed once
	for i, s := range group {
		total[i] = s.Spans()
	}
	for e, b := range rt.backends {
		// Room for the member's share of every request, estimated by
		// spans, so that appending rarely grows the buffer.
		estimate := 0
		for i, s := range group {
			sp := s.(*split)
			if n := total[i]; n > 0 && sp.parts.spans[e] > 0 {
				estimate += len(sp.idx.Bytes())*sp.parts.spans[e]/n + 256
			}
		}
		var p *traceroute.Part
		for _, s := range group {
			sp := s.(*split)
			first := sp.parts.first[e]
			if first < 0 {
				continue
			}
			firsts := []int32{first}
			if len(sp.idx.Bytes()) > maxBytes {
				firsts = sp.idx.Cut(first, maxBytes)
			}
			for _, f := range firsts {
				// A part of a request is at most the request: sized
				// exactly only when that bound could overflow.
				size := len(sp.idx.Bytes())
				if p != nil && len(p.Bytes)+size > maxBytes {
					size = sp.idx.EncodedSize(f)
				}
				if p != nil && len(p.Bytes)+size > maxBytes {
					out = append(out, p)
					p = nil
				}
				if p == nil {
					p = &traceroute.Part{Sampler: b.endpoint, Backend: b, Bytes: r.buffer(min(max(estimate, size), maxBytes))}
				}
				p.Bytes = sp.idx.AppendEncoding(p.Bytes, f)
				if len(firsts) == 1 {
					p.Spans += sp.parts.spans[e] // counted when split
				} else {
					p.Spans += sp.idx.ChainSpans(f)
				}
				p.Ends = append(p.Ends, len(p.Bytes))
			}
		}
		if p != nil {
			out = append(out, p)
		}
	}
	for _, s := range group {
		s.(*split).release()
	}
	return out
}

// buffer is an empty buffer of room for size bytes, from the pool when
// one is there.
func (r *router) buffer(size int) []byte {
	if bp, ok := r.buffers.Get().(*[]byte); ok && bp != nil {
		return slices.Grow((*bp)[:0], size)
	}
	return make([]byte, 0, size)
}

// Recycle returns a part's buffer to the pool. Only after a send that was
// answered: after a failed or timed-out one the transport may still be
// writing it.
func (r *router) Recycle(p *traceroute.Part) {
	if cap(p.Bytes) <= r.cfg.Protocol.OTLP.MaxRequestBytes {
		b := p.Bytes[:0]
		r.buffers.Put(&b)
	}
	p.Bytes = nil
}

// MetadataKeys are the client metadata keys sent on with each part
// (protocol.otlp.forward_metadata).
func (r *router) MetadataKeys() []string { return r.cfg.Protocol.OTLP.ForwardMetadata }

// Send sends one part to its sampler and counts it.
func (r *router) Send(ctx context.Context, p *traceroute.Part) traceroute.SendResult {
	b := p.Backend.(*backend)
	rejected, err := r.send(ctx, b, p.Bytes)
	if err != nil {
		r.tel.SendFailed.Add(ctx, int64(p.Spans), b.attrs)
		return traceroute.SendResult{Err: err}
	}
	if rejected > 0 {
		r.tel.Rejected.Add(ctx, int64(rejected), b.attrs)
	}
	r.tel.Spans.Add(ctx, int64(p.Spans-rejected), b.attrs)
	r.tel.Bytes.Add(ctx, int64(len(p.Bytes)), b.attrs)
	return traceroute.SendResult{Rejected: rejected}
}

// GiveBack decodes a part a sampler did not take, for the pipeline. A
// part cut from requests the check took always decodes; should it not,
// each original request's records are decoded apart, so that only a bad
// request is lost, and counted.
func (r *router) GiveBack(p *traceroute.Part) (ptrace.Traces, int) {
	var u ptrace.ProtoUnmarshaler
	if td, err := u.UnmarshalTraces(p.Bytes); err == nil {
		return td, 0
	}
	out, lost, from := ptrace.NewTraces(), 0, 0
	for _, end := range p.Ends {
		td, err := u.UnmarshalTraces(p.Bytes[from:end])
		if err != nil {
			n := countSpans(p.Bytes[from:end])
			lost += n
			r.tel.Undecodable.Add(context.Background(), int64(n))
			r.logger.Error("a part of one request a sampler did not take does not decode; its spans are dropped", zap.Int("spans", n), zap.Error(err))
		} else {
			td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		}
		from = end
	}
	return out, lost
}

// countSpans counts the span records of an encoding that may not decode.
func countSpans(b []byte) int {
	var idx otlpwire.Index
	if idx.Parse(b) != nil {
		return 0
	}
	return idx.NumSpans()
}

func (r *router) capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// errPartTooLarge: a span with its resource and scope is larger than a
// request to a sampler may be.
var errPartTooLarge = errors.New("a span with its resource and scope is larger than max_request_bytes")

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
func splitIndex(idx *otlpwire.Index, rg *ring.Ring, maxPartBytes int) (parts, error) {
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
			if numSpans > 0 && idx.LargestPart(j) > maxPartBytes {
				return p, errPartTooLarge
			}
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
