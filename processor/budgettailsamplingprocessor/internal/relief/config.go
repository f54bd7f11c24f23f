package relief // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"

import (
	"fmt"
	"time"
)

// Modes, in Refinery's words so that its users know them.
const (
	ModeNever   = "never"
	ModeMonitor = "monitor"
	ModeAlways  = "always"
)

// Config is stress_relief.
type Config struct {
	// Mode is never (buffer every trace, as before), monitor (relieve while
	// a load level is past ActivationLevel) or always (decide every new
	// trace at arrival: for tests and emergencies).
	Mode string `mapstructure:"mode"`
	// ActivationLevel is the load, in percent, at which relief starts: of
	// max_traces or max_buffered_bytes (buffered now, or projected from the
	// arrival rate) or of MemoryLimitMiB.
	ActivationLevel float64 `mapstructure:"activation_level"`
	// DeactivationLevel is the load, in percent, every level must be under
	// for relief to stop.
	DeactivationLevel float64 `mapstructure:"deactivation_level"`
	// MinimumActivationDuration is the least time relief stays on.
	MinimumActivationDuration time.Duration `mapstructure:"minimum_activation_duration"`
	// MinimumDeactivationDuration is the least time relief stays off once
	// it stopped.
	MinimumDeactivationDuration time.Duration `mapstructure:"minimum_deactivation_duration"`
	// MemoryLimitMiB is the Go heap the memory level is measured against:
	// set it to memory_limiter's soft limit (limit_mib − spike_limit_mib) so
	// that relief starts before memory_limiter refuses. 0 takes GOMEMLIMIT
	// when it is set, else the memory level is not watched.
	MemoryLimitMiB uint64 `mapstructure:"memory_limit_mib"`
	// MemorySpikeLimitMiB is subtracted from MemoryLimitMiB: set both as
	// memory_limiter's limit_mib and spike_limit_mib (the shipped configs
	// read the same variables), and relief watches its soft limit whatever
	// the limit is set to.
	MemorySpikeLimitMiB uint64 `mapstructure:"memory_spike_limit_mib"`
	// Recall holds the fragments relief drops for a while, so that an
	// error arriving later in the trace recalls them: error traces stay
	// whole under relief.
	Recall RecallConfig `mapstructure:"recall"`
}

// RecallConfig is stress_relief.recall.
type RecallConfig struct {
	// Window is how long a dropped fragment is held; 0 holds none.
	Window time.Duration `mapstructure:"window"`
	// MaxBytes bounds the held encodings (over all shards); 0 is an
	// eighth of max_buffered_bytes.
	MaxBytes int64 `mapstructure:"max_bytes"`
}

// DefaultConfig is Refinery's levels and activation time.
func DefaultConfig() Config {
	return Config{
		Mode:                        ModeMonitor,
		ActivationLevel:             90,
		DeactivationLevel:           75,
		MinimumActivationDuration:   10 * time.Second,
		MinimumDeactivationDuration: time.Second,
		// SDKs' batch processors export every 5 s at most (sooner when a
		// batch fills): a trace's fragments arrive within it.
		Recall: RecallConfig{Window: 6 * time.Second},
	}
}

// SoftLimitMiB is the heap relief's memory level is measured against:
// memory_limit_mib − memory_spike_limit_mib (0: not set).
func (c *Config) SoftLimitMiB() uint64 {
	if c.MemoryLimitMiB <= c.MemorySpikeLimitMiB {
		return 0
	}
	return c.MemoryLimitMiB - c.MemorySpikeLimitMiB
}

// Check reports every invalid field, named under stress_relief.
func (c *Config) Check() []error {
	var errs []error
	if c.MemorySpikeLimitMiB > 0 && c.MemorySpikeLimitMiB >= c.MemoryLimitMiB {
		errs = append(errs, fmt.Errorf("stress_relief.memory_spike_limit_mib: must be below memory_limit_mib (%d), got %d", c.MemoryLimitMiB, c.MemorySpikeLimitMiB))
	}
	switch c.Mode {
	case ModeNever, ModeMonitor, ModeAlways:
	default:
		errs = append(errs, fmt.Errorf("stress_relief.mode: must be %q, %q or %q, got %q", ModeNever, ModeMonitor, ModeAlways, c.Mode))
	}
	level := func(name string, v float64) bool {
		if !(v > 0 && v <= 100) {
			errs = append(errs, fmt.Errorf("stress_relief.%s: must be a percentage in (0, 100], got %v", name, v))
			return false
		}
		return true
	}
	okA := level("activation_level", c.ActivationLevel)
	okD := level("deactivation_level", c.DeactivationLevel)
	if okA && okD && c.DeactivationLevel >= c.ActivationLevel {
		errs = append(errs, fmt.Errorf("stress_relief.deactivation_level: must be below activation_level (%v), got %v", c.ActivationLevel, c.DeactivationLevel))
	}
	if c.MinimumActivationDuration < 0 {
		errs = append(errs, fmt.Errorf("stress_relief.minimum_activation_duration: must be ≥ 0, got %v", c.MinimumActivationDuration))
	}
	if c.Recall.Window < 0 {
		errs = append(errs, fmt.Errorf("stress_relief.recall.window: must be ≥ 0, got %v", c.Recall.Window))
	}
	if c.Recall.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("stress_relief.recall.max_bytes: must be ≥ 0, got %d", c.Recall.MaxBytes))
	}
	if c.MinimumDeactivationDuration < 0 {
		errs = append(errs, fmt.Errorf("stress_relief.minimum_deactivation_duration: must be ≥ 0, got %v", c.MinimumDeactivationDuration))
	}
	return errs
}
