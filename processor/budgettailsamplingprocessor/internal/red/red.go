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
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
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
	keys    map[string]*keyState
	other   *keyState
	// folded counts traces recorded as _other past max_keys.
	folded atomic.Int64
	// rolled is when Roll last smoothed the sums (its goroutine's).
	rolled time.Time
}

// keyState is one key's series and represented sums.
type keyState struct {
	attrs metric.MeasurementOption
	// made and kept are the weighted spans since the last Roll (float64
	// bits, added to with compare-and-swap).
	made, kept atomic.Uint64
	// smoothMade and smoothKept are the sums Roll smoothed (under mu).
	smoothMade, smoothKept float64
}

func addFloat(a *atomic.Uint64, v float64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func takeFloat(a *atomic.Uint64) float64 { return math.Float64frombits(a.Swap(0)) }

// New returns a recorder on tel's RED instruments.
func New(tel *metadata.Telemetry, maxKeys int) *Recorder {
	return &Recorder{tel: tel, maxKeys: maxKeys, keys: make(map[string]*keyState),
		other: &keyState{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String(keyAttr, Other)))}}
}

// stateOf is key's state, or _other's once max_keys are recorded.
func (r *Recorder) stateOf(key string) *keyState {
	r.mu.RLock()
	k, ok := r.keys[key]
	r.mu.RUnlock()
	if ok {
		return k
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.keys[key]; ok {
		return k
	}
	if len(r.keys) >= r.maxKeys {
		r.folded.Add(1)
		return r.other
	}
	k = &keyState{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String(keyAttr, key)))}
	r.keys[key] = k
	return k
}

// Weights are spans weighted by the th they arrived with (Made) and the th
// they left with (Kept, 0 when not kept). Spans the policy deliberately
// leaves out of the sample (drop rules) are weighed 0 both ways.
type Weights struct{ Made, Kept float64 }

// Weigh weighs spans that arrived with th arrived and, when kept, left with
// th left.
func Weigh(spans int, arrived sampling.Threshold, kept bool, left sampling.Threshold) Weights {
	w := Weights{Made: float64(spans) * arrived.AdjustedCount()}
	if kept {
		w.Kept = float64(spans) * left.AdjustedCount()
	}
	return w
}

func (k *keyState) represent(w Weights) {
	if w.Made != 0 {
		addFloat(&k.made, w.Made)
	}
	if w.Kept != 0 {
		addFloat(&k.kept, w.Kept)
	}
}

// Trace records one trace at its decision: a request, an error if any of
// its spans had one, its duration (the root span's, else the longest
// span's), its spans so far and their weights.
func (r *Recorder) Trace(key string, spans int, isErr bool, dur time.Duration, w Weights) {
	ctx := context.Background()
	k := r.stateOf(key)
	r.tel.REDRequests.Add(ctx, 1, k.attrs)
	if isErr {
		r.tel.REDErrors.Add(ctx, 1, k.attrs)
	}
	r.tel.REDSpans.Add(ctx, int64(spans), k.attrs)
	r.tel.REDDuration.Record(ctx, dur.Seconds(), k.attrs)
	k.represent(w)
}

// Spans records spans that followed their trace's decision, with their
// weights.
func (r *Recorder) Spans(key string, spans int, w Weights) {
	k := r.stateOf(key)
	r.tel.REDSpans.Add(context.Background(), int64(spans), k.attrs)
	k.represent(w)
}

// Kept adds the weight of spans counted before (as dropped) that left
// after all: a late error's trace recalled.
func (r *Recorder) Kept(key string, weight float64) {
	r.stateOf(key).represent(Weights{Kept: weight})
}

// Error records an error that arrived after its trace's decision (the
// caller records it once a trace).
func (r *Recorder) Error(key string) {
	r.tel.REDErrors.Add(context.Background(), 1, r.stateOf(key).attrs)
}

// Folded is how many traces were recorded as _other.
func (r *Recorder) Folded() int64 { return r.folded.Load() }

// representedWindow is the time constant represented_ratio is smoothed
// over: long enough that the noise of a small sample (a 2% budget keeps a
// few thousand baseline traces in it) stays well inside the alert's
// 0.9–1.1, short enough that a biased policy shows within its 15 minutes.
const representedWindow = 10 * time.Minute

// Roll folds the weights recorded since its last call into the smoothed
// sums, the older ones decayed by e^(−elapsed/representedWindow).
func (r *Recorder) Roll(now time.Time) {
	decay := 1.0
	if !r.rolled.IsZero() {
		decay = math.Exp(-now.Sub(r.rolled).Seconds() / representedWindow.Seconds())
	}
	r.rolled = now
	r.mu.Lock()
	defer r.mu.Unlock()
	roll := func(k *keyState) {
		k.smoothMade = k.smoothMade*decay + takeFloat(&k.made)
		k.smoothKept = k.smoothKept*decay + takeFloat(&k.kept)
	}
	for _, k := range r.keys {
		roll(k)
	}
	roll(r.other)
}

// minRepresented is the smoothed made weight below which a key's ratio is
// not reported: a key with no recent traffic has none.
const minRepresented = 1e-9

// ObserveRepresented reports represented_ratio: per key, and overall (no
// key attribute), as Roll last smoothed them.
func (r *Recorder) ObserveRepresented(o metric.Observer, g metric.Float64ObservableGauge) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var made, kept float64
	each := func(k *keyState) {
		if k.smoothMade > minRepresented {
			o.ObserveFloat64(g, k.smoothKept/k.smoothMade, k.attrs)
		}
		made += k.smoothMade
		kept += k.smoothKept
	}
	for _, k := range r.keys {
		each(k)
	}
	each(r.other)
	if made > minRepresented {
		o.ObserveFloat64(g, kept/made)
	}
}
