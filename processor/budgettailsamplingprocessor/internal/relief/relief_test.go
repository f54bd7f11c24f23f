package relief

import (
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_700_000_000, 0)

func monitor() Config {
	c := DefaultConfig()
	c.Mode = ModeMonitor
	return c
}

func TestStressReliefActivatesAndDeactivatesWithHysteresis(t *testing.T) {
	c := New(monitor(), Bounds{MaxTraces: 1000, MaxBytes: 1 << 20}, t0)
	now := t0.Add(5 * time.Second)
	assert.False(t, c.Update(now, 0.5, 0.2), "50% buffered: below activation")
	assert.False(t, c.Active())
	assert.True(t, c.Update(now, 0.2, 0.91), "91% of the bytes bound: past 90%")
	assert.True(t, c.Active())
	assert.Equal(t, int32(SignalBufferBytes), c.Reason())

	// Between the levels it stays on, and says what loads it now.
	now = now.Add(20 * time.Second)
	assert.False(t, c.Update(now, 0.8, 0.5))
	assert.True(t, c.Active(), "80% is above the deactivation level (75%)")
	assert.Equal(t, int32(SignalBufferTraces), c.Reason())

	assert.True(t, c.Update(now, 0.74, 0.5), "every level under 75%: off")
	assert.False(t, c.Active())
	assert.Equal(t, ReasonNone, c.Reason())
	assert.Equal(t, int64(1), c.Activations())
}

func TestStressReliefHoldsEachStateItsMinimumTime(t *testing.T) {
	cfg := monitor()
	cfg.MinimumActivationDuration = 10 * time.Second
	cfg.MinimumDeactivationDuration = 2 * time.Second
	c := New(cfg, Bounds{MaxTraces: 100, MaxBytes: 100}, t0)
	now := t0.Add(time.Minute)
	require.True(t, c.Update(now, 0.95, 0))
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 9900 * time.Millisecond} {
		assert.False(t, c.Update(now.Add(d), 0, 0), "idle %v after activation: still on (minimum 10 s)", d)
		assert.True(t, c.Active())
	}
	now = now.Add(10 * time.Second)
	require.True(t, c.Update(now, 0, 0), "off once 10 s have passed")
	assert.False(t, c.Update(now.Add(time.Second), 1, 1), "loaded 1 s after stopping: stays off (minimum 2 s)")
	assert.True(t, c.Update(now.Add(2*time.Second), 1, 1), "on again after 2 s")
}

func TestStressReliefModes(t *testing.T) {
	cfg := monitor()
	cfg.Mode = ModeNever
	never := New(cfg, Bounds{MaxTraces: 1, MaxBytes: 1}, t0)
	assert.False(t, never.Update(t0.Add(time.Hour), 5, 5))
	assert.False(t, never.Active(), "never: whatever the load")
	assert.False(t, never.Enabled())

	cfg.Mode = ModeAlways
	always := New(cfg, Bounds{MaxTraces: 1, MaxBytes: 1}, t0)
	assert.True(t, always.Active(), "always: from the start")
	assert.False(t, always.Update(t0.Add(time.Hour), 0, 0))
	assert.True(t, always.Active(), "always: whatever the load")
	assert.Equal(t, ReasonAlways, always.Reason())
}

func TestStressReliefMemoryLevel(t *testing.T) {
	cfg := monitor()
	cfg.MemoryLimitMiB = 1
	held := make([]byte, 4<<20) // 4 MiB live: past the 1 MiB limit
	runtime.GC()                // the live heap is what the last GC marked
	c := New(cfg, Bounds{MaxTraces: 100, MaxBytes: 100}, t0)
	require.Equal(t, uint64(1<<20), c.MemoryLimit())
	assert.True(t, c.Update(t0.Add(time.Minute), 0, 0))
	assert.Equal(t, int32(SignalMemory), c.Reason())
	assert.Greater(t, c.Levels()[SignalMemory], 1.0)
	runtime.KeepAlive(held)

	cfg.MemoryLimitMiB = 1 << 30 // 1 PiB: never reached
	c = New(cfg, Bounds{MaxTraces: 100, MaxBytes: 100}, t0)
	assert.False(t, c.Update(t0.Add(time.Minute), 0, 0))
	assert.Less(t, c.Levels()[SignalMemory], 0.01)
}

// The arrival level projects the buffer the arrival rate fills at the
// time traces spend in it: it says "overloaded" while relief has emptied
// the buffer, so that relief does not switch off and on again.
func TestStressReliefArrivalRateLevelIsLittlesLaw(t *testing.T) {
	c := New(monitor(), Bounds{MaxTraces: 10_000, MaxBytes: 1 << 30}, t0)
	// 2,000 new traces a second, each resident 5 s: 10,000 buffered = 100%.
	c.Measure(Arrivals{Volume: 1, NewTraces: 2000, NewBytes: 1000, Decided: 100, Resident: 500 * time.Second}, 1, 1)
	assert.InDelta(t, 1.0, c.Levels()[SignalArrivalRate], 1e-9)
	now := t0.Add(time.Minute)
	require.True(t, c.Update(now, 0, 0))
	assert.Equal(t, int32(SignalArrivalRate), c.Reason())
	// Relief on: nothing decided from the buffer any more; the residence
	// learned stays, and so does the level while traffic does.
	for i := range 5 {
		c.Measure(Arrivals{Volume: 1, NewTraces: 2000, NewBytes: 1000}, 1, 1)
		assert.False(t, c.Update(now.Add(time.Duration(i+11)*time.Second), 0, 0))
		assert.True(t, c.Active())
	}
	// Traffic falls to a third: off.
	for range 5 {
		c.Measure(Arrivals{Volume: 1, NewTraces: 600, NewBytes: 300}, 1, 1)
	}
	assert.True(t, c.Update(now.Add(30*time.Second), 0, 0))
}

func TestStressReliefProbabilityHoldsTheBudget(t *testing.T) {
	for _, tc := range []struct {
		share, volume, errs, want float64
	}{
		{share: 100, volume: 1000, want: 0.1},
		{share: 100, volume: 1000, errs: 50, want: 50.0 / 950},
		{share: 100, volume: 50, want: 1},
		{share: 100, volume: 1000, errs: 200, want: 0},
		{share: 3, volume: 30_000, want: 1e-4},
	} {
		p := KeepProbability(tc.share, tc.volume, tc.errs)
		if tc.want == 0 {
			assert.Less(t, p.P, 1e-9, "errors alone exceed the share")
			continue
		}
		// Rounded to 1/8 of an octave: within ±4.5%.
		assert.InEpsilon(t, tc.want, p.P, 0.045, "%+v", tc)
	}
	// Estimates a few percent apart give the same threshold (the same
	// traces on every sampler).
	a := KeepProbability(100, 1000, 0)
	b := KeepProbability(100, 1030, 0)
	assert.Equal(t, a.Th, b.Th)
	// Steps are 2^(1/8) apart: any probability is one of them.
	for _, v := range []float64{1234, 5678, 91011} {
		p := KeepProbability(100, v, 0)
		k := 8 * math.Log2(p.P)
		assert.InDelta(t, math.Round(k), k, 0.01, "2^(k/8), with th's 3 hex digits of precision")
	}
}

func TestStressReliefMeasuresOverAWindow(t *testing.T) {
	c := New(monitor(), Bounds{MaxTraces: 1, MaxBytes: 1}, t0)
	assert.Equal(t, 1.0, c.Probability().P, "keeps everything before anything was measured")
	// SDK bursts: 5,000 units in one second of five, none in the others.
	c.Measure(Arrivals{Volume: 5000}, 1, 100)
	for range 4 {
		c.Measure(Arrivals{}, 1, 100)
	}
	assert.InEpsilon(t, 0.1, c.Probability().P, 0.045, "1,000/s over the window, 100/s share")
}

func TestStressReliefConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Mode = "sometimes" }, `stress_relief.mode: must be "never", "monitor" or "always", got "sometimes"`},
		{func(c *Config) { c.DeactivationLevel = 95 }, "stress_relief.deactivation_level: must be below activation_level (90), got 95"},
		{func(c *Config) { c.ActivationLevel, c.DeactivationLevel = 50, 80 }, "stress_relief.deactivation_level: must be below activation_level (50), got 80"},
		{func(c *Config) { c.ActivationLevel = 120 }, "stress_relief.activation_level: must be a percentage in (0, 100], got 120"},
		{func(c *Config) { c.DeactivationLevel = 0 }, "stress_relief.deactivation_level: must be a percentage in (0, 100], got 0"},
		{func(c *Config) { c.MinimumActivationDuration = -time.Second }, "stress_relief.minimum_activation_duration: must be ≥ 0"},
		{func(c *Config) { c.MinimumDeactivationDuration = -time.Second }, "stress_relief.minimum_deactivation_duration: must be ≥ 0"},
	} {
		c := DefaultConfig()
		tc.mutate(&c)
		errs := c.Check()
		require.Len(t, errs, 1, tc.want)
		assert.True(t, strings.HasPrefix(errs[0].Error(), tc.want), "%v", errs[0])
	}
	c := DefaultConfig()
	assert.Empty(t, c.Check())
}

func TestStressReliefLowersTheGoMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	debug.SetMemoryLimit(1 << 40)
	cfg := monitor()
	cfg.MemoryLimitMiB = 1 << 19 // 512 GiB: below the 1 TiB set above
	prev, changed := New(cfg, Bounds{}, t0).SetGoMemoryLimit()
	assert.True(t, changed)
	assert.Equal(t, int64(1<<40), prev)
	assert.Equal(t, int64(1<<39), debug.SetMemoryLimit(-1))
	cfg.MemoryLimitMiB = 1 << 20 // 1 TiB: above the limit now, left alone
	_, changed = New(cfg, Bounds{}, t0).SetGoMemoryLimit()
	assert.False(t, changed)
	assert.Equal(t, int64(1<<39), debug.SetMemoryLimit(-1))
	cfg.Mode, cfg.MemoryLimitMiB = ModeNever, 1
	_, changed = New(cfg, Bounds{}, t0).SetGoMemoryLimit()
	assert.False(t, changed, "never: no relief, no memory limit")
}

// The memory level's bound is memory_limiter's soft limit however the two
// are set: limit − spike, the limit alone without a spike.
func TestSoftLimitFollowsTheLimit(t *testing.T) {
	for _, c := range []struct{ limit, spike, want uint64 }{{1024, 256, 768}, {2048, 256, 1792}, {768, 0, 768}, {0, 0, 0}} {
		cfg := Config{MemoryLimitMiB: c.limit, MemorySpikeLimitMiB: c.spike}
		assert.Equal(t, c.want, cfg.SoftLimitMiB(), "%d − %d", c.limit, c.spike)
	}
}
