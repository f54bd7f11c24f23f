package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/shadow"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// counters are cumulative totals, kept per shard under its lock and summed
// when metrics are read.
type counters struct {
	traces          [2][traceinfo.NumReasons]int64
	spans           [2]int64
	bytes           [2]int64
	late            [2]int64
	invalid         [traceinfo.NumInvalidCauses]int64
	droppedTooEarly int64
	overflow        [traceinfo.NumClasses]int64
	rules           []rules.Counts // per rule slot
	// relief counts the spans of new traces decided at arrival, by decision.
	relief [2]int64
	// keyFolds counts traces booked under _other past baseline.max_keys.
	keyFolds int64
	// recalled counts spans relief dropped and a late error recalled;
	// recallEvicted those let go unrecalled; recallBytes is what the
	// hold keeps now.
	recalled, recallEvicted, recallBytes int64
	// shed counts spans of traces decided early because the heap was past
	// relief's activation level (shedOnMemory).
	shed int64
}

// count records a decision, or a late fragment that followed one.
func (c *counters) count(d traceinfo.Decision, r traceinfo.Reason, spans int, bytes int64) {
	c.traces[d][r]++
	c.spans[d] += int64(spans)
	c.bytes[d] += bytes
}

// countLate records a late fragment that followed decision d.
func (c *counters) countLate(d traceinfo.Decision, r traceinfo.Reason, spans int, bytes int64) {
	c.late[d] += int64(spans)
	c.count(d, r, spans, bytes)
}

func (c *counters) add(o *counters) {
	for d := range c.traces {
		for r := range c.traces[d] {
			c.traces[d][r] += o.traces[d][r]
		}
		c.spans[d] += o.spans[d]
		c.bytes[d] += o.bytes[d]
		c.late[d] += o.late[d]
	}
	for i := range c.invalid {
		c.invalid[i] += o.invalid[i]
	}
	c.droppedTooEarly += o.droppedTooEarly
	c.keyFolds += o.keyFolds
	c.recalled += o.recalled
	c.shed += o.shed
	c.recallEvicted += o.recallEvicted
	c.recallBytes += o.recallBytes
	c.relief[0] += o.relief[0]
	c.relief[1] += o.relief[1]
	for i := range c.overflow {
		c.overflow[i] += o.overflow[i]
	}
	if len(c.rules) < len(o.rules) {
		c.rules = append(c.rules, make([]rules.Counts, len(o.rules)-len(c.rules))...)
	}
	for i, r := range o.rules {
		c.rules[i].Add(r)
	}
}

// tally sums the shards' counters and what they buffer.
func (p *budgetTailSampler) tally() (c counters, traces, spans, bytes int64) {
	for _, sh := range p.shards {
		sh.mu.Lock()
		if sh.recall != nil {
			sh.counters.recallEvicted, sh.counters.recallBytes = sh.recall.Evicted, sh.recall.Bytes()
		}
		c.add(&sh.counters)
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
	for d := range c.traces {
		dec := metric.WithAttributeSet(attribute.NewSet(attribute.String("decision", traceinfo.DecisionNames[d])))
		for r := range c.traces[d] {
			o.ObserveInt64(t.Traces, c.traces[d][r], p.reasonAttrs[d][r])
		}
		o.ObserveInt64(t.Spans, c.spans[d], dec)
		o.ObserveInt64(t.Bytes, c.bytes[d], dec)
		o.ObserveInt64(t.LateSpans, c.late[d], dec)
	}
	c.invalid[traceinfo.InvalidTracestateTruncated] += p.fwd.Truncated()
	for i, n := range c.invalid {
		o.ObserveInt64(t.InvalidSpans, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", traceinfo.InvalidNames[i]))))
	}
	o.ObserveInt64(t.DroppedTooEarly, c.droppedTooEarly)
	for i, n := range c.overflow {
		o.ObserveInt64(t.PriorityOverflow, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("class", traceinfo.ClassNames[i]))))
	}
	o.ObserveInt64(t.ForwardFailed, p.fwd.Failed())
	p.observeRules(o, c.rules)
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
	shadow.Observe(t, o, "live", shadow.Tally{Traces: c.traces, Spans: c.spans, Bytes: c.bytes}, pol, p.adj.Share(), p.rare, now)
	p.shadow.Observe(t, o, now)
	folds := c.keyFolds
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
func (p *budgetTailSampler) observeRelief(o metric.Observer, c *counters) {
	t := p.tel
	p.relief.Observe(t, o)
	for d, n := range c.relief {
		o.ObserveInt64(t.ReliefSpans, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("decision", traceinfo.DecisionNames[d]))))
	}
	o.ObserveInt64(t.ReliefRecalled, c.recalled)
	o.ObserveInt64(t.ReliefShed, c.shed)
	o.ObserveInt64(t.ReliefRecallEvicted, c.recallEvicted)
	o.ObserveInt64(t.ReliefRecallBytes, c.recallBytes)
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
