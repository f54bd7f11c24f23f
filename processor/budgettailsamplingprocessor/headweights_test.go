package budgettailsamplingprocessor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
)

// zipfHeadRun is issue 40's item-0 workload: 49 services with zipf volumes,
// each span's service drawn at random and on its own resource, 1–40 spans a
// trace, every trace in three requests 1 s apart with the root last,
// head-sampled at 10% (consistent, th on every span), and a budget that
// keeps about a quarter of what arrives. It returns the spans generated
// (before head sampling), the kept spans' th-weighted count and that
// count's standard error (Horvitz–Thompson, from the kept traces).
func zipfHeadRun(t *testing.T, seed uint64) (generated int, represented, se float64) {
	t.Helper()
	cfg := testConfig()
	cfg.DecisionWaitAfterRoot = 3 * time.Second
	cfg.Budget.SpansPerSecond = 150 // ≈ a quarter of the ≈ 600 spans/s that arrive
	ts := newTestSampler(t, cfg)
	rng := rand.New(rand.NewPCG(seed, 235))
	var cum []float64
	var total float64
	for i := range 49 {
		total += 1 / float64(i+1)
		cum = append(cum, total)
	}
	service := func() string {
		i, _ := slices.BinarySearch(cum, rng.Float64()*total)
		return "svc-" + string(rune('A'+min(i, 48)))
	}
	head, err := sampling.ProbabilityToThreshold(0.1)
	require.NoError(t, err)
	tracestate := "ot=th:" + head.TValue()
	const seconds, perSecond = 90, 300 // traces/s before head sampling
	parts := make([][3]ptrace.Traces, seconds+3)
	for s := range parts {
		for i := range 3 {
			parts[s][i] = ptrace.NewTraces()
		}
	}
	adjustEvery := int(cfg.AdjustInterval / time.Second)
	for s := range seconds + 3 {
		if s < seconds {
			now := ts.now
			for range perSecond {
				var id pcommon.TraceID
				for i := range id {
					id[i] = byte(rng.Uint32())
				}
				n := 1 + rng.IntN(40)
				generated += n
				if !head.ShouldSample(sampling.TraceIDToRandomness(id)) {
					continue
				}
				for k := range n {
					p := 2 // the root comes last
					if k > 0 {
						p = rng.IntN(3)
					}
					rs := parts[s+p][p].ResourceSpans().AppendEmpty()
					rs.Resource().Attributes().PutStr("service.name", service())
					sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
					sp.SetTraceID(id)
					sp.SetSpanID(pcommon.SpanID{byte(k + 1), byte(k >> 8), byte(rng.Uint32()), 1})
					if k > 0 {
						sp.SetParentSpanID(pcommon.SpanID{1})
					}
					sp.SetName("op")
					sp.TraceState().FromRaw(tracestate)
					d := time.Duration(1+rng.IntN(200)) * time.Millisecond
					sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-d)))
					sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
				}
			}
		}
		for i := range 3 {
			if parts[s][i].SpanCount() > 0 {
				ts.send(parts[s][i])
			}
		}
		for range 10 {
			ts.advance(100 * time.Millisecond)
		}
		if (s+1)%adjustEvery == 0 {
			ts.p.adj.Adjust(ts.now)
		}
	}
	ts.advance(cfg.DecisionWait)
	type kept struct {
		spans int
		w     float64
	}
	traces := map[pcommon.TraceID]*kept{}
	for _, td := range ts.sink.AllTraces() {
		spanwalk.Traces(td, func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			th, ok := thresholdOf(sp.TraceState().AsRaw())
			require.True(t, ok)
			k := traces[sp.TraceID()]
			if k == nil {
				k = &kept{w: th.AdjustedCount()}
				traces[sp.TraceID()] = k
			}
			require.Equal(t, k.w, th.AdjustedCount(), "one th per trace")
			k.spans++
		})
	}
	var variance float64
	for _, k := range traces {
		y := float64(k.spans)
		represented += y * k.w
		variance += y * y * k.w * (k.w - 1)
	}
	return generated, represented, math.Sqrt(variance)
}

// TestHeadSampledZipfShapeWeightsAreUnbiased runs issue 40's item-0 shape
// with 30 seeds. One run's th-weighted count is noisy (traces of up to 40
// spans, each standing for ≈ 40 traces): its standard error is ≈ 6%, and
// runs through the binary measured −13.3% and +10.2% the same day. A bias
// shows in the mean over seeds, whose standard error is ≈ 1.6%: it must be
// within 3 of them, and each run within 4 of its own.
func TestHeadSampledZipfShapeWeightsAreUnbiased(t *testing.T) {
	var sumRel, sumVar float64
	const seeds = 30
	for seed := range uint64(seeds) {
		generated, represented, se := zipfHeadRun(t, seed+1)
		rel := represented/float64(generated) - 1
		relSE := se / float64(generated)
		t.Logf("seed %d: represented %+.1f%% of %d spans generated (standard error %.1f%%)", seed+1, 100*rel, generated, 100*relSE)
		assert.Less(t, math.Abs(rel), 4*relSE, "seed %d", seed+1)
		sumRel += rel
		sumVar += relSE * relSE
	}
	mean, meanSE := sumRel/seeds, math.Sqrt(sumVar)/seeds
	t.Logf("mean over %d seeds %+.2f%% (standard error %.2f%%)", seeds, 100*mean, 100*meanSE)
	assert.Less(t, math.Abs(mean), 3*meanSE, "no bias across seeds")
}
