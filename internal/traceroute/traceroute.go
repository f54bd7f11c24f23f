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
// or a TracesData: the same encoding) to the samplers.
type Router interface {
	// Split indexes req and splits it by trace ID on the ring as it is
	// now; nothing is sent yet. An error means nothing will be
	// (ErrNotIndexed, ErrNoRoute): the caller decodes req and sends it
	// through the pipeline. req must stay unchanged until it is sent.
	Split(req []byte) (Split, error)
	// SendAll sends the parts of splits this router made, each sampler
	// one request holding its parts of all of them, once; Sent + the spans
	// of Failed is the splits' Spans().
	SendAll(ctx context.Context, splits []Split) Outcome
}

// Split is a request split by trace ID, waiting to be sent.
type Split interface {
	// Spans is how many spans its parts hold.
	Spans() int
	// Dropped is how many spans had no trace ID to route by (counted by
	// the router, in no part).
	Dropped() int
}

// Outcome is what became of a split's spans.
type Outcome struct {
	// Sent is how many spans samplers took.
	Sent int
	// Failed holds the spans whose sampler did not take them, decoded, for
	// the pipeline's queue to route again; the zero value when none.
	Failed ptrace.Traces
	// Err says why they failed.
	Err error
}

var (
	// ErrNotIndexed: the request is not laid out as the wire split reads
	// it (or is malformed); decoding it tells which.
	ErrNotIndexed = errors.New("the request's encoding cannot be split at the wire level")
	// ErrNoRoute: no sampler is known yet.
	ErrNoRoute = errors.New("no sampler to route to yet")
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
