package rare // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"

import (
	"fmt"
	"sync"
	"time"
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
// shard.
type Tracker struct {
	interval int64
	maxKeys  int
	mu       sync.Mutex
	last     map[string]int64 // key → interval number
}

// New returns a tracker holding at most maxKeys keys.
func New(interval time.Duration, maxKeys int) *Tracker {
	return &Tracker{interval: int64(interval), maxKeys: maxKeys, last: make(map[string]int64)}
}

// Due reports whether key has had no rare trace in the interval that holds
// now (Unix nanoseconds); if so, the caller keeps the trace it decides. With
// the table full of keys kept in this interval, a new key is not due (ok
// false): the caller counts it as folded.
func (t *Tracker) Due(key string, now int64) (due, ok bool) {
	n := now / t.interval
	t.mu.Lock()
	defer t.mu.Unlock()
	last, known := t.last[key]
	if known && last == n {
		return false, true
	}
	if !known && len(t.last) >= t.maxKeys && !t.evict(n) {
		return false, false
	}
	t.last[key] = n
	return true, true
}

// evict forgets the keys of earlier intervals (their next trace is due
// whether remembered or not); it reports whether room was made.
func (t *Tracker) evict(n int64) bool {
	for k, last := range t.last {
		if last != n {
			delete(t.last, k)
		}
	}
	return len(t.last) < t.maxKeys
}

// Len is how many keys the table holds.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.last)
}
