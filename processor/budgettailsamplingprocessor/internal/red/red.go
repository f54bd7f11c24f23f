// Package red records rate, errors and duration (RED) per fairness key from
// every trace the sampler decides, kept or dropped, so that dashboards and
// SLO alerts read the whole traffic whatever the budget keeps.
//
// It owns the per-key attribute sets and their bound (red_metrics.max_keys:
// past it, keys are recorded as _other). It must not know spans, the buffer
// or how a trace was decided: the glue calls Trace once per trace, at its
// decision, and Spans for spans that follow one (late fragments), so a
// trace is counted once in the tier whichever sampler decides it and
// however its spans travelled (handoff passes traces on undecided).
package red // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// Config is red_metrics.
type Config struct {
	// Enabled records RED metrics.
	Enabled bool `mapstructure:"enabled"`
	// MaxKeys bounds the keys recorded (each a set of series); the rest are
	// recorded as _other.
	MaxKeys int `mapstructure:"max_keys"`
}

// Check reports invalid fields, named under red_metrics.
func (c Config) Check() []error {
	if c.Enabled && c.MaxKeys < 1 {
		return []error{fmt.Errorf("red_metrics.max_keys: must be ≥ 1, got %d", c.MaxKeys)}
	}
	return nil
}

// Other is the key recorded past max_keys.
const Other = "_other"

// keyAttr is the series' label: the fairness key (the service name by
// default, else the baseline.keys values joined by |).
const keyAttr = "key"

// Recorder records RED metrics; safe for concurrent use.
type Recorder struct {
	tel     *metadata.Telemetry
	maxKeys int
	mu      sync.RWMutex
	attrs   map[string]metric.MeasurementOption
	other   metric.MeasurementOption
	// folded counts traces recorded as _other past max_keys.
	folded atomic.Int64
}

// New returns a recorder on tel's RED instruments.
func New(tel *metadata.Telemetry, maxKeys int) *Recorder {
	return &Recorder{tel: tel, maxKeys: maxKeys, attrs: make(map[string]metric.MeasurementOption),
		other: metric.WithAttributeSet(attribute.NewSet(attribute.String(keyAttr, Other)))}
}

// attrsOf is key's attribute set, or _other's once max_keys are recorded.
func (r *Recorder) attrsOf(key string) metric.MeasurementOption {
	r.mu.RLock()
	a, ok := r.attrs[key]
	r.mu.RUnlock()
	if ok {
		return a
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.attrs[key]; ok {
		return a
	}
	if len(r.attrs) >= r.maxKeys {
		r.folded.Add(1)
		return r.other
	}
	a = metric.WithAttributeSet(attribute.NewSet(attribute.String(keyAttr, key)))
	r.attrs[key] = a
	return a
}

// Trace records one trace at its decision: a request, an error if any of
// its spans had one, its duration (the root span's, else the longest
// span's) and its spans so far.
func (r *Recorder) Trace(key string, spans int, isErr bool, dur time.Duration) {
	ctx := context.Background()
	a := r.attrsOf(key)
	r.tel.REDRequests.Add(ctx, 1, a)
	if isErr {
		r.tel.REDErrors.Add(ctx, 1, a)
	}
	r.tel.REDSpans.Add(ctx, int64(spans), a)
	r.tel.REDDuration.Record(ctx, dur.Seconds(), a)
}

// Spans records spans that followed their trace's decision.
func (r *Recorder) Spans(key string, spans int) {
	r.tel.REDSpans.Add(context.Background(), int64(spans), r.attrsOf(key))
}

// Error records an error that arrived after its trace's decision (the
// caller records it once a trace).
func (r *Recorder) Error(key string) {
	r.tel.REDErrors.Add(context.Background(), 1, r.attrsOf(key))
}

// Folded is how many traces were recorded as _other.
func (r *Recorder) Folded() int64 { return r.folded.Load() }
