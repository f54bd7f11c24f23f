package traceinfo // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"

import (
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
)

// ThresholdPrecision is the th hex digits written: probabilities are
// rounded to 1 part in 4096, which keeps tracestate short.
const ThresholdPrecision = 3

// Probability is a sampling probability with its OTEP 235 threshold.
type Probability struct {
	P  float64
	Th sampling.Threshold
}

// NewProbability rounds p to ThresholdPrecision; p ≥ 1 is Always.
func NewProbability(p float64) Probability {
	if !(p < 1) {
		return Probability{P: 1, Th: sampling.AlwaysSampleThreshold}
	}
	p = max(p, sampling.MinSamplingProbability)
	th, err := sampling.ProbabilityToThresholdWithPrecision(p, ThresholdPrecision)
	if err != nil {
		return Probability{P: 1, Th: sampling.AlwaysSampleThreshold}
	}
	return Probability{P: th.Probability(), Th: th}
}

// Always keeps everything.
var Always = NewProbability(1)

// Higher is the larger of two probabilities.
func Higher(a, b Probability) Probability {
	if b.P > a.P {
		return b
	}
	return a
}

// Downstream is the threshold that keeps, with conditional probability p,
// a trace that arrived sampled at tIn (OTEP 235: T_out = P2T(p · T2P(T_in))).
func Downstream(tIn sampling.Threshold, p float64) sampling.Threshold {
	return otep235.Downstream(tIn, p, ThresholdPrecision)
}
