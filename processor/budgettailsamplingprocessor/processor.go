package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

const (
	serviceNameKey = "service.name"
	unknownService = "unknown"
	otherServices  = "_other"
	httpStatusKey  = "http.response.status_code"
)

type budgetTailSampler struct {
	cfg    *Config
	logger *zap.Logger
	next   consumer.Traces
	tel    *metadata.Telemetry
	reg    metric.Registration
	now    func() time.Time
	// epoch is what a trace's arrival instants count from.
	epoch    time.Time
	lookup   lookupIPs
	unit     budgetUnit
	shards   []*shard
	buffered bufferTotals
	groups   *outlierGroups
	names    *names
	codec    chunkCodec
	rules    *ruleSet
	policy   atomic.Pointer[policy]
	peers    atomic.Int64
	est      *estimator
	lastAdj  time.Time
	// priming is read on the hot path; prime is the adjust goroutine's.
	priming atomic.Bool
	prime   primeState

	// handoff is nil unless handoff.enabled.
	handoff *handoff

	// egress is what kept traces weigh as they leave against their booking.
	egress *egressMeter

	forwardFailed atomic.Int64
	truncated     atomic.Int64 // tracestates cut to 32 members when th was written
	stop          chan struct{}
	wg            sync.WaitGroup
	stopOnce      sync.Once

	reasonAttrs [2][numReasons]metric.MeasurementOption
	// ruleAttrs are per rule: matched, kept, dropped, errors.
	ruleAttrs [][4]metric.MeasurementOption
}

func newBudgetTailSampler(set processor.Settings, cfg *Config, next consumer.Traces) (*budgetTailSampler, error) {
	tel, err := metadata.NewTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	rules, err := compileRules(cfg.Rules, set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	n := cfg.NumShards
	if n == 0 {
		n = 4 * runtime.GOMAXPROCS(0)
	}
	p := &budgetTailSampler{
		cfg:    cfg,
		logger: set.Logger,
		next:   next,
		tel:    tel,
		now:    time.Now,
		epoch:  time.Now(),
		lookup: net.DefaultResolver.LookupIP,
		unit:   newBudgetUnit(cfg.Budget),
		groups: newOutlierGroups(cfg.Outliers),
		names:  newNames(),
		codec:  chunkCodec{compress: cfg.BufferCompression == compressionS2},
		est:    newEstimator(cfg, rules),
		egress: newEgressMeter(newBudgetUnit(cfg.Budget)),
		rules:  rules,
		stop:   make(chan struct{}),
	}
	p.buffered = newBufferTotals(cfg, n)
	for range n {
		p.shards = append(p.shards, newShard(cfg, n, &p.buffered, len(rules.rules)))
	}
	if cfg.Handoff.Enabled {
		if p.handoff, err = newHandoff(p, set.TelemetrySettings); err != nil {
			return nil, err
		}
	}
	p.peers.Store(int64(cfg.Budget.Instances))
	p.policy.Store(keepAllPolicy(len(rules.rules)))
	p.startClock(p.now())
	for d := range p.reasonAttrs {
		for r := range p.reasonAttrs[d] {
			p.reasonAttrs[d][r] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("decision", decisionNames[d]), attribute.String("reason", reasonNames[r])))
		}
	}
	for _, name := range rules.names() {
		var a [4]metric.MeasurementOption
		for i, outcome := range []string{"matched", "kept", "dropped"} {
			a[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("rule", name), attribute.String("outcome", outcome)))
		}
		a[3] = metric.WithAttributeSet(attribute.NewSet(attribute.String("rule", name)))
		p.ruleAttrs = append(p.ruleAttrs, a)
	}
	p.reg, err = tel.Meter.RegisterCallback(p.observe, tel.Observables()...)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *budgetTailSampler) Capabilities() consumer.Capabilities {
	// The request is only read: the buffer holds copies of its encoding, and
	// what is forwarded is decoded from them.
	return consumer.Capabilities{MutatesData: false}
}

func (p *budgetTailSampler) Start(ctx context.Context, host component.Host) error {
	if p.handoff != nil {
		if err := p.handoff.start(ctx, host); err != nil {
			return err
		}
	}
	p.startClock(p.now())
	p.goEvery(p.tickInterval(), func() { p.decideExpired(context.Background()) })
	p.goEvery(min(time.Second, p.cfg.AdjustInterval), p.tickAdjust)
	if p.cfg.Budget.PeersDNS != "" {
		p.refreshPeers()
		p.goEvery(p.cfg.Budget.PeersRefreshInterval, p.refreshPeers)
	}
	return nil
}

// tickInterval is how often expired traces are looked for: a tenth of the
// shorter wait, between 10ms and 100ms. A pass decides on every core what
// expired since the last one; 700 ms of expiries at once (tail.yaml's waits
// with the old 1 s cap) held both cores of a 2-core sampler long enough to
// stall intake (docs/BENCHMARKS.md, sixth pass).
func (p *budgetTailSampler) tickInterval() time.Duration {
	d := min(p.cfg.DecisionWait, p.cfg.DecisionWaitAfterRoot) / 10
	return min(max(d, 10*time.Millisecond), 100*time.Millisecond)
}

func (p *budgetTailSampler) goEvery(d time.Duration, f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// Shutdown hands the buffer to the samplers that stay (with handoff), then
// decides and flushes every pending trace, as far as ctx allows; traces it
// could not flush are counted as dropped too early.
func (p *budgetTailSampler) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
	if p.handoff != nil {
		p.handoff.leave(ctx)
	}
	now := p.now()
	for _, sh := range p.shards {
		var out keptSet
		sh.mu.Lock()
		if ctx.Err() != nil {
			sh.counters.droppedTooEarly += int64(sh.buffered)
			for t := sh.oldest(); t != nil; t = sh.oldest() {
				sh.remove(t)
				sh.forget(t.id)
				sh.release(t)
			}
		}
		for t := sh.oldest(); t != nil; t = sh.oldest() {
			p.decide(sh, t, now, reasonBaseline, &out)
		}
		sh.mu.Unlock()
		p.forward(ctx, &out)
	}
	p.buffered.arena.close()
	if p.reg != nil {
		return p.reg.Unregister()
	}
	return nil
}

func (p *budgetTailSampler) shardOf(id pcommon.TraceID) *shard {
	// The low bytes of a W3C trace ID are random.
	return p.shards[binary.BigEndian.Uint64(id[8:])%uint64(len(p.shards))]
}

// totals sums the shards' counters and what they buffer.
func (p *budgetTailSampler) totals() (c counters, traces, spans, bytes int64) {
	for _, sh := range p.shards {
		sh.mu.Lock()
		c.add(&sh.counters)
		traces += int64(sh.buffered)
		spans += sh.spans
		bytes += sh.bytes
		sh.mu.Unlock()
	}
	return c, traces, spans, bytes + p.buffered.slabBytes.Load()
}

// bufferedTraces is how many traces the shards hold now (exact, unlike the
// totals the bounds read).
func (p *budgetTailSampler) bufferedTraces() int64 {
	_, traces, _, _ := p.totals()
	return traces
}

func (p *budgetTailSampler) observe(_ context.Context, o metric.Observer) error {
	c, traces, spans, bytes := p.totals()
	t := p.tel
	for d := range c.traces {
		dec := metric.WithAttributeSet(attribute.NewSet(attribute.String("decision", decisionNames[d])))
		for r := range c.traces[d] {
			o.ObserveInt64(t.Traces, c.traces[d][r], p.reasonAttrs[d][r])
		}
		o.ObserveInt64(t.Spans, c.spans[d], dec)
		o.ObserveInt64(t.Bytes, c.bytes[d], dec)
		o.ObserveInt64(t.LateSpans, c.late[d], dec)
	}
	c.invalid[invalidTracestateTruncated] += p.truncated.Load()
	for i, n := range c.invalid {
		o.ObserveInt64(t.InvalidSpans, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", invalidNames[i]))))
	}
	o.ObserveInt64(t.DroppedTooEarly, c.droppedTooEarly)
	for i, n := range c.overflow {
		o.ObserveInt64(t.PriorityOverflow, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("class", classNames[i]))))
	}
	o.ObserveInt64(t.ForwardFailed, p.forwardFailed.Load())
	for i, rc := range c.rules {
		a := p.ruleAttrs[i]
		o.ObserveInt64(t.RuleTraces, rc.matched, a[0])
		o.ObserveInt64(t.RuleTraces, rc.kept, a[1])
		o.ObserveInt64(t.RuleTraces, rc.dropped, a[2])
		o.ObserveInt64(t.RuleErrors, rc.errors, a[3])
	}
	o.ObserveInt64(t.BufferedTraces, traces)
	o.ObserveInt64(t.BufferedSpans, spans)
	o.ObserveInt64(t.BufferedBytes, bytes)
	pol := p.policy.Load()
	o.ObserveFloat64(t.BudgetUtilization, pol.utilization)
	o.ObserveFloat64(t.EgressToBooked, p.egress.current())
	o.ObserveFloat64(t.BaselineProb, pol.meanProb)
	for svc, pr := range pol.services {
		if !isRuleKey(svc) {
			o.ObserveFloat64(t.ServiceBaseline, pr.p, metric.WithAttributeSet(attribute.NewSet(attribute.String("service_name", svc))))
		}
	}
	o.ObserveInt64(t.Peers, p.peers.Load())
	if p.handoff != nil {
		p.handoff.observe(t, o)
	}
	return nil
}
