package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"fmt"
	"time"
)

// Config is durable.
type Config struct {
	// Enabled writes every buffered fragment to the log before the request
	// is acknowledged, and replays the log on start.
	Enabled bool `mapstructure:"enabled"`
	// Directory holds the log, in a subdirectory per processor (its
	// component ID): one volume serves several pipelines.
	Directory string `mapstructure:"directory"`
	// Sync is none, interval or always (see SyncNone, SyncInterval,
	// SyncAlways).
	Sync string `mapstructure:"sync"`
	// SyncInterval is how often sync interval flushes to the device.
	SyncInterval time.Duration `mapstructure:"sync_interval"`
	// SegmentBytes is a segment file's size: what is deleted at once.
	SegmentBytes int64 `mapstructure:"segment_bytes"`
	// MaxBytes bounds the log on disk; 0 is twice max_buffered_bytes.
	MaxBytes int64 `mapstructure:"max_bytes"`
}

// DefaultConfig is off; on, it writes to the page cache before each
// acknowledgement and flushes every second.
func DefaultConfig() Config {
	return Config{Sync: SyncInterval, SyncInterval: time.Second, SegmentBytes: 8 << 20}
}

// Check reports every invalid field, named under durable.
func (c *Config) Check() []error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.Directory == "" {
		errs = append(errs, fmt.Errorf("durable.directory: must be set when durable.enabled is true"))
	}
	switch c.Sync {
	case SyncNone, SyncAlways:
	case SyncInterval:
		if c.SyncInterval <= 0 {
			errs = append(errs, fmt.Errorf("durable.sync_interval: must be > 0 with sync %q, got %v", SyncInterval, c.SyncInterval))
		}
	default:
		errs = append(errs, fmt.Errorf("durable.sync: must be %q, %q or %q, got %q", SyncNone, SyncInterval, SyncAlways, c.Sync))
	}
	if c.SegmentBytes < 64<<10 {
		errs = append(errs, fmt.Errorf("durable.segment_bytes: must be ≥ 65536, got %d", c.SegmentBytes))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("durable.max_bytes: must be ≥ 0, got %d", c.MaxBytes))
	} else if c.MaxBytes > 0 && c.MaxBytes < 4*c.SegmentBytes {
		errs = append(errs, fmt.Errorf("durable.max_bytes: must be 0 or at least 4 × segment_bytes (%d), got %d", 4*c.SegmentBytes, c.MaxBytes))
	}
	return errs
}
