package grpcgzipextension // import "github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension"

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// levelSetter holds gRPC's gzip at its level while it runs. The compressor
// is one per process, so two instances asking for different levels are a
// configuration error, reported when the second starts.
type levelSetter struct {
	id      component.ID
	level   int
	started bool
}

var owner struct {
	sync.Mutex
	id      component.ID
	level   int
	running int
}

func (e *levelSetter) Start(context.Context, component.Host) error {
	owner.Lock()
	defer owner.Unlock()
	if owner.running > 0 && owner.level != e.level {
		return fmt.Errorf("%s: level %d conflicts with level %d of %s: gRPC's gzip compressor is one per process",
			e.id, e.level, owner.level, owner.id)
	}
	if owner.running == 0 {
		owner.id, owner.level = e.id, e.level
	}
	owner.running++
	e.started = true
	registered.setLevel(e.level)
	return nil
}

// Shutdown gives the default level back once no instance runs, so that a
// reloaded configuration without the extension gets the default.
func (e *levelSetter) Shutdown(context.Context) error {
	owner.Lock()
	defer owner.Unlock()
	if !e.started {
		return nil // Start failed or never ran
	}
	e.started = false
	owner.running--
	if owner.running == 0 {
		registered.setLevel(DefaultLevel)
	}
	return nil
}
