package policy // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"

import (
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Traits are what a trace's class is read from, whichever policy decides.
type Traits struct {
	// Key is the trace's fairness key as read; Booked the key its volume
	// is booked under (BookedKey).
	Key, Booked string
	Error       bool
	Outlier     bool
	// RareDue: the key has had no trace kept in its current rare interval.
	RareDue bool
	// Rule is the first rule that matched (-1: none), Matched that rule.
	Rule    int
	Matched *rules.Rule
}

// Class is how a policy keeps a trace: the class it is booked in (Reason,
// Rule, Service), the probability, and the reason written on it.
type Class struct {
	Reason  traceinfo.Reason
	Rule    int
	Service string
	Prob    probability
	Text    string
}

// Classify is the class t falls in and its probability. Classes in order:
// errors, keep rules, latency outliers, then sample rules and the
// baseline; a key's first trace in its rare interval is kept with rare's
// probability when that is higher. Drop rules are the caller's.
func (p *Policy) Classify(t Traits) Class {
	c := Class{Reason: traceinfo.ReasonBaseline, Rule: -1, Service: t.Booked, Prob: p.Baseline(t.Key),
		Text: traceinfo.ReasonNames[traceinfo.ReasonBaseline]}
	m := t.Matched
	switch {
	case t.Error:
		c.Reason, c.Prob, c.Text = traceinfo.ReasonError, p.ErrorProbability(t.Key), traceinfo.ReasonNames[traceinfo.ReasonError]
	case m != nil && m.Action == rules.ActionKeep:
		c.Reason, c.Rule, c.Prob, c.Text = traceinfo.ReasonRule, t.Rule, higher(p.Keep(t.Rule), p.Baseline(t.Key)), m.Reason
	case t.Outlier:
		c.Reason, c.Prob, c.Text = traceinfo.ReasonOutlier, p.OutlierProbability(t.Key), traceinfo.ReasonNames[traceinfo.ReasonOutlier]
	case m != nil && m.Weighted:
		// Booked as its own entry of the fair baseline, with its weight.
		c.Service, c.Rule, c.Prob, c.Text = m.Key, t.Rule, p.Baseline(m.Key), m.Reason
	case m != nil:
		c.Reason, c.Rule, c.Prob, c.Text = traceinfo.ReasonRule, t.Rule, m.Prob, m.Reason
	}
	// Only a first trace rare raises is rare's: one its class keeps as
	// often (a quiet key's, which fairness keeps whole) costs rare nothing,
	// and booked as rare would make rare's volume, and so what the budget
	// plans for it, too large.
	if rp := p.Rare(); t.RareDue && rp.P > c.Prob.P {
		c.Reason, c.Rule, c.Prob, c.Text = traceinfo.ReasonRare, -1, higher(rp, c.Prob), traceinfo.ReasonNames[traceinfo.ReasonRare]
	}
	return c
}
