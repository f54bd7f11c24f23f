package outliers

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// defaults are budget_tail_sampling's outliers defaults.
func defaults() Config {
	return Config{Quantile: 0.99, MinObservations: 100, FallbackLatencyThreshold: time.Second,
		GroupBy: []string{"service.name", "span.name"}, MaxGroups: 1000, Window: 10 * time.Minute, RelativeAccuracy: 0.01}
}

func observeTrace(o *Groups, key string, dur time.Duration, id pcommon.TraceID, now time.Time) bool {
	return o.Observe(key, dur, TieBreak(id), now)
}

func TestOutlierGroupsLearnTheQuantile(t *testing.T) {
	cfg := defaults()
	cfg.MinObservations = 100
	o := New(cfg)
	now := time.Unix(0, 0)
	// Before min_observations: the fallback threshold (1s).
	assert.True(t, o.Observe("a", 1500*time.Millisecond, 0, now))
	assert.False(t, o.Observe("a", 900*time.Millisecond, 0, now))
	// 10ms..109ms uniformly, many times: p99 ≈ 108ms.
	for i := 0; i < 2000; i++ {
		o.Observe("a", time.Duration(10+i%100)*time.Millisecond, 0, now)
	}
	th, n := o.Threshold("a")
	assert.InDelta(t, 108, th.Seconds()*1000, 3)
	assert.Equal(t, 2002.0, n)
	assert.True(t, o.Observe("a", 150*time.Millisecond, 0, now), "slower than p99")
	assert.False(t, o.Observe("a", 50*time.Millisecond, 0, now))
	// Another group has its own distribution.
	assert.False(t, o.Observe("b", 500*time.Millisecond, 0, now), "fallback for a new group")

	// Drift: after a full window of slower traffic the threshold follows.
	for step := 0; step < 2; step++ {
		now = now.Add(cfg.Window / 2)
		for i := 0; i < 2000; i++ {
			o.Observe("a", time.Duration(200+i%100)*time.Millisecond, 0, now)
		}
	}
	th, _ = o.Threshold("a")
	assert.InDelta(t, 298, th.Seconds()*1000, 6)
}

func TestOutlierGroupsAreCapped(t *testing.T) {
	cfg := defaults()
	cfg.MaxGroups = 3
	o := New(cfg)
	for i := 0; i < 10; i++ {
		o.Observe(fmt.Sprint(i), time.Millisecond, 0, time.Unix(0, 0))
	}
	assert.Len(t, o.Keys(), 4, "three groups and the shared overflow group")
	_, n := o.Threshold(OverflowGroup)
	assert.Equal(t, 7.0, n)
}

// Decisions on many cores learn groups concurrently: the cap holds (plus
// the overflow group) when new groups race for its last places, and every
// observation is learned once.
func TestOutlierGroupsConcurrently(t *testing.T) {
	cfg := defaults()
	cfg.MaxGroups = 4
	const workers = 8
	for trial := range 200 {
		o := New(cfg)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range 10 {
					o.Observe(fmt.Sprint("op-", w, "-", i%2), time.Duration(1+i)*time.Millisecond, 0.5, time.Unix(0, 0))
				}
			}()
		}
		close(start)
		wg.Wait()
		keys := o.Keys()
		require.Len(t, keys, cfg.MaxGroups+1, "trial %d: the cap, and the overflow group", trial)
		total := 0.0
		for _, k := range keys {
			_, n := o.Threshold(k)
			total += n
		}
		require.Equal(t, float64(workers*10), total)
	}
}

// Outlier rule on the duration shapes production has.
func TestOutliersOnRealLatencyShapes(t *testing.T) {
	cfg := defaults()
	t.Run("bimodal: a slow mode of a few percent is kept", func(t *testing.T) {
		for _, share := range []float64{0.005, 0.01, 0.03, 0.05} {
			fl := workload.NewFleet(workload.FleetOptions{Services: 1, Depth: 1, SpansPerService: 1, SlowShare: share,
				BodyMin: 20 * time.Millisecond, BodyMax: 200 * time.Millisecond, SlowDuration: 5 * time.Second, QuantizeMillis: true, Seed: 3}, time.Unix(0, 0))
			o := New(cfg)
			slow, slowKept, body, bodyKept := 0, 0, 0, 0
			for i := 0; i < 20000; i++ {
				tr := fl.Start(time.Unix(0, 0))
				dur := durationOf(fl, tr)
				out := observeTrace(o, "g", dur, tr.ID, time.Unix(0, 0))
				if i < 2000 {
					continue // learning
				}
				if tr.Slow {
					slow++
					if out {
						slowKept++
					}
				} else {
					body++
					if out {
						bodyKept++
					}
				}
			}
			t.Logf("slow share %.3f: slow-mode traces kept %d/%d, body outliers %.2f%%", share, slowKept, slow, 100*float64(bodyKept)/float64(body))
			assert.Equal(t, slow, slowKept, "slow share %.3f: every slow-mode trace is an outlier", share)
			assert.Less(t, float64(bodyKept)/float64(body), 0.02, "slow share %.3f: the body is not", share)
		}
	})
	t.Run("quantized unimodal: about 1 - quantile", func(t *testing.T) {
		o := New(cfg)
		out := 0
		const n = 40000
		for i := 0; i < n; i++ {
			var id pcommon.TraceID
			id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i*7)
			// integer milliseconds, narrow range: 10..30 ms
			dur := time.Duration(10+(i*7919)%21) * time.Millisecond
			if observeTrace(o, "g", dur, id, time.Unix(0, 0)) && i > 2000 {
				out++
			}
		}
		share := float64(out) / float64(n-2000)
		t.Logf("quantized 10–30 ms: outlier share %.2f%%", 100*share)
		assert.InDelta(t, 0.01, share, 0.004, "outlier share %.4f", share)
	})
}

// durationOf drains the fleet's one-span traces to get the generated duration.
func durationOf(fl *workload.Fleet, tr workload.FleetTrace) time.Duration {
	var d time.Duration
	for _, req := range fl.Drain() {
		spanwalk.Traces(req.Traces, func(_ ptrace.ResourceSpans, s ptrace.Span) {
			if s.TraceID() == tr.ID {
				d = time.Duration(s.EndTimestamp() - s.StartTimestamp())
			}
		})
	}
	return d
}

// Groups idle for a window make room for new operations.
func TestIdleOutlierGroupsAreEvicted(t *testing.T) {
	cfg := defaults()
	cfg.MaxGroups = 2
	o := New(cfg)
	t0 := time.Unix(0, 0)
	observeTrace(o, "a", time.Millisecond, pcommon.TraceID{}, t0)
	observeTrace(o, "b", time.Millisecond, pcommon.TraceID{}, t0)
	observeTrace(o, "c", time.Millisecond, pcommon.TraceID{}, t0.Add(cfg.Window+time.Second))
	assert.ElementsMatch(t, []string{"c"}, o.Keys())
}
