// Package pricing is the price model shared by the span_cost and
// budget_tail_sampling processors: what a span costs once it leaves the
// cluster, from its OTLP bytes and a backend's price list.
package pricing

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

const (
	// GiB is the unit backends bill ingest and storage in.
	GiB = float64(1 << 30)
	// Month is the billing month: 730 hours, the convention cloud price lists use.
	Month = 730 * time.Hour
)

// Preset names.
const (
	PresetSelfHostedObjectStorage = "self_hosted_object_storage"
	PresetManagedIngest           = "managed_ingest"
	PresetSaaSIndexed             = "saas_indexed"
)

// Model is a resolved price list.
type Model struct {
	PerGiBIngested    float64
	PerMillionSpans   float64
	PerGiBMonthStored float64
	Retention         time.Duration
	CompressionRatio  float64
	Currency          string
}

// presets hold list prices of the three backend shapes (docs/architecture.md). A
// typical 280-byte span costs, per million: self-hosted ≈ 0.0134,
// managed ingest ≈ 0.13, SaaS indexed ≈ 1.73 (see pricing_test.go).
var presets = map[string]Model{
	// Tempo-like: ingesters and compactors (≈ $0.05 of compute per GiB
	// ingested) writing compressed blocks to object storage for 14 days.
	PresetSelfHostedObjectStorage: {
		PerGiBIngested:    0.05,
		PerGiBMonthStored: 0.023,
		Retention:         14 * 24 * time.Hour,
		CompressionRatio:  8,
		Currency:          "USD",
	},
	// Managed tracing billed per GiB ingested, retention included.
	PresetManagedIngest: {
		PerGiBIngested:   0.50,
		Retention:        30 * 24 * time.Hour,
		CompressionRatio: 1,
		Currency:         "USD",
	},
	// SaaS APM billed per indexed span plus a small ingest fee.
	PresetSaaSIndexed: {
		PerGiBIngested:   0.10,
		PerMillionSpans:  1.70,
		Retention:        15 * 24 * time.Hour,
		CompressionRatio: 1,
		Currency:         "USD",
	},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Config is the `pricing:` block both processors accept. Every field but
// Preset overrides the preset's value when set.
type Config struct {
	Preset            string         `mapstructure:"preset"`
	PerGiBIngested    *float64       `mapstructure:"per_gib_ingested"`
	PerMillionSpans   *float64       `mapstructure:"per_million_spans"`
	PerGiBMonthStored *float64       `mapstructure:"per_gib_month_stored"`
	Retention         *time.Duration `mapstructure:"retention"`
	CompressionRatio  *float64       `mapstructure:"compression_ratio"`
	Currency          string         `mapstructure:"currency"`
}

// DefaultConfig prices with the self-hosted preset, the cheapest, so that a
// default configuration never overstates spend.
func DefaultConfig() Config {
	return Config{Preset: PresetSelfHostedObjectStorage}
}

// Validate names the offending field, relative to the pricing block.
func (c Config) Validate() error {
	var errs []error
	if _, ok := presets[c.Preset]; !ok {
		errs = append(errs, fmt.Errorf("preset: unknown preset %q (one of %s)", c.Preset, strings.Join(PresetNames(), ", ")))
	}
	checkPrice := func(name string, v *float64) {
		if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
			errs = append(errs, fmt.Errorf("%s: must be a finite number ≥ 0, got %v", name, *v))
		}
	}
	checkPrice("per_gib_ingested", c.PerGiBIngested)
	checkPrice("per_million_spans", c.PerMillionSpans)
	checkPrice("per_gib_month_stored", c.PerGiBMonthStored)
	if c.Retention != nil && *c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention: must be ≥ 0, got %v", *c.Retention))
	}
	if c.CompressionRatio != nil && (!(*c.CompressionRatio >= 1) || math.IsInf(*c.CompressionRatio, 0)) {
		errs = append(errs, fmt.Errorf("compression_ratio: must be a finite number ≥ 1, got %v", *c.CompressionRatio))
	}
	return errors.Join(errs...)
}

// Resolve applies the overrides to the preset. Call Validate first.
func (c Config) Resolve() Model {
	m := presets[c.Preset]
	if c.PerGiBIngested != nil {
		m.PerGiBIngested = *c.PerGiBIngested
	}
	if c.PerMillionSpans != nil {
		m.PerMillionSpans = *c.PerMillionSpans
	}
	if c.PerGiBMonthStored != nil {
		m.PerGiBMonthStored = *c.PerGiBMonthStored
	}
	if c.Retention != nil {
		m.Retention = *c.Retention
	}
	if c.CompressionRatio != nil {
		m.CompressionRatio = *c.CompressionRatio
	}
	if c.Currency != "" {
		m.Currency = c.Currency
	}
	return m
}

// PerByte is the money one ingested byte costs: ingest plus its compressed
// copy stored for the retention period.
func (m Model) PerByte() float64 {
	stored := m.PerGiBMonthStored * (float64(m.Retention) / float64(Month)) / m.CompressionRatio
	return (m.PerGiBIngested + stored) / GiB
}

// PerSpan is the money one span costs regardless of its size.
func (m Model) PerSpan() float64 {
	return m.PerMillionSpans / 1e6
}

// Cost is the money a volume of spans and OTLP bytes costs.
func (m Model) Cost(spans, bytes float64) float64 {
	return spans*m.PerSpan() + bytes*m.PerByte()
}
