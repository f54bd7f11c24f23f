package otep235

import (
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func threshold(t *testing.T, p float64) sampling.Threshold {
	t.Helper()
	th, err := sampling.ProbabilityToThreshold(p)
	require.NoError(t, err)
	return th
}

func TestWithThreshold(t *testing.T) {
	half := threshold(t, 0.5)     // th:8
	eighth := threshold(t, 0.125) // th:e
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"empty", "", "ot=th:8", true},
		{"other members kept", "vendor=x,ot=rv:abcdefabcdefab", "ot=rv:abcdefabcdefab;th:8,vendor=x", true},
		{"stricter upstream threshold kept", "ot=th:e", "ot=th:e", true},
		{"looser upstream threshold tightened", "ot=th:4", "ot=th:8", true},
		{"unparseable left alone", "not a tracestate!!", "not a tracestate!!", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := WithThreshold(tc.in, half)
			assert.Equal(t, tc.ok, ok)
			if tc.name == "other members kept" {
				assert.Contains(t, got, "vendor=x")
				assert.Contains(t, got, "th:8")
				assert.Contains(t, got, "rv:abcdefabcdefab")
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
	got, ok := WithThreshold("", sampling.AlwaysSampleThreshold)
	assert.True(t, ok)
	assert.Equal(t, "ot=th:0", got)
	got, _ = WithThreshold("ot=th:8", eighth)
	assert.Equal(t, "ot=th:e", got)
}

func TestRandomness(t *testing.T) {
	id := pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x11}
	assert.Equal(t, sampling.TraceIDToRandomness(id), Randomness(id, ""))
	assert.Equal(t, sampling.TraceIDToRandomness(id), Randomness(id, "vendor=rv:1"), "rv of another vendor is not ours")
	rnd := Randomness(id, "ot=rv:00000000000001")
	assert.Equal(t, uint64(1), rnd.Unsigned())
	assert.Equal(t, sampling.TraceIDToRandomness(id), Randomness(id, "ot=rv:zz"), "a bad rv falls back to the trace ID")
}

func TestWeightReader(t *testing.T) {
	var r WeightReader
	span := ptrace.NewSpan()
	w, bad := r.Weight(span)
	assert.Equal(t, 1.0, w)
	assert.False(t, bad)
	span.TraceState().FromRaw("ot=th:c")
	w, _ = r.Weight(span)
	assert.Equal(t, 4.0, w)
	span.TraceState().FromRaw("ot=th:c;junk")
	w, bad = r.Weight(span)
	assert.Equal(t, 1.0, w)
	assert.True(t, bad)
	span.Attributes().PutDouble(AdjustedCountAttribute, 3)
	w, bad = r.Weight(span)
	assert.Equal(t, 3.0, w, "the attribute counts when the tracestate cannot")
	assert.True(t, bad)
}
