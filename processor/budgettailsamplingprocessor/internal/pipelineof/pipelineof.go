// Package pipelineof tells which pipeline a component instance was made
// for. The collector makes one processor instance per pipeline, all with
// the same component ID, and says which pipeline only in the attributes it
// injects into the instance's logger (otelcol.pipeline.id); it has no API
// for it. An instance that owns something on disk (the durable log) needs
// it, or two pipelines using one sampler share a directory.
//
// It owns reading that attribute; it must not know what the caller does
// with it. When the collector's logger stops carrying it in the shape read
// here, Of reports false and the caller falls back to the component ID
// (the log's lock then refuses a second instance by name, never silently).
package pipelineof // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/pipelineof"

import (
	"reflect"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Key is the attribute the collector injects into a pipeline component's
// logger.
const Key = "otelcol.pipeline.id"

// Of is the pipeline ID the collector injected into logger, and whether it
// found one.
func Of(logger *zap.Logger) (string, bool) {
	var id string
	var ok bool
	logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		id, ok = fromCore(c)
		return c
	}))
	return id, ok
}

var keyValues = reflect.TypeOf([]attribute.KeyValue(nil))

// fromCore reads the pipeline ID from the collector's attribute-carrying
// core: a struct with a field attrs []attribute.KeyValue (v0.161's
// componentattribute.coreWithAttributes).
func fromCore(c zapcore.Core) (string, bool) {
	v := reflect.ValueOf(c)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	copied := reflect.New(v.Type()).Elem()
	copied.Set(v)
	f := copied.FieldByName("attrs")
	if !f.IsValid() || f.Type() != keyValues {
		return "", false
	}
	// The field is unexported: read through its address, typed as checked.
	attrs := *(*[]attribute.KeyValue)(unsafe.Pointer(f.UnsafeAddr()))
	for _, kv := range attrs {
		if kv.Key == Key && kv.Value.Type() == attribute.STRING {
			return kv.Value.AsString(), kv.Value.AsString() != ""
		}
	}
	return "", false
}
