package outliers // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/outliers"

import (
	"errors"
	"fmt"
	"time"
)

// Config is the outliers option block of budget_tail_sampling.
type Config struct {
	Quantile                 float64       `mapstructure:"quantile"`
	MinObservations          int           `mapstructure:"min_observations"`
	FallbackLatencyThreshold time.Duration `mapstructure:"fallback_latency_threshold"`
	// GroupBy are attribute keys of the root span (resource, then span); the
	// pseudo-key "span.name" is the root span's name. Read by whoever builds
	// the group keys, not here.
	GroupBy   []string      `mapstructure:"group_by"`
	MaxGroups int           `mapstructure:"max_groups"`
	Window    time.Duration `mapstructure:"window"`
	// RelativeAccuracy of the quantile sketch.
	RelativeAccuracy float64 `mapstructure:"relative_accuracy"`
}

// DefaultConfig learns the 99th percentile per groupBy over ten minutes,
// after 100 traces of a group (a second until then).
func DefaultConfig(groupBy []string) Config {
	return Config{
		Quantile:                 0.99,
		MinObservations:          100,
		FallbackLatencyThreshold: time.Second,
		GroupBy:                  groupBy,
		MaxGroups:                1000,
		Window:                   10 * time.Minute,
		RelativeAccuracy:         0.01,
	}
}

// Check reports every invalid field, named under outliers.
func (c *Config) Check() []error {
	var errs []error
	if !(c.Quantile > 0 && c.Quantile < 1) {
		errs = append(errs, fmt.Errorf("outliers.quantile: must be in (0, 1), got %v", c.Quantile))
	}
	if c.MinObservations < 1 {
		errs = append(errs, fmt.Errorf("outliers.min_observations: must be ≥ 1, got %d", c.MinObservations))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"fallback_latency_threshold", c.FallbackLatencyThreshold}, {"window", c.Window}} {
		if f.d <= 0 {
			errs = append(errs, fmt.Errorf("outliers.%s: must be > 0, got %v", f.name, f.d))
		}
	}
	if c.MaxGroups < 1 {
		errs = append(errs, fmt.Errorf("outliers.max_groups: must be ≥ 1, got %d", c.MaxGroups))
	}
	if len(c.GroupBy) == 0 {
		errs = append(errs, errors.New("outliers.group_by: at least one key is required"))
	}
	for i, k := range c.GroupBy {
		if k == "" {
			errs = append(errs, fmt.Errorf("outliers.group_by[%d]: key must not be empty", i))
		}
	}
	if !(c.RelativeAccuracy > 0 && c.RelativeAccuracy < 0.5) {
		errs = append(errs, fmt.Errorf("outliers.relative_accuracy: must be in (0, 0.5), got %v", c.RelativeAccuracy))
	}
	return errs
}
