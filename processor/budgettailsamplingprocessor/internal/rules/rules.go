// Package rules compiles and evaluates budget_tail_sampling's rules: OTTL
// span conditions (with a native matcher for the commonest shape) and
// trace conditions, and the action each rule takes (drop, keep, sample).
//
// It owns parsing, matching and the rules' settings. It must not know the
// budget, the buffer or how a matched trace is decided: it answers which
// rule, if any, a trace matches.
package rules // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Rules decide a trace before the budget does: drop it (health checks,
// synthetic probes), keep it as priority (a customer tier, a debug flag),
// or sample it at a fixed probability or with a weight in the fair baseline.
// Span conditions are OTTL, the language of the collector's filter and
// transform processors, evaluated on each span as it arrives; the trace
// keeps one bit per rule (any span matched). Trace conditions (duration,
// span count) are checked when the trace is decided.

// Config is one named rule: OTTL conditions over a trace's spans and
// conditions on the whole trace, and what to do with a trace that matches.
type Config struct {
	Name string `mapstructure:"name"`
	// Conditions are OTTL conditions in the span context (span and resource
	// paths, the standard converters); the rule matches a trace when any of
	// its spans matches any condition. Empty: every trace.
	Conditions []string `mapstructure:"conditions"`
	// TraceConditions are comparisons on the whole trace, all of which must
	// hold: trace.duration (a Go duration) and trace.span_count, with
	// >, >=, <, <=, ==, != (e.g. "trace.duration > 2s").
	TraceConditions []string `mapstructure:"trace_conditions"`
	// Action is drop, keep or sample.
	Action string `mapstructure:"action"`
	// MaxShare caps a keep rule at this share of the budget (0 = only the
	// priority cap).
	MaxShare float64 `mapstructure:"max_share"`
	// Probability samples a sample rule's traces at this fixed probability.
	Probability float64 `mapstructure:"probability"`
	// Weight gives a sample rule's traces this weight in the fair baseline
	// (a service has weight 1).
	Weight float64 `mapstructure:"weight"`
}

// MaxSlots is the bits a trace has for rule matches: the rules a sampler
// may have, retired ones included.
const MaxSlots = 64

const maxRules = MaxSlots

// keyPrefix marks a weighted sample rule's entry among the baseline's
// services; a service name cannot start with a NUL byte in practice.
const keyPrefix = "\x00rule:"

// IsRuleKey reports whether a baseline key is a weighted sample rule's.
func IsRuleKey(key string) bool { return len(key) > 0 && key[0] == 0 }

// Action is what a rule does with a trace it matches.
type Action uint8

const (
	ActionDrop Action = iota
	ActionKeep
	ActionSample
)

var ruleNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Rule is one compiled rule; its exported fields are read-only.
type Rule struct {
	Name   string
	Reason string // the reason written on kept traces: "rule:" + name
	Action Action
	// spanConds match a trace when any span matches any of them; nil = all.
	// A condition of the commonest shape also has a native matcher, which
	// gives the same answer without OTTL's boxing (see fastMatcher).
	spanConds  []*ottl.Condition[*ottlspan.TransformContext]
	fast       []*fastMatcher // parallel to spanConds; nil where OTTL runs
	traceConds []traceCondition
	MaxShare   float64
	// Prob is a sample rule's fixed probability; Weighted is set when the
	// rule samples with a weight in the baseline instead, under Key.
	Prob     traceinfo.Probability
	Weighted bool
	Weight   float64
	Key      string
	// Retired: a running sampler's rules changed and this one is no longer
	// tried; it keeps its slot for what matched or was decided by it.
	Retired bool
}

// Set is the compiled rules. Each rule has a slot: its bit in a trace's
// summary and its index in decision caches, counters and volumes. A set that
// follows another while the sampler runs (Next) keeps each rule's slot, so
// what buffered traces matched and what was decided stay meaningful.
type Set struct {
	// rules are by slot; a retired rule (removed, or its action changed)
	// keeps its slot for the traces that matched it and decisions made.
	rules []*Rule
	// order is the active rules' slots, in the order they are tried.
	order []int
	// spanRules are the slots of active rules with span conditions.
	spanRules []int
	// always is the bits of active rules without span conditions.
	always uint64
}

// Compile parses every rule; errors name the rule and the field.
func Compile(cfgs []Config, set component.TelemetrySettings) (*Set, error) {
	return (&Set{}).Next(cfgs, set)
}

// Next compiles cfgs to follow rs in a running sampler. A rule keeps its
// slot when its name and action are unchanged (its conditions may change:
// spans that arrived before matched the old ones); a new rule, or one whose
// action changed, takes a slot never used, so a late span never meets a
// decision read under another rule's action. Slots are never reused: a
// sampler takes at most 64 rule names (and actions) in its life.
func (rs *Set) Next(cfgs []Config, set component.TelemetrySettings) (*Set, error) {
	compiled, err := compileAll(cfgs, set)
	if err != nil {
		return nil, err
	}
	next := &Set{rules: make([]*Rule, len(rs.rules))}
	slotOf := make(map[string]int, len(rs.rules))
	for i, r := range rs.rules {
		retired := *r
		retired.Retired = true
		next.rules[i] = &retired
		slotOf[r.Name+"\x00"+strconv.Itoa(int(r.Action))] = i
	}
	for _, r := range compiled {
		i, ok := slotOf[r.Name+"\x00"+strconv.Itoa(int(r.Action))]
		if ok {
			next.rules[i] = r
		} else {
			i = len(next.rules)
			next.rules = append(next.rules, r)
		}
		next.order = append(next.order, i)
	}
	if len(next.rules) > maxRules {
		return nil, fmt.Errorf("rules: a running sampler keeps each rule's slot once it is removed or its action changes (traces in flight matched it); these rules would take %d slots since start, past %d: restart the sampler to run them", len(next.rules), maxRules)
	}
	for _, i := range next.order {
		if len(next.rules[i].spanConds) == 0 {
			next.always |= 1 << i
		} else {
			next.spanRules = append(next.spanRules, i)
		}
	}
	return next, nil
}

// compileAll parses every rule, in order.
func compileAll(cfgs []Config, set component.TelemetrySettings) ([]*Rule, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	var errs []error
	if len(cfgs) > maxRules {
		errs = append(errs, fmt.Errorf("rules: at most %d rules, got %d", maxRules, len(cfgs)))
	}
	parser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	seen := map[string]bool{}
	out := make([]*Rule, 0, len(cfgs))
	for i, c := range cfgs {
		at := fmt.Sprintf("rules[%d] (%q)", i, c.Name)
		r := &Rule{Name: c.Name, Reason: "rule:" + c.Name}
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("rules[%d].name: required", i))
		case !ruleNamePattern.MatchString(c.Name):
			errs = append(errs, fmt.Errorf("%s.name: letters, digits, '_', '.', '-' only", at))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("%s.name: used by an earlier rule", at))
		}
		seen[c.Name] = true
		if len(c.Conditions) == 0 && len(c.TraceConditions) == 0 {
			errs = append(errs, fmt.Errorf("%s: conditions or trace_conditions required", at))
		}
		for j, text := range c.Conditions {
			cond, err := parser.ParseCondition(text)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.conditions[%d]: %w", at, j, err))
				continue
			}
			r.spanConds = append(r.spanConds, cond)
			r.fast = append(r.fast, compileFast(text))
		}
		for j, text := range c.TraceConditions {
			tc, err := parseTraceCondition(text)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.trace_conditions[%d]: %w", at, j, err))
				continue
			}
			r.traceConds = append(r.traceConds, tc)
		}
		errs = append(errs, r.setAction(c, at)...)
		out = append(out, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *Rule) setAction(c Config, at string) []error {
	var errs []error
	switch c.Action {
	case "drop":
		r.Action = ActionDrop
	case "keep":
		r.Action = ActionKeep
		if c.MaxShare < 0 || c.MaxShare > 1 {
			errs = append(errs, fmt.Errorf("%s.max_share: must be in [0, 1], got %v", at, c.MaxShare))
		}
		r.MaxShare = c.MaxShare
	case "sample":
		r.Action = ActionSample
		switch {
		case (c.Probability > 0) == (c.Weight > 0):
			errs = append(errs, fmt.Errorf("%s: a sample rule needs exactly one of probability or weight", at))
		case c.Probability > 1:
			errs = append(errs, fmt.Errorf("%s.probability: must be in (0, 1], got %v", at, c.Probability))
		case c.Probability > 0:
			r.Prob = traceinfo.NewProbability(c.Probability)
		default:
			r.Weighted, r.Weight, r.Key = true, c.Weight, keyPrefix+c.Name
		}
	default:
		errs = append(errs, fmt.Errorf("%s.action: must be drop, keep or sample, got %q", at, c.Action))
	}
	if c.Action != "keep" && c.MaxShare != 0 {
		errs = append(errs, fmt.Errorf("%s.max_share: only for keep rules", at))
	}
	if c.Action != "sample" && (c.Probability != 0 || c.Weight != 0) {
		errs = append(errs, fmt.Errorf("%s: probability and weight are only for sample rules", at))
	}
	if c.Probability < 0 || c.Weight < 0 {
		errs = append(errs, fmt.Errorf("%s: probability and weight must not be negative", at))
	}
	return errs
}

// MatchSpan sets the bits of the rules the span matches, skipping rules
// already matched; errors are counted per rule in errs.
func (rs *Set) MatchSpan(rss ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, matched *uint64, errs []int64) {
	if len(rs.spanRules) == 0 {
		return
	}
	var tc *ottlspan.TransformContext
	for _, i := range rs.spanRules {
		bit := uint64(1) << i
		if *matched&bit != 0 {
			continue
		}
		r := rs.rules[i]
		for j, cond := range r.spanConds {
			if f := r.fast[j]; f != nil {
				if f.matches(rss, span) {
					*matched |= bit
					break
				}
				continue
			}
			if tc == nil {
				tc = ottlspan.NewTransformContext(rss, ss, span)
			}
			ok, err := cond.Eval(context.Background(), tc)
			if err != nil {
				errs[i]++
				continue
			}
			if ok {
				*matched |= bit
				break
			}
		}
	}
	if tc != nil {
		tc.Close()
	}
}

// First returns the slot of the first active rule a trace with this summary
// matches, or -1.
func (rs *Set) First(s *traceinfo.Summary) int {
	bits := s.Rules | rs.always
	if bits == 0 {
		return -1
	}
	for _, i := range rs.order {
		if bits&(1<<i) != 0 && rs.rules[i].traceMatches(s) {
			return i
		}
	}
	return -1
}

func (r *Rule) traceMatches(s *traceinfo.Summary) bool {
	for _, c := range r.traceConds {
		if !c.holds(s) {
			return false
		}
	}
	return true
}

// traceCondition compares a trace-wide figure with a constant.
type traceCondition struct {
	field string // "duration" or "span_count"
	op    string
	value float64 // nanoseconds or spans
}

var traceConditionPattern = regexp.MustCompile(`^\s*trace\.([a-z_]+)\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$`)

// parseTraceCondition reads "trace.duration > 2s" or "trace.span_count >= 500".
func parseTraceCondition(text string) (traceCondition, error) {
	m := traceConditionPattern.FindStringSubmatch(text)
	if m == nil {
		return traceCondition{}, fmt.Errorf("%q: expected trace.duration or trace.span_count, an operator (> >= < <= == !=) and a value", text)
	}
	tc := traceCondition{field: m[1], op: m[2]}
	switch m[1] {
	case "duration":
		d, err := time.ParseDuration(m[3])
		if err != nil {
			return tc, fmt.Errorf("%q: trace.duration compares with a duration such as 2s or 500ms: %w", text, err)
		}
		tc.value = float64(d)
	case "span_count":
		n, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil {
			return tc, fmt.Errorf("%q: trace.span_count compares with an integer", text)
		}
		tc.value = float64(n)
	default:
		return tc, fmt.Errorf("%q: unknown field trace.%s (trace.duration, trace.span_count)", text, m[1])
	}
	return tc, nil
}

func (c traceCondition) holds(s *traceinfo.Summary) bool {
	v := float64(s.Spans)
	if c.field == "duration" {
		v = float64(s.Dur)
	}
	switch c.op {
	case ">":
		return v > c.value
	case ">=":
		return v >= c.value
	case "<":
		return v < c.value
	case "<=":
		return v <= c.value
	case "==":
		return v == c.value
	default:
		return v != c.value
	}
}

// Names lists the rule names by slot, for metrics (a name is twice there
// when its action changed while the sampler ran).
func (rs *Set) Names() []string {
	out := make([]string, len(rs.rules))
	for i, r := range rs.rules {
		out[i] = r.Name
	}
	return out
}

// Len is the number of slots: the rules, and while the sampler runs those
// retired since it started.
func (rs *Set) Len() int { return len(rs.rules) }

// Order is the active rules' slots in the order they are tried.
func (rs *Set) Order() []int { return rs.order }

// Rule is the rule in slot i.
func (rs *Set) Rule(i int) *Rule { return rs.rules[i] }

// HasSpanRules reports whether any rule has span conditions (which are
// evaluated on every span).
func (rs *Set) HasSpanRules() bool { return len(rs.spanRules) > 0 }

// ByKey is the weighted sample rule booked under key, or nil.
func (rs *Set) ByKey(key string) *Rule {
	for _, i := range rs.order {
		if r := rs.rules[i]; r.Key == key {
			return r
		}
	}
	return nil
}

// Drops reports whether a decision's rule (traceinfo.Decided.Rule) is a
// drop rule: a slot of this set whose rule drops (a slot keeps its action:
// Next), or traceinfo.RuleDropped from a peer.
func (rs *Set) Drops(slot int16) bool {
	return slot == traceinfo.RuleDropped || slot >= 0 && int(slot) < len(rs.rules) && rs.rules[slot].Action == ActionDrop
}

// Portable is a decision's rule as a peer can read it: another sampler's
// slots are not this one's (they follow its own history of changes), so
// only whether a drop rule decided travels.
func (rs *Set) Portable(slot int16) int16 {
	if rs.Drops(slot) {
		return traceinfo.RuleDropped
	}
	return -1
}

// Counts are one slot's rule's totals: traces matched, and of them kept
// or dropped; conditions that failed to evaluate.
type Counts struct {
	Matched, Kept, Dropped, Errors int64
}

// Decided counts a trace the rule matched, kept or not.
func (c *Counts) Decided(kept bool) {
	c.Matched++
	if kept {
		c.Kept++
	} else {
		c.Dropped++
	}
}

// Add adds o's counts to c's.
func (c *Counts) Add(o Counts) {
	c.Matched += o.Matched
	c.Kept += o.Kept
	c.Dropped += o.Dropped
	c.Errors += o.Errors
}

// ByName sums counts by slot (slots[i] is slot i's) into counts by rule
// name: a name has two slots when its action changed while the sampler
// ran, and one series in the metrics.
func (rs *Set) ByName(slots []Counts) map[string]Counts {
	out := make(map[string]Counts, len(rs.rules))
	for i, r := range rs.rules {
		if i < len(slots) {
			c := out[r.Name]
			c.Add(slots[i])
			out[r.Name] = c
		}
	}
	return out
}

// fastMatcher is a condition of the commonest shape — a span or resource
// attribute, or the span name, compared with == or != to a string literal —
// matched natively. It answers exactly as OTTL does (a differential test
// holds them to it): a missing attribute or one of another type is not
// equal to the string.
type fastMatcher struct {
	where string // "span", "resource" or "name"
	key   string
	value string
	equal bool
}

var (
	fastAttrPattern = regexp.MustCompile(`^\s*(span\.attributes|attributes|resource\.attributes)\["([^"\\]*)"\]\s*(==|!=)\s*"([^"\\]*)"\s*$`)
	fastNamePattern = regexp.MustCompile(`^\s*(span\.name|name)\s*(==|!=)\s*"([^"\\]*)"\s*$`)
)

// compileFast returns the native matcher of a condition of the commonest
// shape, or nil.
func compileFast(text string) *fastMatcher {
	if m := fastNamePattern.FindStringSubmatch(text); m != nil {
		return &fastMatcher{where: "name", equal: m[2] == "==", value: m[3]}
	}
	m := fastAttrPattern.FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	f := &fastMatcher{where: "span", key: m[2], equal: m[3] == "==", value: m[4]}
	if m[1] == "resource.attributes" {
		f.where = "resource"
	}
	return f
}

func (f *fastMatcher) matches(rss ptrace.ResourceSpans, span ptrace.Span) bool {
	var eq bool
	switch f.where {
	case "name":
		eq = span.Name() == f.value
	case "span":
		v, ok := span.Attributes().Get(f.key)
		eq = ok && v.Type() == pcommon.ValueTypeStr && v.Str() == f.value
	default:
		v, ok := rss.Resource().Attributes().Get(f.key)
		eq = ok && v.Type() == pcommon.ValueTypeStr && v.Str() == f.value
	}
	return eq == f.equal
}
