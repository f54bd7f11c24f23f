package relief // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Signal is a load level relief watches.
type Signal uint8

const (
	// SignalBufferTraces is the traces buffered over max_traces.
	SignalBufferTraces Signal = iota
	// SignalBufferBytes is the bytes buffered over max_buffered_bytes.
	SignalBufferBytes
	// SignalArrivalRate is the buffer the arrival rate would fill, at the
	// time traces have been spending in it (Little's law), over the bounds:
	// the learned capacity. It stays high while relief empties the buffer,
	// so relief does not flap while the overload lasts.
	SignalArrivalRate
	// SignalMemory is the Go heap over memory_limit_mib.
	SignalMemory
	NumSignals
)

// SignalNames are the level metric's signal values.
var SignalNames = [NumSignals]string{"buffer_traces", "buffer_bytes", "arrival_rate", "memory"}

// Reasons relief is active, beyond the signals: the state metric's values.
const (
	ReasonAlways = int32(NumSignals)
	ReasonNone   = ReasonAlways + 1
)

// ReasonNames are the state metric's reason values, by signal, then always
// and none.
var ReasonNames = [...]string{"buffer_traces", "buffer_bytes", "arrival_rate", "memory", "always", "none"}

// Levels are the signals' loads, as fractions of their bounds.
type Levels [NumSignals]float64

// Bounds are what the levels are fractions of.
type Bounds struct {
	MaxTraces int64
	MaxBytes  int64
	// MemoryLimit is the heap bound in bytes; 0: not watched.
	MemoryLimit uint64
}

// Arrivals is what arrived over an interval, as the glue measured it.
type Arrivals struct {
	// Volume is every fragment's, in budget units; ErrorVolume that of the
	// fragments carrying an error (kept whatever the threshold).
	Volume, ErrorVolume float64
	// NewTraces and NewBytes are what would have gone into the buffer: the
	// fragments of traces not yet decided.
	NewTraces, NewBytes int64
	// Decided traces left the buffer over the interval, after Resident
	// in it in total.
	Decided  int64
	Resident time.Duration
}

// window is how many measurements the rates are averaged over: SDKs
// export every 5 s, so a second sees only some of them.
const window = 5

// steps is the probability's resolution: 2^(1/steps) apart (≈ 9%), so
// that samplers whose arrival estimates differ a little keep the same
// threshold, and so the same traces; rounded to the nearest step, the
// kept volume stays within ±5% of the budget for it.
const steps = 8

// Controller is relief's state. Active, Probability and Reason are read on
// the hot path from any goroutine; Measure and Update run on one.
type Controller struct {
	cfg    Config
	bounds Bounds
	heap   heapReader

	// activation and deactivation are the levels in percent (float64
	// bits): the configuration's, or the policy file's (SetLevels).
	activation, deactivation atomic.Uint64

	active      atomic.Bool
	reason      atomic.Int32
	prob        atomic.Pointer[traceinfo.Probability]
	levels      [NumSignals]atomic.Uint64 // float64 bits
	activations atomic.Int64

	// The measuring goroutine's.
	changed   time.Time
	recent    []measured
	residence time.Duration // mean time in the buffer, smoothed; 0: none measured yet
}

type measured struct {
	a    Arrivals
	secs float64
}

// New starts relief off (on in mode always), keeping everything until
// arrivals have been measured.
func New(cfg Config, b Bounds, now time.Time) *Controller {
	if b.MemoryLimit == 0 {
		b.MemoryLimit = cfg.SoftLimitMiB() << 20
	}
	if b.MemoryLimit == 0 {
		if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
			b.MemoryLimit = uint64(l)
		}
	}
	c := &Controller{cfg: cfg, bounds: b, heap: newHeapReader()}
	c.SetLevels(cfg.ActivationLevel, cfg.DeactivationLevel)
	c.prob.Store(&traceinfo.Always)
	c.reason.Store(ReasonNone)
	if cfg.Mode == ModeAlways {
		c.changed = now
		c.active.Store(true)
		c.reason.Store(ReasonAlways)
		c.activations.Add(1)
	}
	return c
}

// Enabled reports whether relief can ever be active.
func (c *Controller) Enabled() bool { return c.cfg.Mode != ModeNever }

// Active reports whether new traces are decided at arrival.
func (c *Controller) Active() bool { return c.active.Load() }

// Probability is what a new trace's spans are kept with while active,
// conditional on what arrived (as the tail's probabilities are).
func (c *Controller) Probability() traceinfo.Probability { return *c.prob.Load() }

// Reason is why relief is active (a signal, or always), or ReasonNone.
func (c *Controller) Reason() int32 { return c.reason.Load() }

// Activations is how many times relief started.
func (c *Controller) Activations() int64 { return c.activations.Load() }

// Levels are the signals' last loads.
func (c *Controller) Levels() Levels {
	var l Levels
	for i := range l {
		l[i] = math.Float64frombits(c.levels[i].Load())
	}
	return l
}

// MemoryLimit is the heap bound the memory level is measured against (0:
// not watched).
func (c *Controller) MemoryLimit() uint64 { return c.bounds.MemoryLimit }

// gcHeadroom is the share of MemoryLimit the live heap is measured
// against. memory_limiter refuses on the heap after a GC it forces, which
// is the live heap plus what was allocated while that GC ran; the live
// heap relief reads is the last GC's. Under load they differ by a tenth
// or more: in TestE2EOverloadStressRelief memory_limiter measured 42 MiB
// while the live heap read 37.4 (0.93 of 40), 36 ms before relief would
// have started; one run in ten was refused.
const gcHeadroom = 0.85

// MemoryBound is what the memory level is a fraction of: MemoryLimit less
// the GC's headroom (gcHeadroom).
func (c *Controller) MemoryBound() float64 { return float64(c.bounds.MemoryLimit) * gcHeadroom }

// Measure folds an interval's arrivals in: the probability that keeps
// share (budget units per second) of them, and the arrival level.
func (c *Controller) Measure(a Arrivals, secs, share float64) {
	if secs <= 0 {
		return
	}
	if a.Decided > 0 {
		mean := a.Resident / time.Duration(a.Decided)
		if c.residence == 0 {
			c.residence = mean
		} else {
			c.residence = (c.residence + mean) / 2
		}
	}
	c.recent = append(c.recent, measured{a: a, secs: secs})
	if len(c.recent) > window {
		c.recent = c.recent[1:]
	}
	var sum Arrivals
	var total float64
	for _, m := range c.recent {
		sum.Volume += m.a.Volume
		sum.ErrorVolume += m.a.ErrorVolume
		sum.NewTraces += m.a.NewTraces
		sum.NewBytes += m.a.NewBytes
		total += m.secs
	}
	volume, errs := sum.Volume/total, sum.ErrorVolume/total
	p := KeepProbability(share, volume, errs)
	c.prob.Store(&p)
	var level float64
	if c.residence > 0 {
		r := c.residence.Seconds()
		if c.bounds.MaxTraces > 0 {
			level = float64(sum.NewTraces) / total * r / float64(c.bounds.MaxTraces)
		}
		if c.bounds.MaxBytes > 0 {
			level = max(level, float64(sum.NewBytes)/total*r/float64(c.bounds.MaxBytes))
		}
	}
	c.levels[SignalArrivalRate].Store(math.Float64bits(level))
}

// KeepProbability keeps share out of an arrival of volume per second, of
// which errors (all kept) take errs; rounded to steps per octave.
func KeepProbability(share, volume, errs float64) traceinfo.Probability {
	rest := volume - errs
	if rest <= 0 || share-errs >= rest {
		return traceinfo.Always
	}
	p := max(share-errs, 0) / rest
	if p <= 0 {
		return traceinfo.NewProbability(0)
	}
	q := math.Exp2(math.Round(steps*math.Log2(p)) / steps)
	return traceinfo.NewProbability(min(q, 1))
}

// SetLevels changes the activation and deactivation levels (in percent,
// validated as the configuration's) from the next Update.
func (c *Controller) SetLevels(activation, deactivation float64) {
	c.activation.Store(math.Float64bits(activation))
	c.deactivation.Store(math.Float64bits(deactivation))
}

// ActivationLevel is the level relief starts at, in percent.
func (c *Controller) ActivationLevel() float64 { return math.Float64frombits(c.activation.Load()) }

// DeactivationLevel is the level every load must be under for relief to
// stop, in percent.
func (c *Controller) DeactivationLevel() float64 { return math.Float64frombits(c.deactivation.Load()) }

// Update takes the buffer's fill (traces and bytes, as fractions of their
// bounds), reads the heap, and switches relief on or off; it reports
// whether it switched.
func (c *Controller) Update(now time.Time, bufferedTraces, bufferedBytes float64) bool {
	c.levels[SignalBufferTraces].Store(math.Float64bits(bufferedTraces))
	c.levels[SignalBufferBytes].Store(math.Float64bits(bufferedBytes))
	if c.bounds.MemoryLimit > 0 {
		c.levels[SignalMemory].Store(math.Float64bits(float64(c.heap.read()) / c.MemoryBound()))
	}
	if c.cfg.Mode != ModeMonitor {
		return false
	}
	levels := c.Levels()
	top := SignalBufferTraces
	for s := range levels {
		if levels[s] > levels[top] {
			top = Signal(s)
		}
	}
	highest := levels[top] * 100
	// The minimum times count from the last switch; before one there is
	// none to wait for.
	since := now.Sub(c.changed)
	if c.changed.IsZero() {
		since = time.Duration(math.MaxInt64)
	}
	activation, deactivation := c.ActivationLevel(), c.DeactivationLevel()
	switch active := c.active.Load(); {
	case !active && highest >= activation && since >= c.cfg.MinimumDeactivationDuration:
		c.reason.Store(int32(top))
		c.active.Store(true)
		c.activations.Add(1)
		c.changed = now
		return true
	case active && highest < deactivation && since >= c.cfg.MinimumActivationDuration:
		c.active.Store(false)
		c.reason.Store(ReasonNone)
		c.changed = now
		return true
	case active && highest >= deactivation:
		// Still loaded: say by what now.
		c.reason.Store(int32(top))
	}
	return false
}

// heapReader reads the live heap as the last garbage collection marked
// it, without stopping the world. Not the heap allocated (memory_limiter's
// MemStats.Alloc), which also counts garbage not yet collected: relief can
// only bring down what the buffer holds alive, and the Go memory limit
// (SetGoMemoryLimit) keeps the garbage under memory_limiter's soft limit.
type heapReader struct{ sample []metrics.Sample }

func newHeapReader() heapReader {
	return heapReader{sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

func (h heapReader) read() uint64 {
	metrics.Read(h.sample)
	if h.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return h.sample[0].Value.Uint64()
}

// SetGoMemoryLimit lowers the Go runtime's memory limit (GOMEMLIMIT) to the
// memory level's bound when it is higher, so that the garbage collector
// collects before the heap allocated reaches memory_limiter's soft limit:
// memory_limiter counts garbage, which relief cannot shed. It returns the
// limit before, to restore, and whether it changed it.
func (c *Controller) SetGoMemoryLimit() (previous int64, changed bool) {
	previous = debug.SetMemoryLimit(-1)
	if c.cfg.SoftLimitMiB() == 0 || c.cfg.Mode == ModeNever {
		return previous, false
	}
	want := int64(c.cfg.SoftLimitMiB() << 20)
	if want >= previous {
		return previous, false
	}
	debug.SetMemoryLimit(want)
	return previous, true
}

// HeapLimit is the heap the memory level is measured against:
// memory_limit_mib, else GOMEMLIMIT when set; 0 when neither is.
func HeapLimit(mib uint64) int64 {
	if mib > 0 {
		return int64(mib) << 20
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return 0
}
