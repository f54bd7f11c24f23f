package traceinfo

import (
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func threshold(t *testing.T, p float64) sampling.Threshold {
	t.Helper()
	th, err := sampling.ProbabilityToThresholdWithPrecision(p, ThresholdPrecision)
	require.NoError(t, err)
	return th
}

// A trace's names and duration come from its root once it arrives, and
// until then from its longest span, whatever order the fragments come in.
func TestSummaryMergeTakesTheRootElseTheLongestSpan(t *testing.T) {
	var s Summary
	root, takeNames := s.Merge(&Summary{Spans: 2, Dur: time.Second})
	assert.False(t, root)
	assert.True(t, takeNames, "the first fragment gives the names")
	_, takeNames = s.Merge(&Summary{Spans: 1, Dur: 500 * time.Millisecond})
	assert.False(t, takeNames, "a shorter span does not")
	_, takeNames = s.Merge(&Summary{Spans: 1, Dur: 2 * time.Second})
	assert.True(t, takeNames, "a longer one does")
	root, takeNames = s.Merge(&Summary{Spans: 1, Dur: 300 * time.Millisecond, HasRoot: true})
	assert.True(t, root)
	assert.True(t, takeNames, "the root gives the names, however short")
	assert.Equal(t, 300*time.Millisecond, s.Dur, "the root's own duration")
	_, takeNames = s.Merge(&Summary{Spans: 1, Dur: time.Hour})
	assert.False(t, takeNames, "nothing after the root does")
	assert.Equal(t, 6, s.Spans)
}

// The incoming threshold is the strictest consistent th among the spans;
// an explicit rv is the first one seen.
func TestSummaryMergeKeepsTheStrictestIncomingThreshold(t *testing.T) {
	var s Summary
	assert.Equal(t, sampling.AlwaysSampleThreshold, s.InThreshold(), "no th: probability 1")
	s.Merge(&Summary{Spans: 1, TIn: threshold(t, 0.5), HasTIn: true})
	s.Merge(&Summary{Spans: 1, TIn: threshold(t, 0.1), HasTIn: true})
	s.Merge(&Summary{Spans: 1, TIn: threshold(t, 0.25), HasTIn: true})
	assert.InDelta(t, 0.1, s.InThreshold().Probability(), 1e-3)
	rv, err := sampling.UnsignedToRandomness(7)
	require.NoError(t, err)
	s.Merge(&Summary{Rnd: rv, HasRnd: true})
	other, err := sampling.UnsignedToRandomness(9)
	require.NoError(t, err)
	s.Merge(&Summary{Rnd: other, HasRnd: true})
	assert.Equal(t, rv, s.Rnd)
}

// The tail's threshold is conditional on what arrived: p of what a head
// sampler kept at p_in is p·p_in, never above p_in.
func TestDownstreamMultipliesTheIncomingProbability(t *testing.T) {
	tIn := threshold(t, 0.1)
	assert.Equal(t, tIn, Downstream(tIn, 1), "p = 1 keeps what arrived as it is")
	out := Downstream(tIn, 0.25)
	assert.InDelta(t, 0.025, out.Probability(), 0.025*1e-2)
	assert.False(t, sampling.ThresholdLessThan(out, tIn), "never less strict than the incoming threshold")
	assert.InDelta(t, 0.25, Downstream(sampling.AlwaysSampleThreshold, 0.25).Probability(), 1e-3)
}
