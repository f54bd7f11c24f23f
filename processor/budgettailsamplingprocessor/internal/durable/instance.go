package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// InstanceDir is where the log of one processor instance lives under root:
// a directory named after its component ID and, when known, the pipeline
// it was made for ("/" made "_"). The collector makes one instance per
// pipeline, all with the same ID: named after the ID alone, two pipelines
// using one sampler would share a log.
func InstanceDir(root, component, pipeline string) string {
	name := strings.ReplaceAll(component, "/", "_")
	if pipeline != "" {
		name += "__" + strings.ReplaceAll(pipeline, "/", "_")
	}
	return filepath.Join(root, name)
}

// OpenInstance opens the log of an instance (InstanceDir). A log left by a
// version that named the directory after the component alone is taken over
// first, so that an upgrade replays what it held: the first instance to
// start renames it to its own, unless another process still holds it.
// Errors name the directory.
func OpenInstance(root, component, pipeline string, opts Options) (*Log, error) {
	dir := InstanceDir(root, component, pipeline)
	if legacy := InstanceDir(root, component, ""); legacy != dir {
		if err := adopt(legacy, dir); err != nil {
			return nil, fmt.Errorf("cannot take over the log in %q: %w", legacy, err)
		}
	}
	l, err := Open(dir, opts)
	if err != nil && !errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("cannot write the log in %q: %w", dir, err)
	}
	return l, err
}

// adopt renames legacy to dir when legacy holds segments, dir does not
// exist, and no one holds legacy's lock.
func adopt(legacy, dir string) error {
	segs, _ := filepath.Glob(filepath.Join(legacy, "wal-*.log"))
	if len(segs) == 0 {
		return nil
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		return nil
	}
	lock, err := lockDir(legacy)
	if errors.Is(err, ErrLocked) {
		return nil // an older process still writes it: it is its log
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	return os.Rename(legacy, dir)
}
