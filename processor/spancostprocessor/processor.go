package spancostprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor"

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpsize"
	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/watchfile"
	"github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor/internal/metadata"
)

const (
	unknownValue  = "unknown"
	overflowValue = "_other"
	// projectionBuckets is the resolution of the projection window.
	projectionBuckets = 10
)

type spanCost struct {
	logger  *zap.Logger
	cfg     *Config
	model   pricing.Model
	perSpan float64
	perByte float64
	tel     *metadata.Telemetry
	reg     metric.Registration
	now     func() time.Time
	// serviceDim is the index of service.name in Dimensions, or -1.
	serviceDim int
	labelKeys  []string
	// meters are per-request scratch (see meter.go): requests are metered
	// without a lock, and their totals merged under mu in one short step.
	meters sync.Pool

	// index maps a series key to its series; it is replaced, never changed,
	// so requests read it without a lock (series are created rarely).
	index atomic.Pointer[map[string]*series]

	// budgetsFile is nil without budgets_file; stop ends its polling.
	budgetsFile *watchfile.Watcher
	stop        chan struct{}
	wg          sync.WaitGroup

	mu sync.Mutex // guards what follows, and every series' totals
	// budgets are the configuration's, or the budgets file's.
	budgets BudgetsConfig
	order   []*series // creation order, for stable iteration
	other   *series
	window  window
}

// series holds the running totals of one dimension set.
type series struct {
	id          int // position in order: a request's totals are indexed by it
	values      []string
	attrs       metric.MeasurementOption
	spans       int64
	bytes       int64
	represented float64
	cost        float64
	// costBuckets is a ring of cost per projection bucket.
	costBuckets [projectionBuckets]float64
	budget      float64
	overBudget  bool
}

func newSpanCost(set processor.Settings, cfg *Config) (*spanCost, error) {
	model := cfg.Pricing.Resolve()
	tel, err := metadata.NewTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &spanCost{
		logger:     set.Logger,
		cfg:        cfg,
		model:      model,
		perSpan:    model.PerSpan(),
		perByte:    model.PerByte(),
		tel:        tel,
		now:        time.Now,
		serviceDim: slices.Index(cfg.Dimensions, serviceNameKey),
		budgets:    cfg.Budgets,
		stop:       make(chan struct{}),
	}
	if cfg.BudgetsFile.Path != "" {
		if err := p.loadBudgets(); err != nil {
			return nil, err
		}
	}
	p.meters.New = func() any { return newMeter(len(cfg.Dimensions)) }
	p.index.Store(&map[string]*series{})
	for _, d := range cfg.Dimensions {
		p.labelKeys = append(p.labelKeys, promLabel(d))
	}
	p.window.reset(p.now(), cfg.ProjectionWindow/projectionBuckets)
	p.reg, err = tel.Meter.RegisterCallback(p.observe,
		tel.Spans, tel.Bytes, tel.RepresentedSpans, tel.Cost, tel.ProjectedMonthlyCost, tel.BudgetUtilization, tel.MonthlyBudget,
		tel.BudgetsFileRejected, tel.BudgetsFileReloads)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// start polls the budgets file, if any.
func (p *spanCost) start(context.Context, component.Host) error {
	if p.budgetsFile == nil {
		return nil
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.cfg.BudgetsFile.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.checkBudgetsFile()
			}
		}
	}()
	return nil
}

func (p *spanCost) shutdown(context.Context) error {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
	if p.reg != nil {
		return p.reg.Unregister()
	}
	return nil
}

// processTraces meters td and returns it unchanged.
func (p *spanCost) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	m := p.meters.Get().(*meter)
	p.meter(m, td)
	p.mu.Lock()
	p.advance(p.now())
	for _, t := range m.totals {
		p.add(t)
	}
	p.mu.Unlock()
	if m.overflowed > 0 {
		p.tel.SeriesOverflow.Add(ctx, m.overflowed)
	}
	if m.invalid > 0 {
		p.tel.InvalidTracestate.Add(ctx, m.invalid)
	}
	m.reset()
	p.meters.Put(m)
	return td, nil
}

// meter attributes td's spans and bytes to series, in m.
func (p *spanCost) meter(m *meter, td ptrace.Traces) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		onResource := m.resourceDims(p.cfg.Dimensions, rs.Resource().Attributes())
		if onResource && !p.cfg.DryRun {
			// Fast path: every dimension is on the resource, so the whole
			// resource (spans and envelope bytes) belongs to one series.
			var n int64
			var represented float64
			spanwalk.ResourceSpans(rs, func(span ptrace.Span) {
				w, bad := m.weights.Weight(span)
				represented += w
				n++
				if bad {
					m.invalid++
				}
			})
			if n == 0 {
				continue
			}
			s, over := p.seriesFor(m)
			if over {
				m.overflowed += n
			}
			m.add(s, n, int64(otlpsize.ResourceSpansField(rs)), represented)
			continue
		}
		// Slow path: some dimension lives on spans, so each span is sized and
		// given its even share of its scope's and resource's envelope bytes.
		// (A dry run's spans are each sized and weighed here too: only what
		// would be kept is metered.)
		m.sizes.Attribute(rs, func(span ptrace.Span, bytes int) {
			if p.cfg.DryRun {
				var send bool
				if bytes, send = wouldSend(span, bytes); !send {
					return
				}
			}
			m.spanDims(p.cfg.Dimensions, span.Attributes())
			s, over := p.seriesFor(m)
			w, bad := m.weights.Weight(span)
			if bad {
				m.invalid++
			}
			if over {
				m.overflowed++
			}
			m.add(s, 1, int64(bytes), w)
		})
	}
}

func valueString(v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return v.AsString()
}

// seriesFor returns the series of m.values, creating it under the cap; the
// bool says the dimension set overflowed into _other. It takes the lock
// only to create a series.
func (p *spanCost) seriesFor(m *meter) (*series, bool) {
	if m.last != nil && slices.Equal(m.values, m.last.values) {
		return m.last, false
	}
	key := m.key()
	if s, ok := (*p.index.Load())[string(key)]; ok {
		m.last = s
		return s, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	index := *p.index.Load()
	if s, ok := index[string(key)]; ok { // created meanwhile
		return s, false
	}
	if len(index) >= p.cfg.MaxSeries {
		if p.other == nil {
			vals := make([]string, len(m.values))
			for i := range vals {
				vals[i] = overflowValue
			}
			p.other = p.newSeries(vals, 0)
		}
		return p.other, true
	}
	vals := slices.Clone(m.values)
	s := p.newSeries(vals, p.budgetOf(vals))
	next := make(map[string]*series, len(index)+1)
	maps.Copy(next, index)
	next[string(key)] = s
	p.index.Store(&next)
	return s, false
}

func (p *spanCost) newSeries(vals []string, budget float64) *series {
	kvs := make([]attribute.KeyValue, 0, len(vals)+1)
	kvs = append(kvs, attribute.String("stage", p.cfg.Stage))
	for i, v := range vals {
		kvs = append(kvs, attribute.String(p.labelKeys[i], v))
	}
	s := &series{id: len(p.order), values: vals, attrs: metric.WithAttributeSet(attribute.NewSet(kvs...)), budget: budget}
	p.order = append(p.order, s)
	return s
}

// add books a request's totals for one series; called with p.mu held.
func (p *spanCost) add(t total) {
	s := t.series
	cost := float64(t.spans)*p.perSpan + float64(t.bytes)*p.perByte
	s.spans += t.spans
	s.bytes += t.bytes
	s.represented += t.represented
	s.cost += cost
	s.costBuckets[p.window.head] += cost
}

// advance rotates the projection window to now and checks budget crossings
// when a bucket closes.
func (p *spanCost) advance(now time.Time) {
	steps := p.window.advance(now)
	if steps == 0 {
		return
	}
	for _, s := range p.order {
		for k := 1; k <= steps; k++ {
			s.costBuckets[(p.window.head-steps+k+projectionBuckets)%projectionBuckets] = 0
		}
	}
	p.checkBudgets(now)
}

// serviceSpend is a service's projected spend over all its series (several
// when other dimensions split it, e.g. by environment): a budget is the
// service's, not one series'.
type serviceSpend struct {
	name      string
	projected float64
	budget    float64
	first     *series // carries the over-budget state of the service
}

// byService sums the projected spend of the series that have a budget, per
// service (per series when service.name is not a dimension), in first-seen order.
func (p *spanCost) byService(now time.Time) []*serviceSpend {
	var out []*serviceSpend
	index := map[string]*serviceSpend{}
	for _, s := range p.order {
		if s.budget <= 0 {
			continue
		}
		key := p.describe(s)
		if p.serviceDim >= 0 {
			key = s.values[p.serviceDim]
		}
		sp := index[key]
		if sp == nil {
			sp = &serviceSpend{name: key, budget: s.budget, first: s}
			index[key] = sp
			out = append(out, sp)
		}
		sp.projected += p.projected(s, now)
	}
	return out
}

func (p *spanCost) checkBudgets(now time.Time) {
	for _, sp := range p.byService(now) {
		s := sp.first
		switch {
		case sp.projected > sp.budget && !s.overBudget:
			s.overBudget = true
			p.logger.Warn("projected monthly spend is over budget",
				zap.String("stage", p.cfg.Stage), zap.String("service", sp.name),
				zap.Float64("projected_monthly", sp.projected), zap.Float64("budget_monthly", sp.budget),
				zap.String("currency", p.model.Currency))
		case sp.projected <= sp.budget && s.overBudget:
			s.overBudget = false
			p.logger.Info("projected monthly spend is back within budget",
				zap.String("stage", p.cfg.Stage), zap.String("service", sp.name),
				zap.Float64("projected_monthly", sp.projected), zap.Float64("budget_monthly", sp.budget))
		}
	}
}

func (p *spanCost) describe(s *series) string {
	out := ""
	for i, v := range s.values {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%s=%s", p.cfg.Dimensions[i], v)
	}
	return out
}

// projected is the monthly spend at the rate seen over the window.
func (p *spanCost) projected(s *series, now time.Time) float64 {
	var sum float64
	for _, c := range s.costBuckets {
		sum += c
	}
	covered := p.window.covered(now)
	return sum / covered.Seconds() * pricing.Month.Seconds()
}

func (p *spanCost) observe(_ context.Context, o metric.Observer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.advance(now)
	for _, s := range p.order {
		o.ObserveInt64(p.tel.Spans, s.spans, s.attrs)
		o.ObserveInt64(p.tel.Bytes, s.bytes, s.attrs)
		o.ObserveFloat64(p.tel.RepresentedSpans, s.represented, s.attrs)
		o.ObserveFloat64(p.tel.Cost, s.cost, s.attrs)
		o.ObserveFloat64(p.tel.ProjectedMonthlyCost, p.projected(s, now), s.attrs)
	}
	for _, sp := range p.byService(now) {
		attrs := p.serviceAttrs(sp)
		o.ObserveFloat64(p.tel.BudgetUtilization, sp.projected/sp.budget, attrs)
		o.ObserveFloat64(p.tel.MonthlyBudget, sp.budget, attrs)
	}
	p.observeBudgetsFile(o)
	return nil
}

// serviceAttrs are the stage and the service's name, or every dimension
// when service.name is not one.
func (p *spanCost) serviceAttrs(sp *serviceSpend) metric.MeasurementOption {
	if p.serviceDim < 0 {
		return sp.first.attrs
	}
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("stage", p.cfg.Stage),
		attribute.String(p.labelKeys[p.serviceDim], sp.name)))
}

// window tracks the ring position shared by every series' cost buckets.
type window struct {
	bucket    time.Duration
	head      int
	headStart time.Time
	start     time.Time
}

func (w *window) reset(now time.Time, bucket time.Duration) {
	w.bucket, w.head, w.headStart, w.start = bucket, 0, now, now
}

// advance moves the head to the bucket holding now; it returns how many
// buckets were opened (at most the ring size).
func (w *window) advance(now time.Time) int {
	elapsed := now.Sub(w.headStart)
	if elapsed < w.bucket {
		return 0
	}
	steps := int(elapsed / w.bucket)
	w.headStart = w.headStart.Add(time.Duration(steps) * w.bucket)
	if steps > projectionBuckets {
		steps = projectionBuckets
	}
	w.head = (w.head + steps) % projectionBuckets
	return steps
}

// covered is the span of time the ring's buckets hold, at least a second.
func (w *window) covered(now time.Time) time.Duration {
	c := now.Sub(w.start)
	if ring := time.Duration(projectionBuckets-1)*w.bucket + now.Sub(w.headStart); c > ring {
		c = ring
	}
	return max(c, time.Second)
}

// promLabel translates an attribute key the way the Prometheus exporter does.
func promLabel(key string) string {
	b := []byte(key)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b)
}
