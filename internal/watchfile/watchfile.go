// Package watchfile reads a file that may change while the collector runs
// (a mounted ConfigMap) and hands each new content to its reader once: its
// status says which version runs, whether the file's content is rejected,
// and how many changes were applied and rejected.
//
// It owns reading, change detection, decoding YAML as the collector reads
// its configuration, and the status. It must not know what the file holds:
// the caller validates and applies it.
package watchfile // import "github.com/otelcol-cost/otelcol-cost/internal/watchfile"

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"

	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"
)

// Watcher watches one file. Check runs on one goroutine; the status
// (Version, Rejected, Reloads) is read from any.
type Watcher struct {
	version  atomic.Pointer[string]
	rejected atomic.Bool
	applied  atomic.Int64
	failed   atomic.Int64

	path string
	// field names the file's option in errors (e.g. policy_file.path).
	field string
	last  [sha256.Size]byte
	read  bool
	// readErr is the last failure to read the file, reported once.
	readErr string
	// lastValid is whether the content last read could be applied.
	lastValid bool
}

// New watches path, named field in errors.
func New(path, field string) *Watcher { return &Watcher{path: path, field: field} }

// Path is the file's path.
func (w *Watcher) Path() string { return w.path }

// Apply takes a new content and its hash (12 hex digits) and returns the
// version it runs as ("": the hash), or why it cannot be applied.
type Apply func(data []byte, hash string) (version string, err error)

// Check reads the file. changed is true when the content differs from the
// last read (or the file cannot be read, once per failure); then apply was
// called, and err is why the content was not applied (the running state
// stays). An unchanged file, valid or not, is neither applied nor reported
// again.
func (w *Watcher) Check(apply Apply) (changed bool, err error) {
	data, err := os.ReadFile(w.path)
	if err != nil {
		err = fmt.Errorf("%s: %w", w.field, err)
		if err.Error() == w.readErr {
			return false, nil
		}
		w.readErr = err.Error()
		w.rejected.Store(true)
		w.failed.Add(1)
		return true, err
	}
	w.readErr = ""
	sum := sha256.Sum256(data)
	if w.read && sum == w.last {
		// Unchanged (back after an unreadable spell, maybe): rejected as
		// long as this content is.
		w.rejected.Store(!w.lastValid)
		return false, nil
	}
	w.last, w.read = sum, true
	hash := hex.EncodeToString(sum[:6])
	version, err := apply(data, hash)
	w.lastValid = err == nil
	w.rejected.Store(err != nil)
	if err != nil {
		w.failed.Add(1)
		return true, err
	}
	if version == "" {
		version = hash
	}
	w.applied.Add(1)
	w.version.Store(&version)
	return true, nil
}

// Running records the version that runs when it did not come from the
// file (a content kept from an earlier run, the file's current one
// rejected).
func (w *Watcher) Running(version string) { w.version.Store(&version) }

// Version is the version of the last content applied ("" before).
func (w *Watcher) Version() string {
	if v := w.version.Load(); v != nil {
		return *v
	}
	return ""
}

// Rejected is whether the file's current content cannot be applied.
func (w *Watcher) Rejected() bool { return w.rejected.Load() }

// Reloads are the changes read, applied and rejected.
func (w *Watcher) Reloads() (applied, rejected int64) { return w.applied.Load(), w.failed.Load() }

// Decode reads a content's YAML into v as the collector reads its
// configuration (confmap): durations and the like decoded, a key v does
// not have rejected by name.
func Decode(data []byte, v any) error {
	raw := map[string]any{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	return confmap.NewFromStringMap(raw).Unmarshal(v)
}
