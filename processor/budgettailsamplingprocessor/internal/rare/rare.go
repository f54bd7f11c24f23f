package rare // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Config is rare's configuration.
type Config struct {
	// Interval: every fairness key decided within one has at least one
	// trace kept whole (0 = off). Intervals are aligned to the clock.
	Interval time.Duration `mapstructure:"interval"`
}

// Enabled reports whether rare keeps anything.
func (c Config) Enabled() bool { return c.Interval > 0 }

// Check reports invalid fields, named under rare. A trace is decided
// decision_wait after its first span at the latest, so a shorter interval
// would keep every trace of a key with fewer traces than that.
func (c Config) Check(decisionWait time.Duration) []error {
	switch {
	case c.Interval < 0:
		return []error{fmt.Errorf("rare.interval: must be ≥ 0 (0 = off), got %v", c.Interval)}
	case c.Interval > 0 && c.Interval < decisionWait:
		return []error{fmt.Errorf("rare.interval: must be 0 (off) or ≥ decision_wait (%v), got %v", decisionWait, c.Interval)}
	}
	return nil
}

// Tracker is the table of keys and the interval each last had a rare trace
// kept in. Intervals are aligned to the clock (Unix time / interval), so a
// key with traffic in every minute has a kept trace in every minute of a
// dashboard. One tracker for the whole processor: decisions of every shard
// ask it, so a key gets one rare trace per interval per sampler, not per
// shard. Its keys are spread over stripes so that the decision goroutines
// (one per core) rarely wait for one another.
type Tracker struct {
	// interval changes only with every stripe locked (SetInterval).
	interval atomic.Int64
	maxKeys  int64
	seed     maphash.Seed
	keys     atomic.Int64 // held by all stripes together
	stripes  [stripes]stripe
	// coverage counts, for the current and the last interval, the keys
	// seen and those with a trace kept.
	cmu      sync.Mutex
	coverage [2]intervalCoverage
	// short is whether the last policy thinned rare (WarnShortfall's).
	short bool
}

// WarnShortfall logs when rare traces start needing more of the budget
// than is left them (shortfall, a rate in the budget's unit, > 0; they are
// kept with probability), and when they fit again: rare's coverage gives
// way, not the weights. Called from one goroutine.
func (t *Tracker) WarnShortfall(logger *zap.Logger, probability, shortfall float64) {
	short := shortfall > 0
	if short == t.short {
		return
	}
	t.short = short
	if !short {
		logger.Info("rare.interval: the budget keeps the first trace of every key in each interval again")
		return
	}
	logger.Warn("rare.interval: the budget cannot keep the first trace of every key in each interval at the traffic seen; "+
		"rare traces are thinned (rare_probability) and some keys go without a kept trace (rare_coverage), th still weighs them right. "+
		"Raise the budget, lengthen rare.interval or use fewer baseline.keys",
		zap.Float64("rare_probability", probability), zap.Float64("shortfall_per_second", shortfall), zap.Int("keys", t.Len()))
}

type intervalCoverage struct{ n, seen, covered int64 }

const stripes = 32

type stripe struct {
	mu   sync.Mutex
	last map[string]keyIntervals
	_    [48]byte // a cache line each
}

// keyIntervals are the interval numbers a key was last seen in (its first
// trace decided: due) and last had a trace kept in.
type keyIntervals struct{ seen, kept int64 }

// New returns a tracker holding at most maxKeys keys.
func New(interval time.Duration, maxKeys int) *Tracker {
	t := &Tracker{maxKeys: int64(maxKeys), seed: maphash.MakeSeed()}
	t.interval.Store(int64(interval))
	for i := range t.stripes {
		t.stripes[i].last = make(map[string]keyIntervals)
	}
	return t
}

// Due reports whether key has had no rare trace in the interval that holds
// now (Unix nanoseconds); if so, the caller keeps the trace it decides. With
// the table full of keys kept in this interval, a new key is not due (ok
// false): the caller counts it as folded.
func (t *Tracker) Due(key string, now int64) (due, ok bool) {
	st := &t.stripes[maphash.String(t.seed, key)%stripes]
	st.mu.Lock()
	n := now / t.interval.Load()
	last, known := st.last[key]
	if known && last.seen == n {
		st.mu.Unlock()
		return false, true
	}
	if !known && !t.reserve() {
		// Full: evict with no stripe held (it locks them all), then try
		// again; another decision may have added the key meanwhile.
		st.mu.Unlock()
		t.evict(n)
		st.mu.Lock()
		if n != now/t.interval.Load() {
			// The interval changed meanwhile: ask again.
			st.mu.Unlock()
			return t.Due(key, now)
		}
		if last, known = st.last[key]; known && last.seen == n {
			st.mu.Unlock()
			return false, true
		}
		if !known && !t.reserve() {
			st.mu.Unlock()
			return false, false
		}
	}
	last.seen = n
	st.last[key] = last
	st.mu.Unlock()
	t.count(n, func(c *intervalCoverage) { c.seen++ })
	return true, true
}

// Kept notes that a trace of key was kept at now (Unix nanoseconds), for
// coverage. A key Due did not track is not counted.
func (t *Tracker) Kept(key string, now int64) {
	st := &t.stripes[maphash.String(t.seed, key)%stripes]
	st.mu.Lock()
	n := now / t.interval.Load()
	last, known := st.last[key]
	first := known && last.seen == n && last.kept != n
	if first {
		last.kept = n
		st.last[key] = last
	}
	st.mu.Unlock()
	if first {
		t.count(n, func(c *intervalCoverage) { c.covered++ })
	}
}

func (t *Tracker) count(n int64, add func(*intervalCoverage)) {
	t.cmu.Lock()
	c := &t.coverage[n&1]
	if c.n != n {
		*c = intervalCoverage{n: n}
	}
	add(c)
	t.cmu.Unlock()
}

// Coverage is the share of the keys seen in the last whole interval before
// now that had a trace kept in it; ok is false when none was seen in it.
func (t *Tracker) Coverage(now int64) (share float64, ok bool) {
	n := now/t.interval.Load() - 1
	t.cmu.Lock()
	c := t.coverage[n&1]
	t.cmu.Unlock()
	if c.n != n || c.seen == 0 {
		return 0, false
	}
	return float64(c.covered) / float64(c.seen), true
}

// SetInterval changes the interval. Each key's intervals are carried to
// the new interval that holds their start, so a key already kept in the
// running interval is due again only if the new one is shorter and starts
// after its trace; coverage starts over.
func (t *Tracker) SetInterval(d time.Duration) {
	for i := range t.stripes {
		t.stripes[i].mu.Lock()
	}
	old, next := t.interval.Load(), int64(d)
	if old != next {
		for i := range t.stripes {
			for k, last := range t.stripes[i].last {
				t.stripes[i].last[k] = keyIntervals{seen: last.seen * old / next, kept: last.kept * old / next}
			}
		}
		t.interval.Store(next)
		t.cmu.Lock()
		t.coverage = [2]intervalCoverage{}
		t.cmu.Unlock()
	}
	for i := range t.stripes {
		t.stripes[i].mu.Unlock()
	}
}

// Interval is the interval now.
func (t *Tracker) Interval() time.Duration { return time.Duration(t.interval.Load()) }

// reserve counts a new key in, unless the table is full.
func (t *Tracker) reserve() bool {
	if t.keys.Add(1) > t.maxKeys {
		t.keys.Add(-1)
		return false
	}
	return true
}

// evict forgets the keys of earlier intervals (their next trace is due
// whether remembered or not). Only a full table gets here.
func (t *Tracker) evict(n int64) {
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		for k, last := range st.last {
			if last.seen != n {
				delete(st.last, k)
				t.keys.Add(-1)
			}
		}
		st.mu.Unlock()
	}
}

// Len is how many keys the table holds.
func (t *Tracker) Len() int { return int(t.keys.Load()) }
