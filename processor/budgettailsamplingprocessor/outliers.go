package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

const (
	overflowGroup = "_overflow"
	// recomputeEvery is how many observations a group takes between
	// recomputations of its threshold (a merge of two sketches).
	recomputeEvery = 16
	// sketchBins bounds a sketch's memory (8 bytes a bin); with 1% accuracy
	// 2048 bins span 1µs to beyond an hour before the lowest bins collapse.
	sketchBins = 2048
)

// outlierGroups learns trace durations per group with DDSketch (mergeable,
// bounded relative error, bounded bins). Each group keeps two sketches,
// swapped every half window, so the quantile follows drift: it always
// reflects between half a window and a full window of traffic.
type outlierGroups struct {
	cfg OutliersConfig

	mu     sync.Mutex
	groups map[string]*group
}

type group struct {
	cur, prev *ddsketch.DDSketch
	rotatedAt time.Time
	threshold float64 // seconds
	pending   int
}

func newOutlierGroups(cfg OutliersConfig) *outlierGroups {
	return &outlierGroups{cfg: cfg, groups: make(map[string]*group)}
}

func (o *outlierGroups) newGroup(now time.Time) *group {
	cur, _ := ddsketch.LogCollapsingLowestDenseDDSketch(o.cfg.RelativeAccuracy, sketchBins)
	prev, _ := ddsketch.LogCollapsingLowestDenseDDSketch(o.cfg.RelativeAccuracy, sketchBins)
	return &group{cur: cur, prev: prev, rotatedAt: now}
}

// observe reports whether a trace of this duration is an outlier for its
// group (judged before it is learned), then learns it.
func (o *outlierGroups) observe(key string, dur time.Duration, now time.Time) bool {
	secs := dur.Seconds()
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.groups[key]
	if !ok {
		if len(o.groups) >= o.cfg.MaxGroups {
			key = overflowGroup
			g = o.groups[key]
		}
		if g == nil {
			g = o.newGroup(now)
			o.groups[key] = g
		}
	}
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
		outlier = secs > g.threshold
	}
	_ = g.cur.Add(secs)
	g.pending++
	return outlier
}

func (g *group) recompute(q float64) {
	merged := g.prev.Copy()
	_ = merged.MergeWith(g.cur)
	if v, err := merged.GetValueAtQuantile(q); err == nil {
		g.threshold = v
	}
	g.pending = 0
}

// threshold returns a group's current threshold and observation count.
func (o *outlierGroups) threshold(key string) (time.Duration, float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.groups[key]
	if !ok {
		return 0, 0
	}
	g.recompute(o.cfg.Quantile)
	return time.Duration(g.threshold * float64(time.Second)), g.prev.GetCount() + g.cur.GetCount()
}
