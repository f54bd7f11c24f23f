package relief // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// Observe reports relief's state, levels, activations and probability
// (what it decided is the glue's to count).
func (c *Controller) Observe(t *metadata.Telemetry, o metric.Observer) {
	var active int64
	if c.Active() {
		active = 1
	}
	o.ObserveInt64(t.ReliefActive, active, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", ReasonNames[c.Reason()]))))
	for s, v := range c.Levels() {
		o.ObserveFloat64(t.ReliefLevel, v, metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", SignalNames[s]))))
	}
	o.ObserveInt64(t.ReliefActivations, c.Activations())
	o.ObserveFloat64(t.ReliefProb, c.Probability().P)
}
