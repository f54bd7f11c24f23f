package spancostprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/cmdline"
	"github.com/otelcol-cost/otelcol-cost/internal/watchfile"
)

// Budgets change often (a quarter's end, a team's new allowance), and a
// change in the collector's configuration restarts it. With budgets_file
// the budgets live in a file of their own (in the chart, the samplers'
// policy ConfigMap), re-read every check_interval and applied to every
// series at once, keeping the spend measured so far.

// BudgetsFileConfig is budgets_file.
type BudgetsFileConfig struct {
	// Path of a file in budgets' format (default_monthly, services); it
	// replaces budgets. Empty: budgets are the configuration's.
	Path string `mapstructure:"path"`
	// CheckInterval is how often the file is re-read.
	CheckInterval time.Duration `mapstructure:"check_interval"`
}

// validating: the process is `otelcol-cost validate` (tests set it).
var validating = cmdline.Validating()

// loadBudgets reads the budgets file and applies it. A missing or invalid
// file fails `otelcol-cost validate`, naming the field, so that CI catches
// it, but not a start (a restart or a rescheduled pod would crash-loop):
// the configuration's budgets run, the file counts as rejected (the metric
// and its alert) and the error is logged; the file applies once fixed.
func (p *spanCost) loadBudgets() error {
	p.budgetsFile = watchfile.New(p.cfg.BudgetsFile.Path, "budgets_file.path")
	_, err := p.budgetsFile.Check(p.applyBudgets)
	if err != nil && !validating {
		p.logger.Error("budgets file rejected at start: the configuration's budgets run", zap.Error(err))
		return nil
	}
	return err
}

// checkBudgetsFile re-reads the file; a content that cannot be applied is
// logged, naming the field, and the running budgets stay.
func (p *spanCost) checkBudgetsFile() {
	switch changed, err := p.budgetsFile.Check(p.applyBudgets); {
	case err != nil:
		p.logger.Error("budgets file rejected: the running budgets stay", zap.Error(err))
	case changed:
		p.logger.Info("budgets file applied", zap.String("version", p.budgetsFile.Version()))
	}
}

// applyBudgets decodes and validates data and gives every series its
// budget from it.
func (p *spanCost) applyBudgets(data []byte, _ string) (string, error) {
	var f struct {
		Version       string `mapstructure:"version"`
		BudgetsConfig `mapstructure:",squash"`
	}
	if err := watchfile.Decode(data, &f); err != nil {
		return "", fmt.Errorf("budgets file %s: %w", p.cfg.BudgetsFile.Path, err)
	}
	if err := errors.Join(f.check(p.cfg.Dimensions)...); err != nil {
		return "", fmt.Errorf("budgets file %s: %w", p.cfg.BudgetsFile.Path, err)
	}
	p.mu.Lock()
	p.budgets = f.BudgetsConfig
	for _, s := range p.order {
		if s != p.other {
			s.budget = p.budgetOf(s.values)
		}
	}
	p.mu.Unlock()
	return f.Version, nil
}

// budgetOf is the budget of a series with these values; called with p.mu
// held.
func (p *spanCost) budgetOf(vals []string) float64 {
	if p.serviceDim >= 0 {
		if b, ok := p.budgets.Services[vals[p.serviceDim]]; ok {
			return b
		}
	}
	return p.budgets.DefaultMonthly
}

// observeBudgetsFile reports the file's status (nothing without one).
func (p *spanCost) observeBudgetsFile(o metric.Observer) {
	if p.budgetsFile == nil {
		return
	}
	rejected := int64(0)
	if p.budgetsFile.Rejected() {
		rejected = 1
	}
	o.ObserveInt64(p.tel.BudgetsFileRejected, rejected)
	applied, failed := p.budgetsFile.Reloads()
	o.ObserveInt64(p.tel.BudgetsFileReloads, applied, metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "applied"))))
	o.ObserveInt64(p.tel.BudgetsFileReloads, failed, metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "rejected"))))
}
