// Package livepolicy reads the policy file: the part of the sampler's
// policy that may change while it runs (the budget's amount, the priority
// cap, the baseline's floor and fairness keys, the rules), validated field
// by field, and notices when the file's content changes.
//
// It owns reading, decoding and validating the file, its version and the
// metrics of its status. It must not know the buffer or when the adjuster
// applies what it returns: the processor polls Check and hands a change to
// policy.Adjuster.Retune.
package livepolicy // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/livepolicy"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/watchfile"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
)

// Config is policy_file.
type Config struct {
	// Path of the file; empty: the policy is the configuration's only.
	Path string `mapstructure:"path"`
	// CheckInterval is how often the file is read for a change.
	CheckInterval time.Duration `mapstructure:"check_interval"`
	// ShadowPath is a candidate policy in the same format, run beside the
	// live one on the same traces without deciding anything
	// (internal/shadow); empty: none.
	ShadowPath string `mapstructure:"shadow_path"`
}

// DefaultConfig checks every 5 s once a path is set.
func DefaultConfig() Config { return Config{CheckInterval: 5 * time.Second} }

// Check reports every invalid field, named under policy_file.
func (c *Config) Check() []error {
	if (c.Path != "" || c.ShadowPath != "") && c.CheckInterval <= 0 {
		return []error{fmt.Errorf("policy_file.check_interval: must be > 0, got %v", c.CheckInterval)}
	}
	return nil
}

// File is what the policy file may hold; what it leaves out is the
// configuration's.
type File struct {
	// Version names the policy in the policy_version metric; without it,
	// the first 12 hex digits of the content's SHA-256.
	Version  string       `mapstructure:"version"`
	Budget   FileBudget   `mapstructure:"budget"`
	Baseline FileBaseline `mapstructure:"baseline"`
	// Rules replace the configuration's rules (an empty list: none).
	Rules        *[]rules.Config `mapstructure:"rules"`
	Rare         FileRare        `mapstructure:"rare"`
	StressRelief FileRelief      `mapstructure:"stress_relief"`
}

// FileRare is rare.interval (rare on in the configuration).
type FileRare struct {
	Interval *time.Duration `mapstructure:"interval"`
}

// FileRelief is stress_relief's levels.
type FileRelief struct {
	ActivationLevel   *float64 `mapstructure:"activation_level"`
	DeactivationLevel *float64 `mapstructure:"deactivation_level"`
}

// FileBudget is the budget's amount, in the kind the configuration has.
type FileBudget struct {
	SpansPerSecond   *float64 `mapstructure:"spans_per_second"`
	BytesPerSecond   *float64 `mapstructure:"bytes_per_second"`
	MonthlyCost      *float64 `mapstructure:"monthly_cost"`
	MaxPriorityShare *float64 `mapstructure:"max_priority_share"`
}

// FileBaseline is baseline.min_share and baseline.keys.
type FileBaseline struct {
	MinShare *float64  `mapstructure:"min_share"`
	Keys     *[]string `mapstructure:"keys"`
}

// Base is what the configuration sets: what the file changes.
type Base struct {
	Budget   policy.BudgetConfig
	MinShare float64
	Keys     []string
	Rules    []rules.Config
	Rare     rare.Config
	Relief   relief.Config
	// DecisionWait bounds rare.interval from below.
	DecisionWait time.Duration
	// Telemetry compiles the rules' OTTL.
	Telemetry component.TelemetrySettings
}

// Policy is a validated file's effect.
type Policy struct {
	Version string
	Retune  policy.Retune
	// Rules are the file's rules (else the configuration's) as the
	// successor of the rules last returned: each keeps its slot
	// (rules.Set.Next). Nil from a shadow file, which runs the live rules.
	Rules *rules.Set
	// Keys are the fairness keys (the file's, else the configuration's);
	// nil from a shadow file.
	Keys []split.Key
	// RareInterval is rare's interval (the file's, else the
	// configuration's; 0 with rare off).
	RareInterval time.Duration
	// ReliefLevels are stress_relief's activation and deactivation levels
	// (the file's, else the configuration's).
	ReliefLevels [2]float64
}

// Watcher reads the file (internal/watchfile reports each new content
// once). Check runs on one goroutine; the status (Version, Rejected,
// Reloads) is read from any.
type Watcher struct {
	*watchfile.Watcher

	cfg  Config
	base Base
	unit policy.Unit
	// rules are the rules last returned, which the next follow.
	rules  *rules.Set
	shadow bool
	// keep is where the content last applied is kept ("" : nowhere), for a
	// start on a file that cannot be applied; keepErr is why the last one
	// could not be kept (the policy applies all the same).
	keep    string
	keepErr error
}

// KeepIn keeps every content applied in path (written whole, then renamed
// over the last), for Start to fall back on.
func (w *Watcher) KeepIn(path string) { w.keep = path }

// New watches cfg.Path over base.
func New(cfg Config, base Base) *Watcher {
	return &Watcher{Watcher: watchfile.New(cfg.Path, "policy_file.path"), cfg: cfg, base: base, unit: policy.NewUnit(base.Budget)}
}

// NewShadow watches cfg.ShadowPath over base.
func NewShadow(cfg Config, base Base) *Watcher {
	cfg.Path = cfg.ShadowPath
	return &Watcher{Watcher: watchfile.New(cfg.Path, "policy_file.shadow_path"), cfg: cfg, base: base, unit: policy.NewUnit(base.Budget), shadow: true}
}

// Load reads the file at start: a missing or invalid file is an error.
func (w *Watcher) Load() (Policy, error) {
	pol, _, err := w.Check()
	return pol, err
}

// Start reads the file at start. With strict (otelcol validate, so that
// CI catches a bad file) a file that cannot be applied is an error, naming
// the field. Otherwise a sampler must not stop on it (a restart, a
// rescheduled pod would crash-loop): the error is logged, the file counts
// as rejected (the metric and its alert), and the policy returned is the
// last one applied (KeepIn); ok false: none was kept, the configuration's
// runs. The file is applied once it changes.
func (w *Watcher) Start(logger *zap.Logger, strict bool) (pol Policy, ok bool, err error) {
	pol, err = w.Load()
	if err == nil || strict {
		if err == nil {
			w.warnUnkept(logger)
		}
		return pol, err == nil, err
	}
	which, fallback := w.which(), "the configuration's policy"
	kept, rerr := os.ReadFile(w.keep)
	if w.keep != "" && rerr == nil {
		if pol, rerr = w.parse(kept); rerr == nil {
			fallback, ok = "the last policy applied, kept in "+w.keep, true
			if pol.Version == "" {
				sum := sha256.Sum256(kept)
				pol.Version = hex.EncodeToString(sum[:6])
			}
			w.Running(pol.Version)
		}
	}
	logger.Error("policy file rejected at start: the sampler starts on "+fallback, zap.String("policy", which), zap.Error(err))
	return pol, ok, nil
}

func (w *Watcher) which() string {
	if w.shadow {
		return "shadow"
	}
	return "live"
}

// save keeps data, just applied (KeepIn), creating its directory (the
// log's, which opens after the policy is read).
func (w *Watcher) save(data []byte) error {
	if w.keep == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(w.keep), 0o750); err != nil {
		return err
	}
	tmp := w.keep + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, w.keep)
}

// warnUnkept logs that the policy just applied could not be kept: a start
// on a bad file would fall back to the configuration's.
func (w *Watcher) warnUnkept(logger *zap.Logger) {
	if w.keepErr != nil {
		logger.Warn("cannot keep the policy applied: a start on a policy file that cannot be applied will run the configuration's",
			zap.String("path", w.keep), zap.Error(w.keepErr))
	}
}

// Check reads the file. changed is true when the content differs from
// the last read; then err says why it cannot be applied (the running
// policy stays), or pol is the new policy. An unchanged file, valid or
// not, is neither applied nor reported again.
func (w *Watcher) Check() (pol Policy, changed bool, err error) {
	changed, err = w.Watcher.Check(func(data []byte, hash string) (string, error) {
		var perr error
		if pol, perr = w.parse(data); perr == nil && pol.Version == "" {
			pol.Version = hash
		}
		if perr == nil {
			w.keepErr = w.save(data)
		}
		return pol.Version, perr
	})
	if err != nil {
		pol = Policy{}
	}
	return pol, changed, err
}

// Poll checks the file (a nil Watcher: no file) and hands a change to
// apply; a file that cannot be applied is logged, naming the field, and
// the running policy stays.
func (w *Watcher) Poll(logger *zap.Logger, apply func(Policy)) {
	if w == nil {
		return
	}
	which := w.which()
	switch pol, changed, err := w.Check(); {
	case err != nil:
		logger.Error("policy file rejected: the running policy stays", zap.String("policy", which), zap.Error(err))
	case changed:
		w.warnUnkept(logger)
		apply(pol)
		fields := []zap.Field{zap.String("policy", which), zap.String("version", pol.Version),
			zap.Float64("budget_per_second", pol.Retune.PerSecond), zap.Float64("max_priority_share", pol.Retune.MaxPriorityShare)}
		if pol.Rules != nil {
			fields = append(fields, zap.Int("rules", len(pol.Rules.Order())), zap.Int("keys", len(pol.Keys)))
		}
		logger.Info("policy file applied", fields...)
	}
}

// parse decodes and validates data over the base.
func (w *Watcher) parse(data []byte) (Policy, error) {
	var f File
	if err := watchfile.Decode(data, &f); err != nil {
		return Policy{}, fmt.Errorf("policy file %s: %w", w.cfg.Path, err)
	}
	b := w.base.Budget
	set := func(dst *float64, src *float64) {
		if src != nil {
			*dst = *src
		}
	}
	if f.Budget.SpansPerSecond == nil && f.Budget.BytesPerSecond == nil && f.Budget.MonthlyCost == nil {
		// A budget is money: a file that leaves it out would put the
		// configuration's back without anyone asking for it.
		return Policy{}, fmt.Errorf("policy file %s: budget: must set the budget's amount (budget.%s), as the configuration does", w.cfg.Path, kindOf(w.base.Budget))
	}
	b.SpansPerSecond, b.BytesPerSecond, b.MonthlyCost = 0, 0, 0
	set(&b.SpansPerSecond, f.Budget.SpansPerSecond)
	set(&b.BytesPerSecond, f.Budget.BytesPerSecond)
	set(&b.MonthlyCost, f.Budget.MonthlyCost)
	set(&b.MaxPriorityShare, f.Budget.MaxPriorityShare)
	minShare := w.base.MinShare
	set(&minShare, f.Baseline.MinShare)
	errs := b.Check()
	if !(minShare >= 0 && minShare < 1) {
		errs = append(errs, fmt.Errorf("baseline.min_share: must be in [0, 1) (0 = no floor), got %v", minShare))
	}
	u := policy.NewUnit(b)
	if len(errs) == 0 && !u.SameKind(w.unit) {
		errs = append(errs, fmt.Errorf("budget: the configuration's budget is %s; the file may change its amount, not its kind (or its pricing): change the kind in the configuration", kindOf(w.base.Budget)))
	}
	pol := Policy{Version: f.Version, Retune: policy.Retune{PerSecond: u.PerSecond(), MaxPriorityShare: b.MaxPriorityShare, MinBaselineShare: minShare}}
	if w.shadow {
		if f.Rules != nil || f.Baseline.Keys != nil || f.Rare.Interval != nil || f.StressRelief != (FileRelief{}) {
			errs = append(errs, errors.New("rules, baseline.keys, rare, stress_relief: a shadow policy evaluates the live rules, keys, rare and relief (what buffered traces matched); change them in the live file (policy_file.path)"))
		}
	} else {
		errs = append(errs, w.parseMatching(f, &pol)...)
		errs = append(errs, w.parseRareAndRelief(f, &pol)...)
	}
	if err := errors.Join(errs...); err != nil {
		return Policy{}, fmt.Errorf("policy file %s: %w", w.cfg.Path, err)
	}
	if pol.Rules != nil {
		w.rules = pol.Rules
	}
	return pol, nil
}

// parseRareAndRelief reads rare.interval and stress_relief's levels,
// validated as the configuration's are.
func (w *Watcher) parseRareAndRelief(f File, pol *Policy) []error {
	var errs []error
	r := w.base.Rare
	if f.Rare.Interval != nil {
		if r.Interval == 0 || *f.Rare.Interval == 0 {
			errs = append(errs, fmt.Errorf("rare.interval: the configuration has rare %s; turning it on or off is a configuration change", map[bool]string{true: "off", false: "on"}[r.Interval == 0]))
		} else {
			r.Interval = *f.Rare.Interval
			errs = append(errs, r.Check(w.base.DecisionWait)...)
		}
	}
	pol.RareInterval = r.Interval
	rc := w.base.Relief
	if f.StressRelief != (FileRelief{}) {
		if f.StressRelief.ActivationLevel != nil {
			rc.ActivationLevel = *f.StressRelief.ActivationLevel
		}
		if f.StressRelief.DeactivationLevel != nil {
			rc.DeactivationLevel = *f.StressRelief.DeactivationLevel
		}
		errs = append(errs, rc.Check()...)
	}
	pol.ReliefLevels = [2]float64{rc.ActivationLevel, rc.DeactivationLevel}
	return errs
}

// parseMatching compiles the rules and keys, the file's or else the
// configuration's; the rules follow those last returned.
func (w *Watcher) parseMatching(f File, pol *Policy) []error {
	var errs []error
	cfgs, keys := w.base.Rules, w.base.Keys
	if f.Rules != nil {
		cfgs = *f.Rules
	}
	if f.Baseline.Keys != nil {
		keys = *f.Baseline.Keys
	}
	prev := w.rules
	if prev == nil {
		prev = &rules.Set{}
	}
	tel := w.base.Telemetry
	if tel.Logger == nil {
		tel.Logger = zap.NewNop()
	}
	var err error
	if pol.Rules, err = prev.Next(cfgs, tel); err != nil {
		errs = append(errs, err)
	}
	if pol.Keys, err = split.ParseKeys("baseline.keys", keys); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func kindOf(b policy.BudgetConfig) string {
	switch {
	case b.SpansPerSecond > 0:
		return "spans_per_second"
	case b.BytesPerSecond > 0:
		return "bytes_per_second"
	default:
		return "monthly_cost"
	}
}

// Observe reports the policy's version and the file's status; a nil
// Watcher (no policy_file) runs the configuration's, version "config".
func (w *Watcher) Observe(t *metadata.Telemetry, o metric.Observer) {
	version := "config"
	if w != nil {
		version = w.Version()
		rejected := int64(0)
		if w.Rejected() {
			rejected = 1
		}
		o.ObserveInt64(t.PolicyRejected, rejected)
		applied, failed := w.Reloads()
		o.ObserveInt64(t.PolicyReloads, applied, metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "applied"))))
		o.ObserveInt64(t.PolicyReloads, failed, metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "rejected"))))
	}
	o.ObserveInt64(t.PolicyVersion, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("version", version))))
}
