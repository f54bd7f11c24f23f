package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// e2eRows collects each scenario's figures; TestMain prints them as a table.
var (
	e2eMu   sync.Mutex
	e2eRows []string
)

func reportRow(scenario string, sent, kept, lost, split int, note string) {
	e2eMu.Lock()
	defer e2eMu.Unlock()
	e2eRows = append(e2eRows, fmt.Sprintf("| %-22s | %8d | %8d | %6d | %5d | %-16s |", scenario, sent, kept, lost, split, note))
}

// overloadRows are the overload scenarios' figures (a table of their own).
var overloadRows []string

func reportOverloadRow(scenario string, refused, lost int, errorsKept, errorsSent int, keptToBudget float64, peakRSS, boundMiB int) {
	e2eMu.Lock()
	defer e2eMu.Unlock()
	overloadRows = append(overloadRows, fmt.Sprintf("| %-20s | %8d | %8d | %6d / %-6d | %13.2f | %7d / %-5d |",
		scenario, refused, lost, errorsKept, errorsSent, keptToBudget, peakRSS, boundMiB))
}

// printE2ETable prints the scenarios' figures and, because `go test` hides
// a passing package's output, also writes them to $E2E_REPORT when set
// (`make test` prints that file).
func printE2ETable() {
	e2eMu.Lock()
	defer e2eMu.Unlock()
	if len(e2eRows) == 0 && len(overloadRows) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\nend-to-end scenarios (spans):\n")
	b.WriteString("| scenario               |     sent |     kept |   lost | split | budget error     |\n")
	b.WriteString("|------------------------|----------|----------|--------|-------|------------------|\n")
	for _, r := range e2eRows {
		b.WriteString(r + "\n")
	}
	if len(overloadRows) > 0 {
		b.WriteString("\noverload, a sender that does not retry (spans; peak RSS growth / memory_limiter limit, MiB):\n")
		b.WriteString("| scenario             |  refused | lost at sender | errors kept / sent | kept / budget | peak RSS / bound |\n")
		b.WriteString("|----------------------|----------|----------|-----------------|---------------|-----------------|\n")
		for _, r := range overloadRows {
			b.WriteString(r + "\n")
		}
	}
	fmt.Fprint(os.Stdout, b.String())
	if path := os.Getenv("E2E_REPORT"); path != "" {
		_ = os.WriteFile(path, []byte(b.String()), 0o644)
	}
}

// outcome compares what the generator sent with what the sinks hold.
type outcome struct {
	sent, kept, split int
	duplicates        int // spans received more than once (not in kept)
	splitIDs          []pcommon.TraceID
	incomplete        []pcommon.TraceID
	keptTraces        map[pcommon.TraceID]bool
	got               map[pcommon.TraceID]int // spans received per trace, all sinks
}

func collectOutcome(lg *loadGen, sinks []*otlpSink) outcome {
	got := map[pcommon.TraceID]int{}
	o := outcome{keptTraces: map[pcommon.TraceID]bool{}, got: got}
	where := map[pcommon.TraceID]int{}
	seen := map[pcommon.SpanID]bool{}
	for _, s := range sinks {
		for _, id := range s.traceIDs() {
			where[id]++
			for _, span := range s.trace(id) {
				// A span received twice (a gateway retry) counts once.
				if seen[span.SpanID()] {
					o.duplicates++
					continue
				}
				seen[span.SpanID()] = true
				got[id]++
			}
		}
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for id, tr := range lg.traces {
		o.sent += tr.accepted
		n := got[id]
		o.kept += n
		if where[id] > 1 {
			o.split++
			o.splitIDs = append(o.splitIDs, id)
		}
		if n > 0 {
			o.keptTraces[id] = true
			if n != tr.accepted {
				o.incomplete = append(o.incomplete, id)
			}
		}
	}
	return o
}

// waitQuiet waits until the sinks have received nothing new for quiet.
func waitQuiet(t *testing.T, sinks []*otlpSink, quiet time.Duration) {
	t.Helper()
	last, since := -1, time.Now()
	eventually(t, 60*time.Second, func() bool {
		n := 0
		for _, s := range sinks {
			n += s.spanCount()
		}
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	}, "sinks quiet for %v", quiet)
}

// TestE2ESteadyLoad: every kept trace complete and from one sampler only,
// every error and slow trace kept, kept volume at the tier budget, and
// span_cost(kept) bytes matching what the backend received.
func TestE2ESteadyLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	// ≈ 3,600 spans/s offered; ≈ 1,500 traces kept in the measured window,
	// so sampling noise stays well inside the ±10% asserted.
	const budget = 1350.0
	tr := startTier(t, tierOptions{samplers: 3, budget: budget, samplerEnv: map[string]string{
		"DECISION_WAIT_AFTER_ROOT": "2s",
		// Longer intervals than the suite's 2s: each rate estimate then spans
		// more traces, and its noise biases the probability less.
		"ADJUST_INTERVAL": "3s",
	}})
	lg := newLoadGen(t, tr.gateway, 300, 1)
	start := time.Now()
	lg.run(36 * time.Second)
	end := time.Now()
	waitQuiet(t, tr.sinks, 3*time.Second)

	o := collectOutcome(lg, tr.sinks)
	assert.Zero(t, o.split, "trace affinity: no trace kept by two samplers")
	assert.Empty(t, o.incomplete, "every kept trace arrives complete")
	missing := 0
	for id, st := range lg.traces {
		if (st.Error || st.Slow) && !o.keptTraces[id] {
			missing++
		}
	}
	assert.Zero(t, missing, "every error and slow trace is kept")

	from := start.Add(15 * time.Second) // first adjustment plus 3 intervals, plus the decision wait
	keptInWindow := 0
	for _, s := range tr.sinks {
		keptInWindow += s.spansBetween(from, end)
	}
	rate := float64(keptInWindow) / end.Sub(from).Seconds()
	budgetErr := rate/budget - 1
	assert.InDelta(t, 0, budgetErr, 0.10, "kept %.0f spans/s against a tier budget of %.0f", rate, budget)

	// span_cost at the kept stage against the bytes the backend received.
	want := map[string]int{}
	for _, s := range tr.sinks {
		for svc, b := range s.serviceBytes() {
			want[svc] += b
		}
	}
	got := map[string]float64{}
	for _, s := range tr.samplers {
		fams := s.metrics()
		for svc := range want {
			v, _ := metricValue(fams, "otelcol_processor_span_cost_bytes_total", map[string]string{"stage": "kept", "service_name": svc})
			got[svc] += v
		}
	}
	for svc, b := range want {
		assert.InEpsilon(t, float64(b), got[svc], 0.02, "service %s: span_cost(kept) bytes vs backend bytes", svc)
	}
	reportRow("steady load", o.sent, o.kept, 0, o.split, fmt.Sprintf("%+.1f%%", 100*budgetErr))
}

// TestE2ERollingRestart: SIGTERM to each sampler in turn under load loses no
// span and splits no trace (the budget is large: everything is kept).
func TestE2ERollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	tr := startTier(t, tierOptions{samplers: 3, budget: 1e6})
	lg := newLoadGen(t, tr.gateway, 50, 2)
	done := lg.start(20 * time.Second)
	for i := range tr.samplers {
		time.Sleep(4 * time.Second)
		tr.restartSampler(i)
	}
	<-done
	waitQuiet(t, tr.sinks, 4*time.Second)
	o := collectOutcome(lg, tr.sinks)
	lost := o.sent - o.kept
	assert.Zero(t, lost, "no span lost across a rolling restart")
	assert.Zero(t, o.split, "no trace split")
	assert.Empty(t, o.incomplete)
	reportRow("rolling restart", o.sent, o.kept, lost, o.split, "n/a (keep all)")
}

// TestE2ESamplerKilled: a sampler is SIGKILLed mid-run. An endpoint
// controller (what Kubernetes does for the headless Service the chart's dns
// resolver reads) probes the samplers' health checks and, after two failed
// probes, gives the gateway the list without the dead one. Loss is then
// confined to traces that were on, or routed to, the dead sampler before the
// gateway learned: none finished well before the kill, none started after
// the gateway reloaded. Prometheus fires the sampler-down alert.
func TestE2ESamplerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	tr := startTier(t, tierOptions{samplers: 3, budget: 1e6})
	targets := map[string][]string{"gateway": {tr.gateway.Metrics}}
	for _, s := range tr.samplers {
		targets["sampler"] = append(targets["sampler"], s.Metrics)
	}
	prom := startPrometheus(t, targets, "5s")
	lg := newLoadGen(t, tr.gateway, 50, 3)
	done := lg.start(22 * time.Second)
	time.Sleep(10 * time.Second)
	killedAt := time.Now()
	tr.samplers[2].kill()
	rerouted := tr.removeUnhealthy(t, 500*time.Millisecond, 2)
	t.Logf("sampler killed: gateway routes around it %v after the kill, accepting again %v after",
		rerouted.sighup.Sub(killedAt).Round(time.Millisecond), rerouted.ready.Sub(killedAt).Round(time.Millisecond))
	eventually(t, 60*time.Second, func() bool {
		return prom.alertFiring(t, "OtelcolCostSamplerDown", map[string]string{"instance": tr.samplers[2].Metrics})
	}, "OtelcolCostSamplerDown fires in Prometheus for the killed sampler")
	<-done
	waitQuiet(t, tr.sinks[:2], 4*time.Second)
	o := collectOutcome(lg, tr.sinks)
	assert.Zero(t, o.split, "removing a sampler moves no other sampler's traces")

	// A trace fully accepted this long before the kill was decided and
	// exported (decision_wait 4s, batch timeout 1s, a second of slack).
	const delivered = 6 * time.Second
	var lostBefore, lostAfter, lostWindow int
	for id, st := range lg.traces {
		lost := st.accepted - o.got[id]
		switch {
		case lost == 0:
		case st.lastAccepted.Before(killedAt.Add(-delivered)):
			lostBefore += lost
		case st.firstAccepted.After(rerouted.ready):
			lostAfter += lost
		default:
			lostWindow += lost
		}
	}
	lost := o.sent - o.kept
	t.Logf("sampler killed: %d of %d spans lost (%.1f%%): %d in the window from %v before the kill to the reload, %d before, %d after",
		lost, o.sent, 100*float64(lost)/float64(o.sent), lostWindow, delivered, lostBefore, lostAfter)
	assert.Zero(t, lostBefore, "traces delivered before the kill are not lost")
	assert.Zero(t, lostAfter, "traces started after the gateway reloaded are routed to live samplers")
	assert.Less(t, float64(lost), 0.2*float64(o.sent), "loss is confined to the dead sampler's buffer and the detection window")
	reportRow("sampler killed", o.sent, o.kept, lost, o.split, fmt.Sprintf("rerouted +%.1fs", rerouted.ready.Sub(killedAt).Seconds()))
}

// TestE2ESamplerKilledDurable: a sampler is SIGKILLed mid-load and its
// container restarts at once on the same address and volume (an OOM kill,
// a crash); in a second run, five kills in a row. The gateway retries what
// the dead sampler did not acknowledge; with durable on, the sampler
// replays what it did. Every span reaches the backend once and no trace is
// split. Without the log (and with the in-memory backend queue of before),
// what the sampler held is lost: that row is measured, not asserted.
func TestE2ESamplerKilledDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	for _, tc := range []struct {
		name    string
		durable bool
		kills   int
		sync    string
	}{
		{"sampler killed, restarted", false, 1, "interval"},
		{"sampler killed, durable", true, 1, "interval"},
		{"killed 5 times, durable", true, 5, "interval"},
		// Every acknowledgement flushed to the device, the backend queue's
		// copy first (QUEUE_FSYNC, as the chart sets it).
		{"sampler killed 5×, sync always", true, 5, "always"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"DURABLE_ENABLED": fmt.Sprint(tc.durable), "DURABLE_SYNC": tc.sync,
				"QUEUE_FSYNC": fmt.Sprint(tc.sync == "always")}
			var configs []string
			if !tc.durable {
				overlay := filepath.Join(t.TempDir(), "memory-queue.yaml")
				require.NoError(t, os.WriteFile(overlay, []byte("exporters:\n  otlp_grpc/backend:\n    sending_queue:\n      storage: null\n"), 0o600))
				configs = []string{configPath("sampler.yaml"), overlay}
			}
			tr := startTier(t, tierOptions{samplers: 3, budget: 1e6, samplerEnv: env, samplerConfig: configs})
			lg := newLoadGen(t, tr.gateway, 50, 5)
			done := lg.start(24 * time.Second)
			time.Sleep(8 * time.Second)
			for k := range tc.kills {
				tr.killSampler(2 - k%2) // the last kills alternate between two samplers
				time.Sleep(2 * time.Second)
			}
			<-done
			waitQuiet(t, tr.sinks, 6*time.Second)
			o := collectOutcome(lg, tr.sinks)
			lost := o.sent - o.kept
			var replayed float64
			for _, s := range tr.samplers {
				v, _ := metricValue(s.metrics(), "otelcol_processor_budget_tail_sampling_durable_replayed_spans_total", nil)
				replayed += v
			}
			t.Logf("%s: %d of %d spans lost, %d traces split, %d spans twice at the backend, %.0f spans replayed",
				tc.name, lost, o.sent, o.split, o.duplicates, replayed)
			note := fmt.Sprintf("%d twice", o.duplicates)
			reportRow(tc.name, o.sent, o.kept, lost, o.split, note)
			if !tc.durable {
				return
			}
			assert.Positive(t, replayed, "the restarted sampler replayed what it held")
			assert.Zero(t, lost, "no acknowledged span lost")
			assert.Zero(t, o.split, "no trace split")
			assert.Zero(t, o.duplicates, "no span sent twice")
			assert.Empty(t, o.incomplete, "every kept trace whole")
		})
	}
}

// TestE2EAlertsFire: an undersized contrib tail_sampling drops traces too
// early, our undersized sampler decides them early, and a service runs over
// its budget; Prometheus, evaluating the shipped rules, fires all three.
func TestE2EAlertsFire(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := startCollector(t, nil, "integration/testdata/alerting.yaml")
	prom := startPrometheus(t, map[string][]string{"undersized": {c.Metrics}}, "5s")
	g := workload.NewGenerator(workload.Options{Services: 1, Seed: 9})
	deadline := time.Now().Add(60 * time.Second)
	fired := map[string]bool{}
	for time.Now().Before(deadline) && !(fired["dropped"] && fired["budget"] && fired["early"]) {
		td, _ := g.Batch(50)
		workload.SetService(td, "checkout")
		require.NoError(t, c.sendGRPC(td))
		time.Sleep(200 * time.Millisecond)
		fired["dropped"] = fired["dropped"] || prom.alertFiring(t, "OtelcolTailSamplingDroppedTooEarly", map[string]string{"job": "undersized"})
		fired["budget"] = fired["budget"] || prom.alertFiring(t, "OtelcolCostServiceOverBudget", map[string]string{"service_name": "checkout"})
		fired["early"] = fired["early"] || prom.alertFiring(t, "OtelcolCostTracesDecidedEarly", map[string]string{"job": "undersized"})
	}
	assert.True(t, fired["dropped"], "dropped-too-early alert fires")
	assert.True(t, fired["budget"], "per-service spend alert fires")
	assert.True(t, fired["early"], "decided-early alert fires for our undersized sampler")
	v, ok := prom.query(t, `max(otelcol_processor_span_cost_budget_utilization_ratio{service_name="checkout"})`)
	require.True(t, ok)
	assert.Greater(t, v, 1.0)
	reportRow("alerts fire", 0, 0, 0, 0, strings.TrimSpace(fmt.Sprintf("%v", fired)))
}

// TestE2EOverload: far more load than the samplers' memory allows. Their
// memory_limiter refuses with retryable errors, the gateway and the generator
// retry, resident memory stays under the limit, and every span the gateway
// accepted is accounted for: decided (kept at a sink or counted not sampled).
func TestE2EOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const limitMiB = 80
	tr := startTier(t, tierOptions{samplers: 3, budget: 300, samplerEnv: map[string]string{
		"MEMORY_LIMIT_MIB":       fmt.Sprint(limitMiB),
		"MEMORY_SPIKE_LIMIT_MIB": "40",
		// As the chart runs a sampler: GOMEMLIMIT at memory_limiter's
		// limit (both 80% of the container's memory limit).
		"GOMEMLIMIT":               fmt.Sprintf("%dMiB", limitMiB),
		"DECISION_WAIT":            "8s",
		"DECISION_WAIT_AFTER_ROOT": "6s",
		// memory_limiter's refusals and the senders' retries are what this
		// tests; TestE2EOverloadStressRelief runs relief.
		"STRESS_RELIEF_MODE": "never",
	}})
	lg := newLoadGen(t, tr.gateway, 2500, 6)
	// limit_mib bounds the Go heap; resident memory adds the runtime and the
	// mapped binary, measured before any load: growth is what is bounded.
	peaks := watchRSSGrowth(tr.samplers)
	lg.run(20 * time.Second)
	growth := peaks()

	// Wait until every accepted span has been decided somewhere.
	accepted := 0
	for _, st := range lg.traces {
		accepted += st.accepted
	}
	decided := func() (total, refused float64) {
		for _, s := range tr.samplers {
			f := s.metrics()
			v, _ := metricValue(f, "otelcol_processor_budget_tail_sampling_spans_total", nil)
			r, _ := metricValue(f, "otelcol_processor_memory_limiter_refused_spans_total", nil)
			total += v
			refused += r
		}
		return
	}
	eventually(t, 90*time.Second, func() bool { d, _ := decided(); return int(d) >= accepted },
		"all %d accepted spans decided", accepted)
	d, refused := decided()
	kept := 0
	for _, s := range tr.sinks {
		kept += s.spanCount()
	}
	t.Logf("overload: generator refusals %d, sampler memory_limiter refused %.0f spans, accepted %d, decided %.0f, kept %d, RSS growth %v MiB (heap limit %d)",
		lg.refused, refused, accepted, d, kept, growth, limitMiB)
	// The gateway retries a request whole when one sampler refuses it, so
	// other samplers see parts again; they drop what they recognise (the
	// last fragments of each trace and decision), and a re-sent part older
	// than that is decided twice. Nothing may be lost; double decisions
	// stay rare.
	assert.GreaterOrEqual(t, d, float64(accepted), "every accepted span decided")
	assert.LessOrEqual(t, d-float64(accepted), 0.001*float64(accepted), "spans decided twice (re-sent, not recognised)")
	assert.Positive(t, refused+float64(lg.refused), "the load was refused somewhere: it exceeded capacity")
	for i, g := range growth {
		assert.Less(t, g, limitMiB, "sampler %d: memory grown under load stays under the memory_limiter limit", i)
	}
	// Decided beyond what was accepted is re-sent parts decided twice, not
	// a negative loss.
	reportRow("overload", accepted, kept, max(accepted-int(d), 0), 0, fmt.Sprintf("%d decided twice", max(int(d)-accepted, 0)))
}

// rssMiB is a collector's resident set size, 0 once it has gone.
func rssMiB(c *collector) int {
	mib, _ := procwatch.RSSMiB(c.cmd.Process.Pid)
	return mib
}
