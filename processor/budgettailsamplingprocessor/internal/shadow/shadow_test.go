package shadow

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/livepolicy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// newShadow runs the candidate of content beside a live budget of 1,000
// spans/s; it returns the candidate's file.
func newShadow(t *testing.T, content string, rareInterval time.Duration, stripes int) (*Shadow, string) {
	t.Helper()
	budget := policy.BudgetConfig{SpansPerSecond: 1000, Pricing: pricing.DefaultConfig(), Instances: 1, MaxPriorityShare: 0.8}
	path := filepath.Join(t.TempDir(), "shadow.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	rs, err := rules.Compile(nil, component.TelemetrySettings{Logger: zap.NewNop()})
	require.NoError(t, err)
	s := policy.Settings{Budget: budget, AdjustInterval: 2 * time.Second, Smoothing: 0.7, MaxKeys: 100, MinBaselineShare: 0.2, RareInterval: rareInterval}
	sh, err := New(s, rs, livepolicy.NewShadow(livepolicy.Config{ShadowPath: path, CheckInterval: time.Second}, livepolicy.Base{Budget: budget, MinShare: 0.2}), stripes, zap.NewNop(), true)
	require.NoError(t, err)
	return sh, path
}

// A candidate with half the live budget, shown 5,000 spans/s of baseline
// traffic (1% errors), would keep its own budget once it has learned the
// rates, every error included; it kept nothing itself (it has no spans),
// and its file can change its budget as the live one's can.
func TestShadowWouldKeepItsOwnBudget(t *testing.T) {
	sh, path := newShadow(t, "version: half\nbudget:\n  spans_per_second: 500\n", 0, 4)
	assert.Equal(t, "half", sh.Version())

	rnd := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1_000_000, 0)
	sh.Start(now)
	run := func(seconds int) (kept, errorsSeen, errorsKept int64) {
		before := sh.Tally()
		for range seconds {
			for i := range 5000 {
				r, _ := sampling.UnsignedToRandomness(rnd.Uint64N(sampling.MaxAdjustedCount))
				isErr := i%100 == 0
				sh.Decide(i%4, policy.Traits{Key: "a", Booked: "a", Error: isErr, Rule: -1}, sampling.AlwaysSampleThreshold, r, 1, 100, 1, 0)
				if isErr {
					errorsSeen++
				}
			}
			now = now.Add(time.Second)
			sh.Tick(now)
		}
		after := sh.Tally()
		return after.Spans[1] - before.Spans[1], errorsSeen, after.Traces[1][0] - before.Traces[1][0]
	}
	run(20) // learns
	kept, errorsSeen, errorsKept := run(20)
	assert.InEpsilon(t, 500, float64(kept)/20, 0.05, "the candidate's budget, not the live one's")
	assert.Equal(t, errorsSeen, errorsKept, "every error")

	require.NoError(t, os.WriteFile(path, []byte("budget:\n  spans_per_second: 250\n"), 0o600))
	sh.Poll(zap.NewNop())
	applied, rejected := sh.file.Reloads()
	require.Equal(t, [2]int64{2, 0}, [2]int64{applied, rejected}, "read at start, then the change")
	run(2)
	kept, _, _ = run(20)
	assert.InEpsilon(t, 250, float64(kept)/20, 0.05, "a new candidate applies at once")
}

// The candidate's rare-path coverage: the share of keys decided in the
// last whole interval that it would have kept a trace of.
func TestShadowRareCoverage(t *testing.T) {
	sh, _ := newShadow(t, "budget:\n  spans_per_second: 500\n", time.Minute, 1)
	// The candidate keeps a's traces and almost none of the others'.
	sh.adj.Pin(policy.Fixed(map[string]traceinfo.Probability{"a": traceinfo.Always}, traceinfo.NewProbability(sampling.MinSamplingProbability)))
	r, _ := sampling.UnsignedToRandomness(1 << 40) // low randomness: kept only at high probability
	minute := int64(time.Minute)
	for _, key := range []string{"a", "a", "b", "c", "d"} {
		sh.Decide(0, policy.Traits{Key: key, Booked: key, Rule: -1}, sampling.AlwaysSampleThreshold, r, 1, 100, 1, 10*minute+5)
	}
	share, ok := sh.cover.Coverage(11*minute + 1)
	require.True(t, ok)
	assert.InDelta(t, 0.25, share, 1e-9, "a of a, b, c, d")
	sh.SetRareInterval(5 * time.Minute)
	assert.Equal(t, 5*time.Minute, sh.cover.Interval(), "follows the live interval")
}
