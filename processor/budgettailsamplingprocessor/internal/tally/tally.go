// Package tally holds the sampler's cumulative counters: what each shard
// decided, dropped, refused and recalled, by decision, reason and class,
// kept under the shard's lock and summed when metrics are read.
//
// It owns the counters and how they add up; it must not know when they
// are counted or how they are reported.
package tally // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tally"

import (
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// Counters are cumulative totals, kept per shard under its lock and summed
// when metrics are read.
type Counters struct {
	Traces          [2][traceinfo.NumReasons]int64
	Spans           [2]int64
	Bytes           [2]int64
	Late            [2]int64
	Invalid         [traceinfo.NumInvalidCauses]int64
	DroppedTooEarly int64
	Overflow        [traceinfo.NumClasses]int64
	Rules           []rules.Counts // per rule slot
	// Relief counts the spans of new traces decided at arrival, by decision.
	Relief [2]int64
	// KeyFolds counts traces booked under _other past baseline.max_keys.
	KeyFolds int64
	// Recalled counts spans relief dropped and a late error recalled;
	// RecallEvicted those let go unrecalled; RecallBytes is what the
	// hold keeps now.
	Recalled, RecallEvicted, RecallBytes int64
	// Shed counts spans of traces decided early because the heap was past
	// relief's activation level (shedOnMemory).
	Shed int64
}

// Count records a decision, or a late fragment that followed one.
func (c *Counters) Count(d traceinfo.Decision, r traceinfo.Reason, spans int, bytes int64) {
	c.Traces[d][r]++
	c.Spans[d] += int64(spans)
	c.Bytes[d] += bytes
}

// CountLate records a late fragment that followed decision d.
func (c *Counters) CountLate(d traceinfo.Decision, r traceinfo.Reason, spans int, bytes int64) {
	c.Late[d] += int64(spans)
	c.Count(d, r, spans, bytes)
}

// Add adds o's totals to c.
func (c *Counters) Add(o *Counters) {
	for d := range c.Traces {
		for r := range c.Traces[d] {
			c.Traces[d][r] += o.Traces[d][r]
		}
		c.Spans[d] += o.Spans[d]
		c.Bytes[d] += o.Bytes[d]
		c.Late[d] += o.Late[d]
	}
	for i := range c.Invalid {
		c.Invalid[i] += o.Invalid[i]
	}
	c.DroppedTooEarly += o.DroppedTooEarly
	c.KeyFolds += o.KeyFolds
	c.Recalled += o.Recalled
	c.Shed += o.Shed
	c.RecallEvicted += o.RecallEvicted
	c.RecallBytes += o.RecallBytes
	c.Relief[0] += o.Relief[0]
	c.Relief[1] += o.Relief[1]
	for i := range c.Overflow {
		c.Overflow[i] += o.Overflow[i]
	}
	if len(c.Rules) < len(o.Rules) {
		c.Rules = append(c.Rules, make([]rules.Counts, len(o.Rules)-len(c.Rules))...)
	}
	for i, r := range o.Rules {
		c.Rules[i].Add(r)
	}
}
