package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestE2EOverloadStressRelief: the overload of TestE2EOverload (about 30k
// spans/s for samplers whose memory_limiter allows 80 MiB, soft limit
// 40 MiB), from a sender that does not retry, as an SDK past its retry
// window: with relief off, memory_limiter refuses and the sender loses
// what was refused, errors with the rest; with relief on (monitor, its
// memory level against memory_limiter's soft limit), nothing is refused,
// nothing lost, every error span kept, and the kept volume stays at the
// budget.
func TestE2EOverloadStressRelief(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	for _, mode := range []string{"never", "monitor"} {
		t.Run(mode, func(t *testing.T) { overloadWithoutRetries(t, mode) })
	}
}

func overloadWithoutRetries(t *testing.T, mode string) {
	const (
		limitMiB = 80
		spikeMiB = 40
		// 10% of the offered load; errors (2% of traces, ≈ 600 spans/s)
		// fit in it with room for a baseline.
		budget = 3000
		load   = 20 * time.Second
	)
	tr := startTier(t, tierOptions{samplers: 3, budget: budget, samplerEnv: map[string]string{
		"MEMORY_LIMIT_MIB":       fmt.Sprint(limitMiB),
		"MEMORY_SPIKE_LIMIT_MIB": fmt.Sprint(spikeMiB),
		// As the chart runs a sampler: GOMEMLIMIT at memory_limiter's
		// limit (relief lowers it to its own memory limit).
		"GOMEMLIMIT": fmt.Sprintf("%dMiB", limitMiB),
		// The shipped waits: SDKs export every 5 s.
		"DECISION_WAIT":            "15s",
		"DECISION_WAIT_AFTER_ROOT": "7s",
		"STRESS_RELIEF_MODE":       mode,
		"SAMPLER_INSTANCES":        "3",
	}})
	lg := newLoadGen(t, tr.gateway, 2500, 6)
	lg.noRetry = true
	peaks := watchRSSGrowth(tr.samplers)
	lg.run(load)
	growth := peaks()

	accepted := 0
	for _, st := range lg.traces {
		accepted += st.accepted
	}
	tierFigures := func() (decided, refused float64) {
		for _, c := range append([]*collector{tr.gateway}, tr.samplers...) {
			f := c.metrics()
			v, _ := metricValue(f, "otelcol_processor_budget_tail_sampling_spans_total", nil)
			r, _ := metricValue(f, "otelcol_processor_memory_limiter_refused_spans_total", nil)
			decided += v
			refused += r
		}
		return
	}
	// Every accepted span is decided, unless the tier lost it (the
	// gateway's retries towards a refusing sampler ran out): wait until
	// decisions stop.
	last, since := -1.0, time.Now()
	eventually(t, 90*time.Second, func() bool {
		d, _ := tierFigures()
		if d != last {
			last, since = d, time.Now()
		}
		return int(d) >= accepted || time.Since(since) > 10*time.Second
	}, "decisions settle")
	decided, refused := tierFigures()
	waitQuiet(t, tr.sinks, 3*time.Second)

	kept := 0
	keptErrors := 0
	for _, s := range tr.sinks {
		kept += s.spanCount()
		for _, id := range s.traceIDs() {
			for _, span := range s.trace(id) {
				if span.Status().Code() == ptrace.StatusCodeError && lg.errorSpans[span.SpanID()] {
					keptErrors++
				}
			}
		}
	}
	sentErrors := lg.errorSpans // accepted; the sender's lost ones are counted apart
	lostInTier := max(accepted-int(decided), 0)
	peak := 0
	for _, g := range growth {
		peak = max(peak, g)
	}
	keptToBudget := float64(kept) / (budget * load.Seconds())
	t.Logf("relief %s: sender lost %d spans (%d refusals), memory_limiter refused %.0f, accepted %d, decided %.0f (lost in tier %d), kept %d (%.2f of the budget), errors kept %d of %d, RSS growth %v MiB",
		mode, lg.lost, lg.refused, refused, accepted, decided, lostInTier, kept, keptToBudget, keptErrors, len(sentErrors), growth)
	scenario := "overload, relief off"
	if mode != "never" {
		scenario = "overload, relief on"
	}
	reportOverloadRow(scenario, int(refused), lg.lost, keptErrors, len(sentErrors)+countErrorSpansLost(lg), keptToBudget, peak, limitMiB)

	if mode == "never" {
		assert.Positive(t, refused+float64(lg.lost), "the load exceeds what the samplers can buffer")
		return
	}
	var activations, atArrival float64
	for _, s := range tr.samplers {
		f := s.metrics()
		a, _ := metricValue(f, "otelcol_processor_budget_tail_sampling_stress_relief_activations_total", nil)
		n, _ := metricValue(f, "otelcol_processor_budget_tail_sampling_stress_relief_spans_total", nil)
		_, exposed := metricValue(f, "otelcol_processor_budget_tail_sampling_stress_relief_active", map[string]string{"reason": "none"})
		assert.True(t, exposed, "the state series, under the name the alert reads")
		activations += a
		atArrival += n
	}
	t.Logf("relief started %.0f times on 3 samplers; %.0f spans decided at arrival", activations, atArrival)
	assert.Positive(t, activations, "relief started")
	assert.Positive(t, atArrival, "spans were decided at arrival")
	assert.Zero(t, refused, "memory_limiter refused nothing: relief started first")
	assert.Zero(t, lg.lost, "the sender lost nothing")
	assert.Zero(t, lostInTier, "every accepted span decided")
	assert.Equal(t, len(sentErrors), keptErrors, "every error span kept")
	assert.InDelta(t, 1, keptToBudget, 0.3, "kept volume at the budget")
	for i, g := range growth {
		assert.Less(t, g, limitMiB, "sampler %d: memory grown under load stays under the memory_limiter limit", i)
	}
}

// countErrorSpansLost counts the error spans of requests the sender gave up
// on: they were never accepted, so they are not in lg.errorSpans.
func countErrorSpansLost(lg *loadGen) int {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.errorsLost
}

// watchRSSGrowth samples the collectors' resident memory every 200 ms from
// now; the returned function stops and gives each one's peak growth over
// its RSS when watching began, in MiB.
func watchRSSGrowth(cs []*collector) func() []int {
	base := make([]int, len(cs))
	for i, c := range cs {
		base[i] = rssMiB(c)
	}
	peak := make([]int, len(cs))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for i, c := range cs {
				peak[i] = max(peak[i], rssMiB(c))
			}
		}
	}()
	return func() []int {
		close(stop)
		wg.Wait()
		out := make([]int, len(cs))
		for i := range cs {
			out[i] = max(peak[i]-base[i], 0)
		}
		return out
	}
}
