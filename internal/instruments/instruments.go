// Package instruments creates a component's metric instruments on its
// meter, each with its description and unit, and gathers their errors, so
// that a component's telemetry lists each instrument in one line. It
// stands in for what mdatagen generates (mdatagen is not obtainable here).
//
// It owns nothing but the creation; it must not know any component.
package instruments

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// Builder creates instruments on one meter; Err is every creation's error.
type Builder struct {
	m   metric.Meter
	err error
}

// New returns a builder on m.
func New(m metric.Meter) *Builder { return &Builder{m: m} }

// Err joins the errors of every instrument created so far.
func (b *Builder) Err() error { return b.err }

func (b *Builder) note(err error) { b.err = errors.Join(b.err, err) }

// Int64ObservableCounter creates an observable int64 counter.
func (b *Builder) Int64ObservableCounter(name, desc, unit string) metric.Int64ObservableCounter {
	i, err := b.m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	b.note(err)
	return i
}

// Float64ObservableCounter creates an observable float64 counter.
func (b *Builder) Float64ObservableCounter(name, desc, unit string) metric.Float64ObservableCounter {
	i, err := b.m.Float64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	b.note(err)
	return i
}

// Int64ObservableGauge creates an observable int64 gauge.
func (b *Builder) Int64ObservableGauge(name, desc, unit string) metric.Int64ObservableGauge {
	i, err := b.m.Int64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
	b.note(err)
	return i
}

// Float64ObservableGauge creates an observable float64 gauge.
func (b *Builder) Float64ObservableGauge(name, desc, unit string) metric.Float64ObservableGauge {
	i, err := b.m.Float64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
	b.note(err)
	return i
}

// Int64Counter creates a synchronous int64 counter.
func (b *Builder) Int64Counter(name, desc, unit string) metric.Int64Counter {
	i, err := b.m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	b.note(err)
	return i
}

// Float64Histogram creates a histogram with explicit bucket boundaries.
func (b *Builder) Float64Histogram(name, desc, unit string, bounds ...float64) metric.Float64Histogram {
	i, err := b.m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit), metric.WithExplicitBucketBoundaries(bounds...))
	b.note(err)
	return i
}

// Int64Gauge creates a synchronous int64 gauge.
func (b *Builder) Int64Gauge(name, desc, unit string) metric.Int64Gauge {
	i, err := b.m.Int64Gauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
	b.note(err)
	return i
}
