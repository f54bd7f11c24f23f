package spancostprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor"

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
)

const serviceNameKey = "service.name"

var stagePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Config is the span_cost processor's configuration.
type Config struct {
	// Stage labels every series, so that the same processor placed before and
	// after a sampler shows what sampling saved.
	Stage string `mapstructure:"stage"`
	// Dimensions are attribute keys looked up on the resource, then on the span.
	Dimensions []string `mapstructure:"dimensions"`
	// MaxSeries caps the distinct dimension sets tracked; the rest go to _other.
	MaxSeries int `mapstructure:"max_series"`
	// Pricing turns bytes and spans into money.
	Pricing pricing.Config `mapstructure:"pricing"`
	// Budgets are monthly budgets per service.
	Budgets BudgetsConfig `mapstructure:"budgets"`
	// BudgetsFile holds the budgets instead, re-read while the collector
	// runs (see budgets.go).
	BudgetsFile BudgetsFileConfig `mapstructure:"budgets_file"`
	// DryRun meters only what a dry-running budget_tail_sampling before
	// this processor would keep, sized as it would be sent (see dryrun.go):
	// the kept stage's spend as enforcing would make it.
	DryRun bool `mapstructure:"dry_run"`
	// ProjectionWindow is how far back the rate behind the projected monthly
	// spend looks.
	ProjectionWindow time.Duration `mapstructure:"projection_window"`
}

// BudgetsConfig holds monthly budgets, in the pricing currency.
type BudgetsConfig struct {
	// DefaultMonthly applies to every series without its own budget; 0 means none.
	DefaultMonthly float64 `mapstructure:"default_monthly"`
	// Services maps a service.name to its monthly budget.
	Services map[string]float64 `mapstructure:"services"`
}

func createDefaultConfig() *Config {
	return &Config{
		Stage:            "received",
		Dimensions:       []string{serviceNameKey},
		MaxSeries:        1000,
		Pricing:          pricing.DefaultConfig(),
		ProjectionWindow: 10 * time.Minute,
		BudgetsFile:      BudgetsFileConfig{CheckInterval: 5 * time.Second},
	}
}

// Validate reports every invalid field by name.
func (c *Config) Validate() error {
	var errs []error
	if !stagePattern.MatchString(c.Stage) {
		errs = append(errs, fmt.Errorf("stage: must match %s, got %q", stagePattern, c.Stage))
	}
	if len(c.Dimensions) == 0 {
		errs = append(errs, errors.New("dimensions: at least one attribute key is required"))
	}
	labels := map[string]string{"stage": "stage"}
	for i, d := range c.Dimensions {
		switch {
		case d == "":
			errs = append(errs, fmt.Errorf("dimensions[%d]: attribute key must not be empty", i))
		case slices.Index(c.Dimensions, d) != i:
			errs = append(errs, fmt.Errorf("dimensions[%d]: duplicate attribute key %q", i, d))
		default:
			if other, ok := labels[promLabel(d)]; ok {
				errs = append(errs, fmt.Errorf("dimensions[%d]: %q becomes metric label %q, which %q already uses", i, d, promLabel(d), other))
			}
			labels[promLabel(d)] = d
		}
	}
	if c.MaxSeries < 1 {
		errs = append(errs, fmt.Errorf("max_series: must be ≥ 1, got %d", c.MaxSeries))
	}
	if c.ProjectionWindow < time.Minute {
		errs = append(errs, fmt.Errorf("projection_window: must be ≥ 1m, got %v", c.ProjectionWindow))
	}
	errs = append(errs, c.Budgets.check(c.Dimensions)...)
	if c.BudgetsFile.Path != "" && c.BudgetsFile.CheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("budgets_file.check_interval: must be > 0, got %v", c.BudgetsFile.CheckInterval))
	}
	return errors.Join(errs...)
}

// check reports every invalid budget, named under budgets.
func (b *BudgetsConfig) check(dims []string) []error {
	var errs []error
	if !validBudget(b.DefaultMonthly) {
		errs = append(errs, fmt.Errorf("budgets.default_monthly: must be a finite number ≥ 0, got %v", b.DefaultMonthly))
	}
	for svc, v := range b.Services {
		if !validBudget(v) {
			errs = append(errs, fmt.Errorf("budgets.services.%s: must be a finite number ≥ 0, got %v", svc, v))
		}
	}
	if len(b.Services) > 0 && !slices.Contains(dims, serviceNameKey) {
		errs = append(errs, fmt.Errorf("budgets.services: per-service budgets need %q among dimensions", serviceNameKey))
	}
	return errs
}

func validBudget(v float64) bool {
	return v >= 0 && !math.IsInf(v, 0)
}
