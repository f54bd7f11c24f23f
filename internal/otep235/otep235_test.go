package otep235

import (
	"fmt"
	"strings"
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
	high := sampling.TraceIDToRandomness(pcommon.TraceID{8: 0xff, 9: 0xff})
	for _, tc := range []struct {
		name, in, want string
		problem        Problem
	}{
		{"empty", "", "ot=th:8", OK},
		{"ot moves to the front, other members kept", "vendor=x,ot=rv:abcdefabcdefab", "ot=rv:abcdefabcdefab;th:8,vendor=x", OK},
		{"stricter upstream threshold kept", "ot=th:e", "ot=th:e", OK},
		{"looser upstream threshold tightened", "ot=th:4", "ot=th:8", OK},
		{"inconsistent upstream threshold replaced", "ot=th:e;rv:10000000000000", "ot=rv:10000000000000;th:8", OK},
		{"empty members ignored", "a=1,,b=2", "ot=th:8,a=1,b=2", OK},
		{"malformed list replaced", "not a tracestate!!", "ot=th:8", Unparseable},
		{"malformed ot member replaced, others kept", "ot=th:zz,b=2", "ot=th:8,b=2", Unparseable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := WithThreshold(tc.in, half, high)
			assert.Equal(t, tc.problem, problem)
			assert.Equal(t, tc.want, got)
		})
	}
	got, problem := WithThreshold("", sampling.AlwaysSampleThreshold, high)
	assert.Equal(t, OK, problem)
	assert.Equal(t, "ot=th:0", got)
	got, _ = WithThreshold("ot=th:8", eighth, high)
	assert.Equal(t, "ot=th:e", got)

	// 32 members: ot is a 33rd, the rightmost goes (W3C).
	var members []string
	for i := 0; i < 32; i++ {
		members = append(members, fmt.Sprintf("k%d=%s", i, strings.Repeat("v", 256)))
	}
	got, problem = WithThreshold(strings.Join(members, ","), half, high)
	assert.Equal(t, Truncated, problem)
	parts := strings.Split(got, ",")
	assert.Len(t, parts, 32)
	assert.Equal(t, "ot=th:8", parts[0])
	assert.Equal(t, members[30], parts[31])

	// An ot member already near its 256-character limit: th still fits.
	long := "ot=rv:abcdefabcdefab;x:" + strings.Repeat("y", 235) // 255 characters
	got, problem = WithThreshold(long, half, high)
	assert.Equal(t, Truncated, problem)
	assert.Equal(t, "ot=rv:abcdefabcdefab;th:8", got)
	_, problem = Parse(got)
	assert.Equal(t, OK, problem)
}

func TestParseAndConsistency(t *testing.T) {
	s, problem := Parse("vendor=1,ot=th:c;rv:f0000000000000")
	require.Equal(t, OK, problem)
	assert.True(t, s.HasThreshold)
	assert.True(t, s.HasRandomness)
	_, problem = s.Consistent(pcommon.TraceID{})
	assert.Equal(t, OK, problem, "rv 0xf0… passes th 0xc…")
	s, _ = Parse("ot=th:c")
	low := pcommon.TraceID{9: 0x10}
	s2, problem := s.Consistent(low)
	assert.Equal(t, Inconsistent, problem, "the trace ID's randomness 0x10… fails th 0xc…")
	assert.False(t, s2.HasThreshold)
	_, problem = Parse("ot=th:c;;")
	assert.Equal(t, Unparseable, problem)
}

func TestDownstream(t *testing.T) {
	tenth := threshold(t, 0.1)
	out := Downstream(tenth, 0.5, 4)
	assert.InDelta(t, 0.05, out.Probability(), 0.0005, "P2T(p · T2P(T_in))")
	assert.Equal(t, tenth, Downstream(tenth, 1, 4), "p = 1 keeps T_in exactly")
	assert.False(t, sampling.ThresholdLessThan(Downstream(tenth, 0.99999, 3), tenth), "never below T_in")
	assert.Equal(t, 0.25, Downstream(sampling.AlwaysSampleThreshold, 0.25, 3).Probability())
}

func TestTraceRandomness(t *testing.T) {
	id := pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x11}
	of := func(ts string) sampling.Randomness {
		s, _ := Parse(ts)
		return s.TraceRandomness(id)
	}
	assert.Equal(t, sampling.TraceIDToRandomness(id), of(""))
	assert.Equal(t, sampling.TraceIDToRandomness(id), of("vendor=rv:1"), "rv of another vendor is not ours")
	assert.Equal(t, uint64(1), of("ot=rv:00000000000001").Unsigned())
	assert.Equal(t, sampling.TraceIDToRandomness(id), of("ot=rv:zz"), "a bad rv falls back to the trace ID")
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

// Whatever a client sends as tracestate, writing th never panics and leaves
// a tracestate that parses, carries th, and has at most 32 members.
func FuzzWithThreshold(f *testing.F) {
	for _, seed := range []string{"", "ot=th:8", "vendor=1,ot=rv:abcdefabcdefab;th:c", "a=1,,b=2", "not a tracestate!!",
		"ot=th:zz,b=2", "ot=th:e;rv:10000000000000", strings.Repeat("k=v,", 40)} {
		f.Add(seed, uint64(0x80000000000000))
	}
	f.Fuzz(func(t *testing.T, ts string, thUnsigned uint64) {
		th, err := sampling.UnsignedToThreshold(thUnsigned % sampling.MaxAdjustedCount)
		if err != nil {
			t.Skip()
		}
		Parse(ts) // must not panic
		out, _ := WithThreshold(ts, th, sampling.TraceIDToRandomness(pcommon.TraceID{8: 0xff, 9: 0xff}))
		s, problem := Parse(out)
		if problem != OK {
			t.Fatalf("%q → %q does not parse", ts, out)
		}
		if !s.HasThreshold && th != sampling.AlwaysSampleThreshold {
			t.Fatalf("%q → %q has no th", ts, out)
		}
		if n := strings.Count(out, ",") + 1; n > 32 {
			t.Fatalf("%q → %d members", out, n)
		}
	})
}
