// Package grpcgzipextension makes gRPC's "gzip" compressor
// klauspost/compress's for the whole process as soon as it is imported
// (same wire format, ≈ 3× less CPU to compress than grpc-go's, which wraps
// the standard library), and provides the grpc_gzip extension, which sets
// its level: configgrpc has no option for it.
package grpcgzipextension // import "github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension/internal/metadata"
)

// NewFactory returns the grpc_gzip extension factory. Importing this
// package already makes gRPC's gzip klauspost/compress's (see README); the
// extension only sets its level.
func NewFactory() extension.Factory {
	return extension.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			return &levelSetter{id: set.ID, level: cfg.(*Config).Level}, nil
		},
		metadata.ExtensionStability,
	)
}
