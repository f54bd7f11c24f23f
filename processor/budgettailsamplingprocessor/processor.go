package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"encoding/binary"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
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

	"github.com/otelcol-cost/otelcol-cost/internal/cmdline"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/forward"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/livepolicy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/names"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/outliers"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/pipelineof"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/recall"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/shadow"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tally"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/tracebuf"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

// budgetTailSampler wires the parts (docs/architecture.md): split cuts a
// request into per-trace fragments, the shards buffer them (tracebuf, in
// spanmem's memory), decide.go runs the policy (policy, outliers, rules) on
// expired traces, forward hands kept ones on, handoff moves traces between
// samplers.
type budgetTailSampler struct {
	cfg    *Config
	logger *zap.Logger
	tel    *metadata.Telemetry
	reg    metric.Registration
	now    func() time.Time
	// epoch is what a trace's arrival instants count from.
	epoch    time.Time
	lookup   handoff.LookupIPs
	unit     policy.Unit
	shards   []*shard
	totals   *spanmem.Totals
	groups   *outliers.Groups
	codec    spanmem.Codec
	splitter *split.Splitter
	adj      *policy.Adjuster
	fwd      *forward.Forwarder
	// maxKeys bounds the fairness keys (baseline.max_keys).
	maxKeys int
	// rare is nil unless rare.interval is set.
	rare *rare.Tracker
	// red is nil unless red_metrics.enabled.
	red *red.Recorder

	// handoff is nil unless handoff.enabled.
	handoff *handoff.Handoff
	// wal is nil unless durable.enabled.
	wal *walState
	// live is nil without policy_file; shadow without its shadow_path.
	live   *livepolicy.Watcher
	shadow *shadow.Shadow

	relief *relief.Controller
	// recallPaused: the heap is past relief's activation level, and
	// relief holds nothing for recall.
	recallPaused atomic.Bool
	// lastShed is when shedOnMemory last cut the buffer.
	lastShed time.Time
	// reliefMeasured is when relief last measured the arrivals.
	reliefMeasured time.Time
	// goMemLimit is the Go memory limit before relief lowered it (0: it
	// did not), restored at shutdown.
	goMemLimit int64

	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once

	reasonAttrs [2][traceinfo.NumReasons]metric.MeasurementOption
}

// shard is one slice of the buffer, chosen by trace ID, with its lock and
// what the shard counts under it.
type shard struct {
	mu    sync.Mutex
	index int // in shards
	*tracebuf.Buffer
	counters tally.Counters
	volumes  policy.Volumes
	// intake is the volume received while the sampler measures its first
	// rates (priming); unused otherwise.
	intake float64
	// fragments counts what arrived since the last adjustment: an interval
	// with fragments but no decision is not idle, only between bursts.
	fragments int64
	// arrivals is what arrived since relief last measured.
	arrivals relief.Arrivals
	// recall holds the fragments relief dropped (nil without relief or
	// with stress_relief.recall.window 0).
	recall *recall.Store
}

// wallClock is read once, at construction (tests step it).
var wallClock = time.Now

// validating: the process is `otelcol-cost validate` (tests set it).
var validating = cmdline.Validating()

func newBudgetTailSampler(set processor.Settings, cfg *Config, next consumer.Traces) (*budgetTailSampler, error) {
	tel, err := metadata.NewTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	rs, err := rules.Compile(cfg.Rules, set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	n := cfg.NumShards
	if n == 0 {
		n = 4 * runtime.GOMAXPROCS(0)
	}
	// One clock for decisions, the log's records and its retention: the
	// wall clock read once, then the monotonic clock's elapsed time, which
	// a wall-clock step (chrony, a restored VM) cannot move back.
	epoch := wallClock()
	p := &budgetTailSampler{
		cfg:    cfg,
		logger: set.Logger,
		tel:    tel,
		now:    func() time.Time { return epoch.Add(time.Since(epoch)) },
		epoch:  epoch,
		lookup: net.DefaultResolver.LookupIP,
		unit:   policy.NewUnit(cfg.Budget),
		groups: outliers.New(cfg.Outliers),
		codec:  spanmem.NewCodec(cfg.BufferCompression == compressionS2),
		totals: spanmem.NewTotals(cfg.MaxTraces, cfg.MaxBufferedBytes, n, cfg.BufferMemory == bufferMemoryMapped),
		stop:   make(chan struct{}),
	}
	keys, err := split.ParseKeys("baseline.keys", cfg.Baseline.Keys)
	if err != nil {
		return nil, err
	}
	p.maxKeys = cfg.maxKeys()
	if cfg.MaxServices > 0 {
		set.Logger.Warn("max_services is deprecated: set baseline.max_keys instead", zap.Int("max_services", cfg.MaxServices))
	}
	if cfg.REDMetrics.Enabled {
		p.red = red.New(tel, cfg.REDMetrics.MaxKeys)
	}
	if cfg.Rare.Enabled() {
		p.rare = rare.New(cfg.Rare.Interval, p.maxKeys)
	}
	p.splitter = split.New(split.Settings{HTTPServerErrors: cfg.Errors.HTTPServerErrors, GroupBy: cfg.Outliers.GroupBy,
		Keys: keys, Rules: rs, Names: names.New()})
	settings := policy.Settings{Budget: cfg.Budget, AdjustInterval: cfg.AdjustInterval,
		Smoothing: cfg.Smoothing, MaxKeys: p.maxKeys, MinBaselineShare: cfg.Baseline.MinShare, RareInterval: cfg.Rare.Interval}
	p.adj = policy.NewAdjuster(settings, rs, p.drain)
	p.fwd = p.newForwarder(next)
	p.relief = relief.New(cfg.StressRelief, relief.Bounds{MaxTraces: int64(cfg.MaxTraces), MaxBytes: cfg.MaxBufferedBytes}, p.now())
	p.reliefMeasured = p.now()
	base := livepolicy.Base{Budget: cfg.Budget, MinShare: cfg.Baseline.MinShare, Keys: cfg.Baseline.Keys, Rules: cfg.Rules,
		Rare: cfg.Rare, Relief: cfg.StressRelief, DecisionWait: cfg.DecisionWait, Telemetry: set.TelemetrySettings}
	pipeline, _ := pipelineof.Of(set.Logger)
	instanceDir := durable.InstanceDir(cfg.Durable.Directory, set.ID.String(), pipeline)
	if cfg.PolicyFile.Path != "" {
		p.live = livepolicy.New(cfg.PolicyFile, base)
		if cfg.Durable.Enabled && !validating {
			p.live.KeepIn(filepath.Join(instanceDir, "policy-applied.yaml"))
		}
		// A bad file fails validate; a start runs on the last policy applied.
		pol, ok, err := p.live.Start(set.Logger, validating)
		if err != nil {
			return nil, err
		} else if ok {
			p.applyLive(pol)
			p.adj.RetuneNow(pol.Retune)
			settings.RareInterval = pol.RareInterval // the shadow's
		}
	}
	if cfg.PolicyFile.ShadowPath != "" {
		if p.shadow, err = shadow.New(settings, p.adj.Rules(), livepolicy.NewShadow(cfg.PolicyFile, base), n, set.Logger, validating); err != nil {
			return nil, err
		}
	}
	per := func(total int) int { return max(1, (total+n-1)/n) }
	for range n {
		p.shards = append(p.shards, &shard{
			index:    len(p.shards),
			Buffer:   tracebuf.New(per(cfg.DecisionCache.SampledSize), per(cfg.DecisionCache.NotSampledSize), p.totals),
			counters: tally.Counters{Rules: make([]rules.Counts, rules.MaxSlots)},
			volumes:  policy.NewVolumes(rs.Len()),
		})
	}
	if cfg.Durable.Enabled && !validating { // validate opens no log: it may run beside the collector
		if p.wal, err = p.openWAL(cfg, set.ID.String(), pipeline, tel); err != nil {
			return nil, err
		}
	}
	if cfg.Handoff.Enabled {
		if p.handoff, err = handoff.New(&cfg.Handoff, set.TelemetrySettings, func() time.Time { return p.now() }, (*handoffGlue)(p)); err != nil {
			return nil, err
		}
	}
	p.adj.Start(p.now())
	// A dry run forwards what relief drops: there is nothing to recall.
	if rc := cfg.StressRelief.Recall; p.relief.Enabled() && rc.Window > 0 && !cfg.DryRun {
		total := rc.MaxBytes
		if total == 0 {
			// Held while the sampler is short of memory: an eighth of
			// the buffer, and of the heap relief watches.
			total = cfg.MaxBufferedBytes / 8
			if heap := relief.HeapLimit(cfg.StressRelief.SoftLimitMiB()); heap > 0 {
				total = min(total, heap/8)
			}
		}
		for _, sh := range p.shards {
			sh.recall = recall.New(max(total/int64(n), 1), rc.Window.Nanoseconds())
		}
	}
	for d := range p.reasonAttrs {
		for r := range p.reasonAttrs[d] {
			p.reasonAttrs[d][r] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("decision", traceinfo.DecisionNames[d]), attribute.String("reason", traceinfo.ReasonNames[r])))
		}
	}
	p.reg, err = tel.Meter.RegisterCallback(p.observe, tel.Observables()...)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newForwarder hands kept traces to next.
func (p *budgetTailSampler) newForwarder(next consumer.Traces) *forward.Forwarder {
	return forward.New(forward.Settings{Next: next, Logger: p.logger, Codec: p.codec, Totals: p.totals,
		Meter: p.adj.Egress(), ReasonAttribute: p.cfg.ReasonAttribute, DryRun: p.cfg.DryRun})
}

func (p *budgetTailSampler) Capabilities() consumer.Capabilities {
	// The request is only read: the buffer holds copies of its encoding, and
	// what is forwarded is decoded from them.
	return consumer.Capabilities{MutatesData: false}
}

func (p *budgetTailSampler) Start(ctx context.Context, host component.Host) error {
	if p.handoff != nil {
		if err := p.handoff.Start(ctx, host); err != nil {
			return err
		}
	}
	p.adj.Start(p.now())
	p.goEvery(p.tickInterval(), func() { p.decideExpired(context.Background()) })
	p.goEvery(p.adj.TickInterval(), func() {
		p.adj.Tick(p.now())
		p.warnRareShortfall()
	})
	if p.relief.Enabled() {
		if prev, changed := p.relief.SetGoMemoryLimit(); changed {
			p.goMemLimit = prev
			p.logger.Info("Go memory limit lowered to stress relief's memory limit (memory_limit_mib − memory_spike_limit_mib), so that garbage is collected before memory_limiter's soft limit",
				zap.Uint64("soft_limit_mib", p.cfg.StressRelief.SoftLimitMiB()), zap.Int64("previous_bytes", prev))
		}
		p.reliefMeasured = p.now()
		p.goEvery(reliefLevelInterval, p.updateRelief)
		p.goEvery(reliefMeasureInterval, p.measureRelief)
	}
	if p.shadow != nil {
		p.shadow.Start(p.now())
		p.goEvery(p.shadow.TickInterval(), func() { p.shadow.Tick(p.now()) })
	}
	if p.live != nil || p.shadow != nil {
		p.goEvery(p.cfg.PolicyFile.CheckInterval, p.checkPolicy)
	}
	if p.cfg.Budget.PeersDNS != "" {
		p.refreshPeers()
		p.goEvery(p.cfg.Budget.PeersRefreshInterval, p.refreshPeers)
	}
	if p.wal != nil {
		if err := p.replayWAL(ctx); err != nil {
			return err
		}
		if p.handoff != nil {
			// The ring was resolved above: what it gives to other
			// samplers goes to them now, with its arrival times.
			p.rebalance()
		}
		p.goEvery(walMaintainInterval, p.maintainWAL)
		if p.cfg.Durable.Sync == durable.SyncInterval {
			p.goEvery(p.cfg.Durable.SyncInterval, func() { _ = p.wal.log.Sync() })
		}
	}
	return nil
}

// checkPolicy applies the policy file when it changed: from the next tick,
// with the rates, the buffer and the caches kept, so that no trace is split.
// A file that cannot be applied leaves the running policy.
func (p *budgetTailSampler) checkPolicy() {
	p.live.Poll(p.logger, func(pol livepolicy.Policy) {
		p.applyLive(pol)
		p.adj.Retune(pol.Retune)
	})
	p.shadow.Poll(p.logger)
}

// applyLive hands the file's rules, keys, rare interval and relief levels
// on. Spans are matched with the
// new rules from the next request; decisions apply them from the
// adjuster's next tick, once it planned for them. Rules keep their slots
// (rules.Set.Next), so buffered traces' matches stand either way.
func (p *budgetTailSampler) applyLive(pol livepolicy.Policy) {
	p.splitter.SetRules(pol.Rules)
	p.splitter.SetKeys(pol.Keys)
	p.adj.SetRules(pol.Rules)
	p.shadow.SetRules(pol.Rules)
	if p.rare != nil {
		p.rare.SetInterval(pol.RareInterval)
		p.adj.SetRareInterval(pol.RareInterval)
		p.shadow.SetRareInterval(pol.RareInterval)
	}
	p.relief.SetLevels(pol.ReliefLevels[0], pol.ReliefLevels[1])
}

// tickInterval is how often expired traces are looked for: a tenth of the
// shorter wait, between 10ms and 100ms. A pass decides on every core what
// expired since the last one; 700 ms of expiries at once (tail.yaml's waits
// with a 1 s cap) held both cores of a 2-core sampler long enough to stall
// intake.
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
		p.handoff.Leave(ctx)
	}
	now := p.now()
	lost := false
	for _, sh := range p.shards {
		var out forward.Kept
		sh.mu.Lock()
		if ctx.Err() != nil {
			// With the log, these are replayed at the next start.
			lost = lost || sh.Len() > 0
			sh.counters.DroppedTooEarly += int64(sh.Len())
			for t := sh.Oldest(); t != nil; t = sh.Oldest() {
				sh.Remove(t)
				sh.Forget(t.ID)
				sh.Release(t)
			}
		}
		for t := sh.Oldest(); t != nil; t = sh.Oldest() {
			p.decide(sh, t, now, traceinfo.ReasonBaseline, &out)
		}
		sh.mu.Unlock()
		p.forward(ctx, &out)
	}
	if p.wal != nil {
		// What the next consumer still refuses stays in the log for the
		// next start.
		lost = p.wal.retries.Offer(ctx, now, true) > 0 || lost
		p.wal.retries.GiveUp()
		p.closeWAL(lost)
	}
	p.totals.Arena().Close()
	if p.goMemLimit > 0 {
		debug.SetMemoryLimit(p.goMemLimit)
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

// instant is t on the buffer's clock.
func (p *budgetTailSampler) instant(t time.Time) tracebuf.Instant {
	return tracebuf.Instant(t.Sub(p.epoch))
}

func (p *budgetTailSampler) timeAt(i tracebuf.Instant) time.Time {
	return p.epoch.Add(time.Duration(i))
}

// since is how long before now the instant was.
func (p *budgetTailSampler) since(now time.Time, i tracebuf.Instant) time.Duration {
	return now.Sub(p.epoch) - time.Duration(i)
}

// drain takes the shards' decided volumes, intake and fragment counts since
// the last call (policy.Drain).
func (p *budgetTailSampler) drain() (v policy.Volumes, intake float64, fragments int64) {
	slots := p.adj.Rules().Len()
	v = policy.NewVolumes(slots)
	for _, sh := range p.shards {
		sh.mu.Lock()
		cur := sh.volumes
		sh.volumes = policy.NewVolumes(slots)
		intake += sh.intake
		sh.intake = 0
		fragments += sh.fragments
		sh.fragments = 0
		sh.mu.Unlock()
		v.Add(&cur)
	}
	if p.red != nil {
		p.red.Roll(p.now())
	}
	p.shadow.AddIntake(intake, fragments)
	return v, intake, fragments
}

// warnRareShortfall logs when rare traces start needing more of the budget
// than is left them, and when they fit again.
func (p *budgetTailSampler) warnRareShortfall() {
	if pol := p.adj.Policy(); p.rare != nil {
		p.rare.WarnShortfall(p.logger, pol.Rare().P, pol.RareShortfall())
	}
}

// refreshPeers resolves peers_dns: the number of sampler instances the
// budget is divided among and, with handoff, the gateways' hash ring.
func (p *budgetTailSampler) refreshPeers() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v4, v6, err := handoff.ResolvePeers(ctx, p.lookup, p.cfg.Budget.PeersDNS, p.handoff != nil)
	if n := handoff.PeerCount(v4, v6); n > 0 {
		p.shadow.SetPeers(n)
		if p.adj.SetPeers(n) {
			p.logger.Info("sampler peers changed; budget share follows", zap.Int64("peers", n))
		}
	} else {
		p.logger.Warn("cannot count sampler peers; keeping the last count",
			zap.String("peers_dns", p.cfg.Budget.PeersDNS), zap.Int64("peers", p.adj.Peers()), zap.Error(err))
	}
	if p.handoff != nil && err == nil {
		p.handoff.SetMembers(append(v4, v6...))
	}
}
