// Package traceroute connects the trace_router receiver to the trace_router
// exporter it routes through. The exporter registers its router under its
// component ID when it starts; the receiver looks it up when it starts and
// hands it each request's encoding, before anything decodes it.
//
// It owns that registry and the contract between the two. It must not know
// rings, encodings, gRPC or pipelines: the exporter owns routing, the
// receiver owns serving.
package traceroute // import "github.com/otelcol-cost/otelcol-cost/internal/traceroute"

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Router routes an encoded OTLP trace request (an ExportTraceServiceRequest,
// or a TracesData: the same encoding) to the samplers. The receiver owns
// when and how often parts are sent (its rounds and per-sampler senders);
// the router owns what a part holds and how it reaches its sampler.
type Router interface {
	// Split checks req as the collector's decoder would, indexes it and
	// splits it by trace ID on the ring as it is now; nothing is sent
	// yet. ErrInvalid and ErrTooLarge: the request is refused, nothing
	// taken. ErrNotIndexed and ErrNoRoute: the caller decodes req and
	// sends it through the pipeline. req must stay unchanged until the
	// split is encoded.
	Split(req []byte, maxRecords int) (Split, error)
	// Encode cuts the splits' spans into requests to their samplers,
	// each at most the samplers' request size, and releases the splits:
	// their requests' bytes are no longer read.
	Encode(splits []Split) []*Part
	// Send sends part to its sampler once; Rejected counts the spans the
	// sampler's answer reported rejected (partial success: not to be
	// sent again).
	Send(ctx context.Context, part *Part) SendResult
	// GiveBack decodes a part its sampler did not take, for the pipeline
	// (whose queue routes it again). A part that does not decode whole is
	// decoded per original request: Lost counts the spans of those that
	// do not decode.
	GiveBack(part *Part) (td ptrace.Traces, lost int)
	// Recycle lets the router reuse a part's buffer: only once the
	// transport is done with it (after a send that was answered).
	Recycle(part *Part)
	// MetadataKeys are the client metadata keys Send sends on with a
	// part, from its context: requests whose values differ must not share
	// a part.
	MetadataKeys() []string
}

// Split is a request split by trace ID, waiting to be encoded.
type Split interface {
	// Spans is how many spans its parts hold.
	Spans() int
	// Dropped is how many spans had no trace ID to route by (counted by
	// the router, in no part).
	Dropped() int
	// MemoryBytes is what its index holds besides the request's bytes.
	MemoryBytes() int
}

// Part is one request to one sampler.
type Part struct {
	// Sampler is the endpoint it goes to.
	Sampler string
	// Bytes is its encoding.
	Bytes []byte
	// Spans is how many spans it holds.
	Spans int
	// Ends are where each original request's records end in Bytes.
	Ends []int
	// Backend is the router's handle on the sampler's connection.
	Backend any
}

// SendResult is what became of one send.
type SendResult struct {
	// Rejected is how many spans the sampler took but reported rejected.
	Rejected int
	// Err: the sampler did not take the part.
	Err error
}

var (
	// ErrNotIndexed: the request is not laid out as the wire split reads
	// it; decoding it tells whether it is OTLP.
	ErrNotIndexed = errors.New("the request's encoding cannot be split at the wire level")
	// ErrNoRoute: no sampler is known yet.
	ErrNoRoute = errors.New("no sampler to route to yet")
	// ErrInvalid: the collector's decoder would refuse the request.
	ErrInvalid = errors.New("not a valid OTLP trace request")
	// ErrTooLarge: the request is over a limit (records per request, a
	// span larger than a request to a sampler may be).
	ErrTooLarge = errors.New("request over the router's limits")
	// ErrNoSpans: the request holds no span.
	ErrNoSpans = errors.New("the request holds no span")
)

var registry = struct {
	sync.Mutex
	routers map[component.ID]Router
}{routers: map[component.ID]Router{}}

// Register makes r the router of exporter id until the returned function
// is called.
func Register(id component.ID, r Router) (unregister func()) {
	registry.Lock()
	defer registry.Unlock()
	registry.routers[id] = r
	return func() {
		registry.Lock()
		defer registry.Unlock()
		if registry.routers[id] == r {
			delete(registry.routers, id)
		}
	}
}

// Lookup is exporter id's router. The collector starts exporters before
// receivers, so a receiver finds a started exporter of its pipelines.
func Lookup(id component.ID) (Router, error) {
	registry.Lock()
	defer registry.Unlock()
	r, ok := registry.routers[id]
	if !ok {
		return nil, fmt.Errorf("no started trace_router exporter %q: it must be an exporter of a traces pipeline of this collector", id)
	}
	return r, nil
}
