// Package outliers learns trace durations per group (service, root
// operation, or any group_by keys) with DDSketch and says whether a trace is
// a latency outlier for its group: strictly above the learned quantile's
// bin, a share of that bin when durations are quantized, or in a slow mode
// far above the body of the distribution.
//
// It owns the groups, their sketches and their bound (max_groups). It must
// not know budgets, probabilities or how a trace's group key is built.
package outliers // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/outliers"

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

const (
	// OverflowGroup takes every group past max_groups.
	OverflowGroup = "_overflow"
	// recomputeEvery is how many observations a group takes between
	// recomputations of its rule (a merge of two sketches and a pass over
	// the bins).
	recomputeEvery = 16
	// sketchBins bounds a sketch's memory (8 bytes a bin); with 1% accuracy
	// 2048 bins span 1µs to beyond an hour before the lowest bins collapse.
	sketchBins = 2048
	// A slow mode is traffic far above the body of the distribution: slower
	// than slowModeFactor × the group's slowModeBodyQuantile. Up to
	// 1 − slowModeBodyQuantile of a group can be a slow mode; a larger one is
	// a mode of its own, and only its slowest traces are outliers.
	slowModeBodyQuantile = 0.9
	slowModeFactor       = 4.0
)

// Groups learns trace durations per group with DDSketch (mergeable,
// bounded relative error, bounded bins). Each group keeps two sketches,
// swapped every half window, so the rule follows drift: it always reflects
// between half a window and a full window of traffic.
//
// Groups are spread over stripes by key, each with its own lock, so that
// decisions on different cores rarely wait for each other: a group is only
// ever touched under its stripe's lock.
type Groups struct {
	cfg     Config
	seed    maphash.Seed
	stripes [groupStripes]groupStripe
	// count is the number of groups over all stripes (max_groups bounds it).
	count atomic.Int64
	// lastSweep is when idle groups were last evicted, in Unix nanoseconds
	// (0: never).
	lastSweep atomic.Int64
}

// groupStripes: enough that many cores seldom hit the same stripe.
const groupStripes = 64

type groupStripe struct {
	mu     sync.Mutex
	groups map[string]*group
	// merged is scratch for recomputing a rule: prev and cur merged
	// without allocating a sketch each time.
	merged *ddsketch.DDSketch
	_      [64]byte // keeps neighbouring stripes' locks off one cache line
}

type group struct {
	cur, prev *ddsketch.DDSketch
	rotatedAt time.Time
	lastSeen  time.Time
	rule      outlierRule
	pending   int
}

// outlierRule is a group's definition of an outlier, recomputed from its
// sketches. A trace is an outlier when it is
//   - in a bin above the one holding the quantile (strictly slower than it,
//     whatever the sketch's error), or
//   - in the quantile's own bin, with probability tieShare: with quantized
//     durations that bin can hold far more than 1 − quantile of the traffic,
//     and only enough of it to make up 1 − quantile is taken, or
//   - slower than slowAbove, the slow-mode threshold.
type outlierRule struct {
	quantileBin int
	tieShare    float64
	slowAbove   float64 // seconds
}

// New returns no groups yet.
func New(cfg Config) *Groups {
	o := &Groups{cfg: cfg, seed: maphash.MakeSeed()}
	for i := range o.stripes {
		o.stripes[i].groups = make(map[string]*group)
	}
	return o
}

func (o *Groups) newSketch() *ddsketch.DDSketch {
	s, _ := ddsketch.LogCollapsingLowestDenseDDSketch(o.cfg.RelativeAccuracy, sketchBins)
	return s
}

func (o *Groups) newGroup(now time.Time) *group {
	return &group{cur: o.newSketch(), prev: o.newSketch(), rotatedAt: now}
}

func (o *Groups) stripe(key string) *groupStripe {
	return &o.stripes[maphash.String(o.seed, key)%groupStripes]
}

// TieBreak is a uniform draw in [0, 1) from the trace ID's high bytes, which
// OTEP 235 sampling does not read: whether a trace in the quantile's bin is
// an outlier must not be correlated with whether the baseline keeps it, or
// the weights of the kept traces would no longer add up to the traffic.
func TieBreak(id pcommon.TraceID) float64 {
	return float64(binary.BigEndian.Uint64(id[:8])>>11) / (1 << 53)
}

// Observe reports whether a trace of this duration is an outlier for its
// group (judged before it is learned), then learns it. u is the trace's
// TieBreak.
func (o *Groups) Observe(key string, dur time.Duration, u float64, now time.Time) bool {
	secs := dur.Seconds()
	st, g := o.lockGroup(key, now)
	defer st.mu.Unlock()
	g.lastSeen = now
	if now.Sub(g.rotatedAt) >= o.cfg.Window/2 {
		g.prev, g.cur = g.cur, g.prev
		g.cur.Clear()
		g.rotatedAt = now
		g.pending = recomputeEvery
	}
	var outlier bool
	if g.prev.GetCount()+g.cur.GetCount() < float64(o.cfg.MinObservations) {
		outlier = dur > o.cfg.FallbackLatencyThreshold
	} else {
		if g.pending >= recomputeEvery {
			o.recompute(st, g)
		}
		outlier = g.rule.matches(g.cur, secs, u)
	}
	if secs > 0 {
		_ = g.cur.Add(secs)
	}
	g.pending++
	return outlier
}

// lockGroup returns key's group — created while max_groups allows, else the
// overflow group — with its stripe locked; the caller unlocks st.mu.
func (o *Groups) lockGroup(key string, now time.Time) (st *groupStripe, g *group) {
	st = o.stripe(key)
	st.mu.Lock()
	if g = st.groups[key]; g != nil {
		return st, g
	}
	if !o.reserve() {
		// Evicting walks every stripe, one lock at a time: never two at once.
		st.mu.Unlock()
		o.evictIdle(now)
		st.mu.Lock()
		if g = st.groups[key]; g != nil {
			return st, g
		}
		if !o.reserve() {
			st.mu.Unlock()
			key = OverflowGroup
			st = o.stripe(key)
			st.mu.Lock()
			if g = st.groups[key]; g != nil {
				return st, g
			}
			o.count.Add(1) // the overflow group is beyond the cap
		}
	}
	g = o.newGroup(now)
	st.groups[key] = g
	return st, g
}

func (r outlierRule) matches(s *ddsketch.DDSketch, secs, u float64) bool {
	if secs <= 0 {
		return false
	}
	if secs > r.slowAbove {
		return true
	}
	bin := s.Index(secs)
	return bin > r.quantileBin || (bin == r.quantileBin && u < r.tieShare)
}

// reserve counts a new group in, unless max_groups are there.
func (o *Groups) reserve() bool {
	for {
		n := o.count.Load()
		if n >= int64(o.cfg.MaxGroups) {
			return false
		}
		if o.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// evictIdle drops groups not seen for a window, at most once a second (it
// walks every group); called without any stripe's lock.
func (o *Groups) evictIdle(now time.Time) {
	last := o.lastSweep.Load()
	if last != 0 && now.UnixNano()-last < int64(time.Second) || !o.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	for i := range o.stripes {
		st := &o.stripes[i]
		st.mu.Lock()
		for key, g := range st.groups {
			if now.Sub(g.lastSeen) > o.cfg.Window {
				delete(st.groups, key)
				o.count.Add(-1)
			}
		}
		st.mu.Unlock()
	}
}

// recompute derives g's rule from its two sketches; called with st.mu held.
func (o *Groups) recompute(st *groupStripe, g *group) {
	if st.merged == nil {
		st.merged = o.newSketch()
	}
	st.merged.Clear()
	_ = st.merged.MergeWith(g.prev)
	_ = st.merged.MergeWith(g.cur)
	g.recomputeFrom(st.merged, o.cfg.Quantile)
}

func (g *group) recomputeFrom(merged *ddsketch.DDSketch, q float64) {
	g.pending = 0
	store := merged.GetPositiveValueStore()
	n := store.TotalCount()
	if n == 0 {
		return
	}
	qBin := store.KeyAtRank(q * (n - 1))
	var above, inBin float64
	store.ForEach(func(index int, count float64) bool {
		switch {
		case index > qBin:
			above += count
		case index == qBin:
			inBin += count
		}
		return false
	})
	g.rule.quantileBin = qBin
	g.rule.tieShare = 0
	if inBin > 0 {
		g.rule.tieShare = min(max(((1-q)*n-above)/inBin, 0), 1)
	}
	g.rule.slowAbove = math.Inf(1)
	if q > slowModeBodyQuantile {
		body := merged.Value(store.KeyAtRank(slowModeBodyQuantile * (n - 1)))
		g.rule.slowAbove = slowModeFactor * body
	}
}

// Threshold returns a group's current quantile (the upper edge of its bin)
// and observation count.
func (o *Groups) Threshold(key string) (time.Duration, float64) {
	st := o.stripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	g, ok := st.groups[key]
	if !ok {
		return 0, 0
	}
	o.recompute(st, g)
	secs := g.cur.Value(g.rule.quantileBin)
	return time.Duration(secs * float64(time.Second)), g.prev.GetCount() + g.cur.GetCount()
}

// Keys lists the groups, sorted.
func (o *Groups) Keys() []string {
	var out []string
	for i := range o.stripes {
		st := &o.stripes[i]
		st.mu.Lock()
		for k := range st.groups {
			out = append(out, k)
		}
		st.mu.Unlock()
	}
	sort.Strings(out)
	return out
}
