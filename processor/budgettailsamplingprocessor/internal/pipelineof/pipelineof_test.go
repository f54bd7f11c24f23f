package pipelineof

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// withAttrs has the shape of the collector's attribute-carrying core.
type withAttrs struct {
	zapcore.Core
	attrs []attribute.KeyValue
}

func TestOfReadsTheInjectedPipelineID(t *testing.T) {
	core, _ := observer.New(zapcore.InfoLevel)
	logger := zap.New(withAttrs{Core: core, attrs: []attribute.KeyValue{
		attribute.String("otelcol.component.id", "budget_tail_sampling"),
		attribute.String(Key, "traces/a"),
	}})
	id, ok := Of(logger)
	assert.True(t, ok)
	assert.Equal(t, "traces/a", id)
}

func TestOfReportsFalseWithoutIt(t *testing.T) {
	_, ok := Of(zap.NewNop())
	assert.False(t, ok)
	core, _ := observer.New(zapcore.InfoLevel)
	_, ok = Of(zap.New(withAttrs{Core: core}))
	assert.False(t, ok)
}
