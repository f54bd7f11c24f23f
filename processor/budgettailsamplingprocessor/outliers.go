package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"encoding/binary"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

const (
	overflowGroup = "_overflow"
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

// outlierGroups learns trace durations per group with DDSketch (mergeable,
// bounded relative error, bounded bins). Each group keeps two sketches,
// swapped every half window, so the rule follows drift: it always reflects
// between half a window and a full window of traffic.
type outlierGroups struct {
	cfg OutliersConfig

	mu        sync.Mutex
	groups    map[string]*group
	lastSweep time.Time
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

func newOutlierGroups(cfg OutliersConfig) *outlierGroups {
	return &outlierGroups{cfg: cfg, groups: make(map[string]*group)}
}

func (o *outlierGroups) newGroup(now time.Time) *group {
	cur, _ := ddsketch.LogCollapsingLowestDenseDDSketch(o.cfg.RelativeAccuracy, sketchBins)
	prev, _ := ddsketch.LogCollapsingLowestDenseDDSketch(o.cfg.RelativeAccuracy, sketchBins)
	return &group{cur: cur, prev: prev, rotatedAt: now}
}

// tieBreak is a uniform draw in [0, 1) from the trace ID's high bytes, which
// OTEP 235 sampling does not read: whether a trace in the quantile's bin is
// an outlier must not be correlated with whether the baseline keeps it, or
// the weights of the kept traces would no longer add up to the traffic.
func tieBreak(id pcommon.TraceID) float64 {
	return float64(binary.BigEndian.Uint64(id[:8])>>11) / (1 << 53)
}

// observe reports whether a trace of this duration is an outlier for its
// group (judged before it is learned), then learns it. u is the trace's
// tieBreak.
func (o *outlierGroups) observe(key string, dur time.Duration, u float64, now time.Time) bool {
	secs := dur.Seconds()
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.groups[key]
	if !ok {
		if len(o.groups) >= o.cfg.MaxGroups {
			o.evictIdle(now)
		}
		if len(o.groups) >= o.cfg.MaxGroups {
			key = overflowGroup
			g = o.groups[key]
		}
		if g == nil {
			g = o.newGroup(now)
			o.groups[key] = g
		}
	}
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
			g.recompute(o.cfg.Quantile)
		}
		outlier = g.rule.matches(g.cur, secs, u)
	}
	if secs > 0 {
		_ = g.cur.Add(secs)
	}
	g.pending++
	return outlier
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

// evictIdle drops groups not seen for a window, at most once a second (it
// walks every group).
func (o *outlierGroups) evictIdle(now time.Time) {
	if now.Sub(o.lastSweep) < time.Second {
		return
	}
	o.lastSweep = now
	for key, g := range o.groups {
		if now.Sub(g.lastSeen) > o.cfg.Window {
			delete(o.groups, key)
		}
	}
}

func (g *group) recompute(q float64) {
	g.pending = 0
	merged := g.prev.Copy()
	_ = merged.MergeWith(g.cur)
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

// threshold returns a group's current quantile (the upper edge of its bin)
// and observation count.
func (o *outlierGroups) threshold(key string) (time.Duration, float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.groups[key]
	if !ok {
		return 0, 0
	}
	g.recompute(o.cfg.Quantile)
	secs := g.cur.Value(g.rule.quantileBin)
	return time.Duration(secs * float64(time.Second)), g.prev.GetCount() + g.cur.GetCount()
}

// keys lists the groups, sorted.
func (o *outlierGroups) keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, len(o.groups))
	for k := range o.groups {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
