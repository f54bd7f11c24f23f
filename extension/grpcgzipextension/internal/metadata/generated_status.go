// Package metadata holds the component's type and stability.
// Written by hand: mdatagen is not obtainable in this build environment, so
// this mirrors what it would generate.
package metadata

import "go.opentelemetry.io/collector/component"

var (
	Type      = component.MustNewType("grpc_gzip")
	ScopeName = "github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension"
)

const ExtensionStability = component.StabilityLevelAlpha
