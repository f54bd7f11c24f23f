package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/shadow"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tally"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// tally sums the shards' counters and what they buffer.
func (p *budgetTailSampler) tally() (c tally.Counters, traces, spans, bytes int64) {
	for _, sh := range p.shards {
		sh.mu.Lock()
		if sh.recall != nil {
			sh.counters.RecallEvicted, sh.counters.RecallBytes = sh.recall.Evicted, sh.recall.Bytes()
		}
		c.Add(&sh.counters)
		traces += int64(sh.Len())
		spans += sh.Spans()
		bytes += sh.Bytes()
		sh.mu.Unlock()
	}
	return c, traces, spans, bytes + p.totals.SlabBytes()
}

// bufferedTraces is how many traces the shards hold now (exact, unlike the
// totals the bounds read).
func (p *budgetTailSampler) bufferedTraces() int64 {
	_, traces, _, _ := p.tally()
	return traces
}

func (p *budgetTailSampler) observe(_ context.Context, o metric.Observer) error {
	c, traces, spans, bytes := p.tally()
	t := p.tel
	for d := range c.Traces {
		dec := metric.WithAttributeSet(attribute.NewSet(attribute.String("decision", traceinfo.DecisionNames[d])))
		for r := range c.Traces[d] {
			o.ObserveInt64(t.Traces, c.Traces[d][r], p.reasonAttrs[d][r])
		}
		o.ObserveInt64(t.Spans, c.Spans[d], dec)
		o.ObserveInt64(t.Bytes, c.Bytes[d], dec)
		o.ObserveInt64(t.LateSpans, c.Late[d], dec)
	}
	c.Invalid[traceinfo.InvalidTracestateTruncated] += p.fwd.Truncated()
	for i, n := range c.Invalid {
		o.ObserveInt64(t.InvalidSpans, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", traceinfo.InvalidNames[i]))))
	}
	o.ObserveInt64(t.DroppedTooEarly, c.DroppedTooEarly)
	for i, n := range c.Overflow {
		o.ObserveInt64(t.PriorityOverflow, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("class", traceinfo.ClassNames[i]))))
	}
	o.ObserveInt64(t.ForwardFailed, p.fwd.Failed())
	o.ObserveInt64(t.ForwardAbandoned, p.fwd.Abandoned())
	p.observeRules(o, c.Rules)
	if p.red != nil {
		p.red.ObserveRepresented(o, t.Represented)
	}
	if p.rare != nil {
		if share, ok := p.rare.Coverage(p.now().UnixNano()); ok {
			o.ObserveFloat64(t.RareCoverage, share)
		}
		o.ObserveFloat64(t.RareProb, p.adj.Policy().Rare().P)
	}
	o.ObserveInt64(t.BufferedTraces, traces)
	o.ObserveInt64(t.BufferedSpans, spans)
	o.ObserveInt64(t.BufferedBytes, bytes)
	pol := p.adj.Policy()
	o.ObserveFloat64(t.BudgetUtilization, pol.Utilization())
	o.ObserveFloat64(t.EgressToBooked, p.adj.Egress().Current())
	o.ObserveFloat64(t.BaselineProb, pol.MeanProb())
	pol.EachService(func(svc string, pr traceinfo.Probability) {
		o.ObserveFloat64(t.ServiceBaseline, pr.P, metric.WithAttributeSet(attribute.NewSet(attribute.String("service_name", svc))))
	})
	o.ObserveInt64(t.Peers, p.adj.Peers())
	o.ObserveFloat64(t.Budget, p.adj.Budget())
	p.live.Observe(t, o)
	now := p.now().UnixNano()
	shadow.Observe(t, o, "live", shadow.Tally{Traces: c.Traces, Spans: c.Spans, Bytes: c.Bytes}, pol, p.adj.Share(), p.rare, now)
	p.shadow.Observe(t, o, now)
	folds := c.KeyFolds
	if p.red != nil {
		folds += p.red.Folded()
	}
	o.ObserveInt64(t.KeyFolds, folds)
	p.observeRelief(o, &c)
	if p.wal != nil {
		o.ObserveInt64(t.DurableBytes, p.wal.log.Size())
		o.ObserveInt64(t.DurableReplayed, p.wal.replayed.Load())
		o.ObserveInt64(t.DurableCorrupt, p.wal.log.TornTails())
		o.ObserveInt64(t.DurableRecords, p.wal.log.CorruptRecords())
		o.ObserveInt64(t.DurableSyncFail, p.wal.log.SyncFailures())
		o.ObserveInt64(t.DurableRefused, p.wal.log.Refused())
		o.ObserveInt64(t.ForwardPending, p.wal.retries.Pending())
		o.ObserveInt64(t.DurableFailures, p.wal.log.Failures())
		o.ObserveInt64(t.DurableSegments, int64(p.wal.log.Segments()))
		o.ObserveInt64(t.DurableTraces, p.wal.traces.Load())
		o.ObserveInt64(t.DurableSkipped, p.wal.log.Skipped())
	}
	if p.handoff != nil {
		p.handoff.Observe(t, o)
	}
	return nil
}

// observeRelief reports relief's state, levels and decisions.
func (p *budgetTailSampler) observeRelief(o metric.Observer, c *tally.Counters) {
	t := p.tel
	p.relief.Observe(t, o)
	for d, n := range c.Relief {
		o.ObserveInt64(t.ReliefSpans, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("decision", traceinfo.DecisionNames[d]))))
	}
	o.ObserveInt64(t.ReliefRecalled, c.Recalled)
	o.ObserveInt64(t.ReliefShed, c.Shed)
	o.ObserveInt64(t.ReliefRecallEvicted, c.RecallEvicted)
	o.ObserveInt64(t.ReliefRecallBytes, c.RecallBytes)
}

// observeRules reports each rule's counters by name.
func (p *budgetTailSampler) observeRules(o metric.Observer, slots []rules.Counts) {
	t := p.tel
	for name, rc := range p.adj.Rules().ByName(slots) {
		rule := attribute.String("rule", name)
		o.ObserveInt64(t.RuleTraces, rc.Matched, metric.WithAttributeSet(attribute.NewSet(rule, attribute.String("outcome", "matched"))))
		o.ObserveInt64(t.RuleTraces, rc.Kept, metric.WithAttributeSet(attribute.NewSet(rule, attribute.String("outcome", "kept"))))
		o.ObserveInt64(t.RuleTraces, rc.Dropped, metric.WithAttributeSet(attribute.NewSet(rule, attribute.String("outcome", "dropped"))))
		o.ObserveInt64(t.RuleErrors, rc.Errors, metric.WithAttributeSet(attribute.NewSet(rule)))
	}
}
