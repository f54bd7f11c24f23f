// Package metadata holds the component's type, stability and telemetry.
// Written by hand: mdatagen is not obtainable in this build environment, so
// this mirrors what it would generate.
package metadata

import "go.opentelemetry.io/collector/component"

var (
	Type      = component.MustNewType("trace_router")
	ScopeName = "github.com/otelcol-cost/otelcol-cost/receiver/tracerouterreceiver"
)

const TracesStability = component.StabilityLevelDevelopment
