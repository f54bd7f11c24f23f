package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

const (
	serviceNameKey = "service.name"
	unknownService = "unknown"
	otherServices  = "_other"
	httpStatusKey  = "http.response.status_code"
)

type budgetTailSampler struct {
	cfg     *Config
	logger  *zap.Logger
	next    consumer.Traces
	tel     *metadata.Telemetry
	reg     metric.Registration
	now     func() time.Time
	lookup  func(ctx context.Context, host string) ([]string, error)
	unit    budgetUnit
	shards  []*shard
	groups  *outlierGroups
	policy  atomic.Pointer[policy]
	peers   atomic.Int64
	est     *estimator
	lastAdj time.Time

	forwardFailed atomic.Int64
	stop          chan struct{}
	wg            sync.WaitGroup
	stopOnce      sync.Once

	reasonAttrs [2][numReasons]metric.MeasurementOption
}

func newBudgetTailSampler(set processor.Settings, cfg *Config, next consumer.Traces) (*budgetTailSampler, error) {
	tel, err := metadata.NewTelemetry(set.TelemetrySettings)
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
		lookup: net.DefaultResolver.LookupHost,
		unit:   newBudgetUnit(cfg.Budget),
		groups: newOutlierGroups(cfg.Outliers),
		est:    newEstimator(cfg),
		stop:   make(chan struct{}),
	}
	for range n {
		p.shards = append(p.shards, newShard(cfg, n))
	}
	p.peers.Store(int64(cfg.Budget.Instances))
	p.policy.Store(&policy{services: map[string]probability{}, newService: always, priority: always, meanProb: 1})
	for d := range p.reasonAttrs {
		for r := range p.reasonAttrs[d] {
			p.reasonAttrs[d][r] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("decision", decisionNames[d]), attribute.String("reason", reasonNames[r])))
		}
	}
	p.reg, err = tel.Meter.RegisterCallback(p.observe, tel.Observables()...)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *budgetTailSampler) Capabilities() consumer.Capabilities {
	// Spans are moved out of the incoming request into per-trace buffers.
	return consumer.Capabilities{MutatesData: true}
}

func (p *budgetTailSampler) Start(context.Context, component.Host) error {
	p.lastAdj = p.now()
	p.goEvery(p.tickInterval(), func() { p.decideExpired(context.Background()) })
	// Until the first decisions have been measured the baseline keeps
	// everything, so the first adjustment comes as soon as there is data
	// (checked every second); after that, every adjust_interval.
	tick := min(time.Second, p.cfg.AdjustInterval)
	p.goEvery(tick, func() {
		if p.est.primed && p.now().Sub(p.lastAdj) < p.cfg.AdjustInterval-tick/2 {
			return
		}
		p.adjust()
	})
	if p.cfg.Budget.PeersDNS != "" {
		p.refreshPeers()
		p.goEvery(p.cfg.Budget.PeersRefreshInterval, p.refreshPeers)
	}
	return nil
}

// tickInterval is how often expired traces are looked for: a tenth of the
// shorter wait, between 10ms and 1s.
func (p *budgetTailSampler) tickInterval() time.Duration {
	d := min(p.cfg.DecisionWait, p.cfg.DecisionWaitAfterRoot) / 10
	return min(max(d, 10*time.Millisecond), time.Second)
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

// Shutdown decides and flushes every pending trace, as far as ctx allows;
// traces it could not flush are counted as dropped too early.
func (p *budgetTailSampler) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
	now := p.now()
	for _, sh := range p.shards {
		var out keptSet
		sh.mu.Lock()
		if ctx.Err() != nil {
			sh.counters.droppedTooEarly += int64(len(sh.traces))
			for t := sh.arrivals.head; t != nil; t = sh.arrivals.head {
				sh.remove(t)
			}
		}
		for t := sh.arrivals.head; t != nil; t = sh.arrivals.head {
			p.decide(sh, t, now, reasonBaseline, &out)
		}
		sh.mu.Unlock()
		p.forward(ctx, &out)
	}
	if p.reg != nil {
		return p.reg.Unregister()
	}
	return nil
}

func (p *budgetTailSampler) shardOf(id pcommon.TraceID) *shard {
	// The low bytes of a W3C trace ID are random.
	return p.shards[binary.BigEndian.Uint64(id[8:])%uint64(len(p.shards))]
}

// fragment is the part of one trace that arrived in one request.
type fragment struct {
	summary
	td    ptrace.Traces
	rs    ptrace.ResourceSpans
	ss    ptrace.ScopeSpans
	rsIdx int
	ssIdx int
	ts    string
}

// ConsumeTraces splits the request into per-trace fragments and buffers
// them; late spans of decided traces follow their decision at once.
func (p *budgetTailSampler) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	frags := p.split(td)
	now := p.now()
	var out keptSet
	var m ptrace.ProtoMarshaler
	for id, f := range frags {
		sh := p.shardOf(id)
		sh.mu.Lock()
		p.ingest(sh, id, f, now, &m, &out)
		sh.mu.Unlock()
	}
	p.forward(ctx, &out)
	return nil
}

func (p *budgetTailSampler) split(td ptrace.Traces) map[pcommon.TraceID]*fragment {
	rss := td.ResourceSpans()
	frags := make(map[pcommon.TraceID]*fragment, rss.Len())
	var invalid [numInvalidCauses]int64
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := unknownService
		if v, ok := rs.Resource().Attributes().Get(serviceNameKey); ok && v.AsString() != "" {
			service = v.AsString()
		}
		if id, ok := singleTrace(rs); ok {
			// Fast path: the whole ResourceSpans is one trace, the shape the
			// loadbalancing exporter sends (it splits requests by trace ID).
			// It moves as a whole: no copy, no per-span allocation.
			f := frags[id]
			if f == nil {
				f = &fragment{td: ptrace.NewTraces(), rsIdx: -1, summary: summary{service: service}}
				frags[id] = f
			}
			spanwalk.ResourceSpans(rs, func(span ptrace.Span) {
				if service == unknownService {
					invalid[invalidMissingServiceName]++
				}
				if !p.summarize(f, rs, span, service) {
					invalid[invalidEndBeforeStart]++
				}
			})
			rs.MoveTo(f.td.ResourceSpans().AppendEmpty())
			f.rsIdx = -1
			continue
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				id := span.TraceID()
				if id.IsEmpty() {
					invalid[invalidZeroTraceID]++
					continue
				}
				if service == unknownService {
					invalid[invalidMissingServiceName]++
				}
				f := frags[id]
				if f == nil {
					f = &fragment{td: ptrace.NewTraces(), rsIdx: -1, summary: summary{service: service}}
					frags[id] = f
				}
				if f.rsIdx != i {
					f.rs = f.td.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(f.rs.Resource())
					f.rs.SetSchemaUrl(rs.SchemaUrl())
					f.rsIdx, f.ssIdx = i, -1
				}
				if f.ssIdx != j {
					f.ss = f.rs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(f.ss.Scope())
					f.ss.SetSchemaUrl(ss.SchemaUrl())
					f.ssIdx = j
				}
				if !p.summarize(f, rs, span, service) {
					invalid[invalidEndBeforeStart]++
				}
				span.MoveTo(f.ss.Spans().AppendEmpty())
			}
		}
	}
	if invalid != [numInvalidCauses]int64{} {
		// Invalid spans are rare; count them on the first shard.
		sh := p.shards[0]
		sh.mu.Lock()
		for c, n := range invalid {
			sh.counters.invalid[c] += n
		}
		sh.mu.Unlock()
	}
	return frags
}

// singleTrace reports whether every span of rs has one, non-zero, trace ID.
func singleTrace(rs ptrace.ResourceSpans) (pcommon.TraceID, bool) {
	var id pcommon.TraceID
	found := false
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len(); j++ {
		spans := sss.At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			tid := spans.At(k).TraceID()
			if tid.IsEmpty() || (found && tid != id) {
				return id, false
			}
			id, found = tid, true
		}
	}
	return id, found
}

// summarize folds a span into its fragment's summary; false means its end
// is before its start (its timing is then ignored).
func (p *budgetTailSampler) summarize(f *fragment, rs ptrace.ResourceSpans, span ptrace.Span, service string) bool {
	f.spans++
	if span.Status().Code() == ptrace.StatusCodeError {
		f.hasError = true
	} else if p.cfg.Errors.HTTPServerErrors {
		if v, ok := span.Attributes().Get(httpStatusKey); ok && v.Int() >= 500 {
			f.hasError = true
		}
	}
	if ts := span.TraceState().AsRaw(); ts != "" && f.ts == "" {
		f.ts = ts
	}
	isRoot := span.ParentSpanID().IsEmpty()
	if isRoot || f.group == "" {
		f.group = p.groupKey(rs.Resource().Attributes(), span)
		if isRoot {
			f.hasRoot = true
			f.service = service
		}
	}
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if end < start {
		return false
	}
	if f.minStart == 0 || start < f.minStart {
		f.minStart = start
	}
	if end > f.maxEnd {
		f.maxEnd = end
	}
	return true
}

func (p *budgetTailSampler) groupKey(res pcommon.Map, span ptrace.Span) string {
	var b strings.Builder
	for i, key := range p.cfg.Outliers.GroupBy {
		if i > 0 {
			b.WriteByte(0x1f)
		}
		if key == groupBySpanName {
			b.WriteString(span.Name())
			continue
		}
		if v, ok := res.Get(key); ok {
			b.WriteString(v.AsString())
		} else if v, ok := span.Attributes().Get(key); ok {
			b.WriteString(v.AsString())
		}
	}
	return b.String()
}

// ingest buffers one fragment; called with sh.mu held.
func (p *budgetTailSampler) ingest(sh *shard, id pcommon.TraceID, f *fragment, now time.Time, m *ptrace.ProtoMarshaler, out *keptSet) {
	if th, ok := sh.sampled.get(id); ok {
		sh.counters.late[sampled] += int64(f.spans)
		sh.counters.traces[sampled][reasonLateSpan]++
		sh.counters.spans[sampled] += int64(f.spans)
		sh.counters.bytes[sampled] += int64(m.TracesSize(f.td))
		out.addLate(f.td, th)
		return
	}
	if _, ok := sh.notSampled.get(id); ok {
		sh.counters.late[notSampled] += int64(f.spans)
		sh.counters.traces[notSampled][reasonLateSpan]++
		sh.counters.spans[notSampled] += int64(f.spans)
		sh.counters.bytes[notSampled] += int64(m.TracesSize(f.td))
		return
	}
	t := sh.traces[id]
	if t == nil {
		for len(sh.traces) >= sh.maxTraces {
			p.decide(sh, sh.arrivals.head, now, reasonForced, out)
		}
		t = &trace{id: id, arrived: now}
		sh.traces[id] = t
		sh.arrivals.pushBack(t)
	}
	chunk, _ := m.MarshalTraces(f.td)
	t.chunks = append(t.chunks, chunk)
	t.bytes += int64(len(chunk))
	sh.bytes += int64(len(chunk))
	if f.ts != "" && !t.hasRnd {
		t.rnd, t.hasRnd = otep235.Randomness(id, f.ts), true
	}
	if t.merge(&f.summary) {
		t.rootArrived = now
		t.inRootList = true
		sh.roots.pushBack(t)
	}
	if t.spans >= p.cfg.MaxSpansPerTrace {
		p.decide(sh, t, now, reasonSpanLimit, out)
	}
	for sh.bytes > sh.maxBytes && sh.arrivals.head != nil {
		p.decide(sh, sh.arrivals.head, now, reasonForced, out)
	}
}

// decideExpired decides every trace whose wait is over.
func (p *budgetTailSampler) decideExpired(ctx context.Context) {
	now := p.now()
	for _, sh := range p.shards {
		var out keptSet
		sh.mu.Lock()
		for t := sh.arrivals.head; t != nil && now.Sub(t.arrived) >= p.cfg.DecisionWait; t = sh.arrivals.head {
			p.decide(sh, t, now, reasonBaseline, &out)
		}
		for t := sh.roots.head; t != nil && now.Sub(t.rootArrived) >= p.cfg.DecisionWaitAfterRoot; t = sh.roots.head {
			p.decide(sh, t, now, reasonBaseline, &out)
		}
		sh.mu.Unlock()
		p.forward(ctx, &out)
	}
}

// decide runs the policy on t, removes it from the buffer and records the
// decision. cause is reasonBaseline for a normal decision, or the reason an
// early one was forced. Called with sh.mu held.
func (p *budgetTailSampler) decide(sh *shard, t *trace, now time.Time, cause reason, out *keptSet) {
	sh.remove(t)
	pol := p.policy.Load()
	rnd := t.rnd
	if !t.hasRnd {
		rnd = sampling.TraceIDToRandomness(t.id)
	}
	var dur time.Duration
	if t.maxEnd > t.minStart {
		dur = time.Duration(t.maxEnd - t.minStart)
	}
	outlier := p.groups.observe(t.group, dur, now)
	vol := p.unit.volume(t.spans, t.bytes)

	var r reason
	var prob probability
	switch {
	case t.hasError || outlier:
		r = reasonOutlier
		if t.hasError {
			r = reasonError
		}
		prob = pol.priority
		sh.volumes.priority += vol
	default:
		r = reasonBaseline
		prob = pol.baseline(t.service)
		svc := t.service
		if _, ok := sh.volumes.baseline[svc]; !ok && len(sh.volumes.baseline) >= p.cfg.MaxServices {
			svc = otherServices
		}
		sh.volumes.baseline[svc] += vol
	}
	keep := prob.th.ShouldSample(rnd)
	if !keep && r != reasonBaseline {
		sh.counters.priorityOverflow++
	}
	if cause != reasonBaseline {
		r = cause
	}
	d := notSampled
	if keep {
		d = sampled
		sh.volumes.kept += vol
		sh.sampled.put(t.id, prob.th)
		out.add(t, prob.th, reasonNames[r])
	} else {
		sh.notSampled.put(t.id, struct{}{})
	}
	sh.counters.traces[d][r]++
	sh.counters.spans[d] += int64(t.spans)
	sh.counters.bytes[d] += t.bytes
	p.tel.DecisionLatency.Record(context.Background(), now.Sub(t.arrived).Seconds())
}

// adjust recomputes the policy from the last interval's volumes.
func (p *budgetTailSampler) adjust() {
	now := p.now()
	secs := now.Sub(p.lastAdj).Seconds()
	if secs <= 0 {
		return
	}
	v := newVolumes()
	for _, sh := range p.shards {
		sh.mu.Lock()
		cur := sh.volumes
		sh.volumes = newVolumes()
		sh.mu.Unlock()
		for svc, vol := range cur.baseline {
			v.baseline[svc] += vol
		}
		v.priority += cur.priority
		v.kept += cur.kept
	}
	if !p.est.primed && len(v.baseline) == 0 && v.priority == 0 {
		// Nothing decided yet: an empty interval would teach rates of zero.
		return
	}
	p.lastAdj = now
	share := p.unit.perSecond / float64(max(1, p.peers.Load()))
	p.policy.Store(p.est.update(v, secs, share))
}

func (p *budgetTailSampler) refreshPeers() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := p.lookup(ctx, p.cfg.Budget.PeersDNS)
	if err != nil || len(addrs) == 0 {
		p.logger.Warn("cannot count sampler peers; keeping the last count",
			zap.String("peers_dns", p.cfg.Budget.PeersDNS), zap.Int64("peers", p.peers.Load()), zap.Error(err))
		return
	}
	unique := map[string]struct{}{}
	for _, a := range addrs {
		unique[a] = struct{}{}
	}
	if n := int64(len(unique)); n != p.peers.Swap(n) {
		p.logger.Info("sampler peers changed; budget share follows", zap.Int64("peers", n))
	}
}

// totals sums the shards' counters and buffer sizes.
func (p *budgetTailSampler) totals() (c counters, traces, bytes int64) {
	for _, sh := range p.shards {
		sh.mu.Lock()
		c.add(&sh.counters)
		traces += int64(len(sh.traces))
		bytes += sh.bytes
		sh.mu.Unlock()
	}
	return c, traces, bytes
}

func (p *budgetTailSampler) observe(_ context.Context, o metric.Observer) error {
	c, traces, bytes := p.totals()
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
	for i, n := range c.invalid {
		o.ObserveInt64(t.InvalidSpans, n, metric.WithAttributeSet(attribute.NewSet(attribute.String("cause", invalidNames[i]))))
	}
	o.ObserveInt64(t.DroppedTooEarly, c.droppedTooEarly)
	o.ObserveInt64(t.PriorityOverflow, c.priorityOverflow)
	o.ObserveInt64(t.ForwardFailed, p.forwardFailed.Load())
	o.ObserveInt64(t.BufferedTraces, traces)
	o.ObserveInt64(t.BufferedBytes, bytes)
	pol := p.policy.Load()
	o.ObserveFloat64(t.BudgetUtilization, pol.utilization)
	o.ObserveFloat64(t.BaselineProb, pol.meanProb)
	o.ObserveInt64(t.Peers, p.peers.Load())
	return nil
}
