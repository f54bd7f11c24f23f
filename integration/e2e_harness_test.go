package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/spanwalk"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// tier is one gateway in front of samplers, each sampler exporting to its
// own sink so that the test knows which sampler kept a trace.
type tier struct {
	t        *testing.T
	gateway  *collector
	samplers []*collector
	sinks    []*otlpSink
	env      []map[string]string
	configs  []string
	// resolverFile overrides the gateway's static sampler list; rewriting it
	// and sending SIGHUP makes the gateway reload with a new list.
	resolverFile string
	// router is the gateway's exporter: trace_router, or load_balancing
	// (tierOptions.contribGateway).
	router string
}

type tierOptions struct {
	samplers      int
	budget        float64 // spans/s for the whole tier
	samplerConfig []string
	samplerEnv    map[string]string
	// contribGateway routes with contrib's load_balancing exporter
	// (configs/gateway-loadbalancing.yaml) instead of trace_router (the
	// shipped gateway.yaml), which the scenarios run with.
	contribGateway bool
}

func startTier(t *testing.T, o tierOptions) *tier {
	t.Helper()
	tr := &tier{t: t}
	var hostnames []string
	for i := 0; i < o.samplers; i++ {
		sink := startSink(t)
		env := map[string]string{
			"OTLP_BACKEND_ENDPOINT":    sink.Addr,
			"BUDGET_SPANS_PER_SECOND":  fmt.Sprint(o.budget),
			"SAMPLER_INSTANCES":        fmt.Sprint(o.samplers),
			"DECISION_WAIT":            "4s",
			"DECISION_WAIT_AFTER_ROOT": "1500ms",
			"ADJUST_INTERVAL":          "2s",
			"LOG_LEVEL":                "warn",
			// Its own state volume, kept across restarts (the durable
			// log and the backend queue).
			"OTELCOL_COST_DATA_DIR": t.TempDir(),
		}
		for k, v := range o.samplerEnv {
			env[k] = v
		}
		configs := o.samplerConfig
		if configs == nil {
			configs = []string{configPath("sampler.yaml")}
		}
		s := startCollector(t, env, configs...)
		tr.sinks = append(tr.sinks, sink)
		tr.samplers = append(tr.samplers, s)
		tr.env = append(tr.env, env)
		tr.configs = configs
		hostnames = append(hostnames, s.GRPC)
	}
	tr.resolverFile = filepath.Join(t.TempDir(), "resolver.yaml")
	gatewayConfigs := []string{configPath("gateway.yaml")}
	tr.router = "trace_router"
	if o.contribGateway {
		tr.router = "load_balancing"
		gatewayConfigs = append(gatewayConfigs, configPath("gateway-loadbalancing.yaml"))
	}
	tr.writeResolver(hostnames)
	tr.gateway = startCollector(t, map[string]string{"LOG_LEVEL": "warn"}, append(gatewayConfigs, tr.resolverFile)...)
	return tr
}

// writeResolver writes the gateway's sampler list (a config overlay: lists
// replace, they do not merge).
func (tr *tier) writeResolver(hostnames []string) {
	overlay := "exporters:\n  " + tr.router + ":\n    resolver:\n      static:\n        hostnames: [" + strings.Join(hostnames, ", ") + "]\n"
	require.NoError(tr.t, os.WriteFile(tr.resolverFile, []byte(overlay), 0o600))
}

// resolveSamplers gives the running gateway a new sampler list, as the dns
// resolver does when the headless Service's endpoints change: the overlay is
// rewritten, the gateway reloads its configuration on SIGHUP, and this waits
// until it answers again.
func (tr *tier) resolveSamplers(samplers []*collector) reroute {
	var hostnames []string
	for _, s := range samplers {
		hostnames = append(hostnames, s.GRPC)
	}
	tr.writeResolver(hostnames)
	r := reroute{sighup: time.Now()}
	require.NoError(tr.t, tr.gateway.cmd.Process.Signal(syscall.SIGHUP))
	// The reload stops the health check before it starts it again.
	require.NoError(tr.t, waitGone("http://"+tr.gateway.Health+"/", 10*time.Second))
	require.NoError(tr.t, procwatch.WaitReady("http://"+tr.gateway.Health+"/", tr.gateway.done, 30*time.Second))
	r.ready = time.Now()
	return r
}

// restartSampler stops sampler i with SIGTERM and starts it again where it was.
func (tr *tier) restartSampler(i int) {
	tr.samplers[i].stop()
	tr.samplers[i] = startCollectorAt(tr.t, tr.samplers[i].ep, tr.env[i], tr.configs...)
}

// killSampler SIGKILLs sampler i and starts it again at once on the same
// address and state directory: a container restarted in its pod after an
// OOM kill or a crash.
func (tr *tier) killSampler(i int) {
	tr.samplers[i].kill()
	tr.samplers[i] = startCollectorAt(tr.t, tr.samplers[i].ep, tr.env[i], tr.configs...)
}

// reroute is when the endpoint controller gave the gateway a new sampler
// list, and when the reloaded gateway answered its health check again.
type reroute struct{ sighup, ready time.Time }

// removeUnhealthy plays the endpoint controller: it probes every sampler's
// health check each period, and once one has failed threshold probes in a
// row (a readiness probe's failureThreshold), it drops that sampler from the
// gateway's list and waits for the gateway to be back. It gives up after 30s.
func (tr *tier) removeUnhealthy(t *testing.T, period time.Duration, threshold int) reroute {
	t.Helper()
	failures := make([]int, len(tr.samplers))
	client := http.Client{Timeout: period}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(period) {
		var live []*collector
		for i, s := range tr.samplers {
			resp, err := client.Get("http://" + s.Health + "/")
			if err == nil {
				resp.Body.Close()
			}
			if err == nil && resp.StatusCode == http.StatusOK {
				failures[i] = 0
			} else {
				failures[i]++
			}
			if failures[i] < threshold {
				live = append(live, s)
			}
		}
		if len(live) == len(tr.samplers) {
			continue
		}
		return tr.resolveSamplers(live)
	}
	t.Fatal("no sampler failed its health check within 30s")
	return reroute{}
}

// waitGone polls url until it stops answering 200.
func waitGone(url string, timeout time.Duration) error {
	client := http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := client.Get(url)
		if err != nil {
			return nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil
		}
	}
	return fmt.Errorf("%s still answering after %v", url, timeout)
}

// sentTrace is what the generator knows of a trace it sent.
type sentTrace struct {
	workload.Trace
	accepted int // spans the gateway accepted
	// When the gateway accepted the trace's first and last parts.
	firstAccepted, lastAccepted time.Time
}

// loadGen sends traces of 1 to 50 spans from many services to the gateway,
// each trace in up to three requests spread over up to 1.5 s (sometimes the
// root last), retrying refused requests as an SDK would.
type loadGen struct {
	t        *testing.T
	target   *collector
	rate     int // traces/s
	mu       sync.Mutex
	traces   map[pcommon.TraceID]*sentTrace
	refused  int
	gens     []*workload.Generator
	rnd      *rand.Rand
	schedule []scheduled
	// partGap, when set, spreads a trace's parts by up to this much each
	// (SDKs exporting every few seconds); else 100–750 ms.
	partGap time.Duration
	// noRetry drops a refused request, as a sender past its retry window
	// does: its spans count as lost, its error spans as errors lost.
	noRetry bool
	lost    int
	// errorsLost counts the error spans of the requests given up on.
	errorsLost int
	// errorSpans are the error spans the gateway accepted.
	errorSpans map[pcommon.SpanID]bool
}

type scheduled struct {
	at   time.Time
	id   pcommon.TraceID
	part ptrace.Traces
}

var spanCounts = []int{1, 2, 4, 4, 6, 8, 10, 15, 20, 50}

func newLoadGen(t *testing.T, target *collector, rate int, seed uint64) *loadGen {
	lg := &loadGen{t: t, target: target, rate: rate, traces: map[pcommon.TraceID]*sentTrace{}, rnd: rand.New(rand.NewPCG(seed, 7)),
		errorSpans: map[pcommon.SpanID]bool{}}
	for i, n := range spanCounts {
		lg.gens = append(lg.gens, workload.NewGenerator(workload.Options{
			Services: 8, SpansPerTrace: n, ErrorEvery: 50, SlowEvery: 70, Seed: seed*100 + uint64(i),
			Start: time.Now(),
		}))
	}
	return lg
}

// run sends for d, then delivers the parts still scheduled.
func (lg *loadGen) run(d time.Duration) {
	const tick = 50 * time.Millisecond
	start := time.Now()
	next := start
	carry := 0.0
	for time.Since(start) < d || len(lg.schedule) > 0 {
		now := time.Now()
		if time.Since(start) < d {
			carry += float64(lg.rate) * tick.Seconds()
			for ; carry >= 1; carry-- {
				lg.newTrace(now)
			}
		}
		lg.sendDue(now)
		next = next.Add(tick)
		time.Sleep(time.Until(next))
	}
}

// start runs the generator for d in the background; the channel closes when
// it is done.
func (lg *loadGen) start(d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		lg.run(d)
	}()
	return done
}

func (lg *loadGen) newTrace(now time.Time) {
	g := lg.gens[lg.rnd.IntN(len(lg.gens))]
	td := ptrace.NewTraces()
	tr := g.Next(td)
	lg.mu.Lock()
	lg.traces[tr.ID] = &sentTrace{Trace: tr}
	lg.mu.Unlock()
	parts := min(tr.Spans, 1+lg.rnd.IntN(3))
	pieces := workload.Interleave(td, parts)
	if lg.rnd.IntN(3) == 0 {
		// Root last: the decision must wait for it.
		for i, j := 0, len(pieces)-1; i < j; i, j = i+1, j-1 {
			pieces[i], pieces[j] = pieces[j], pieces[i]
		}
	}
	for i, p := range pieces {
		delay := time.Duration(i) * time.Duration(100+lg.rnd.IntN(650)) * time.Millisecond
		if lg.partGap > 0 {
			delay = time.Duration(i) * (100*time.Millisecond + time.Duration(lg.rnd.Int64N(int64(lg.partGap-100*time.Millisecond))))
		}
		lg.schedule = append(lg.schedule, scheduled{at: now.Add(delay), id: tr.ID, part: p})
	}
}

func (lg *loadGen) sendDue(now time.Time) {
	sort.Slice(lg.schedule, func(i, j int) bool { return lg.schedule[i].at.Before(lg.schedule[j].at) })
	req := ptrace.NewTraces()
	var ids []pcommon.TraceID
	var counts []int
	n := 0
	for n < len(lg.schedule) && !lg.schedule[n].at.After(now) {
		s := lg.schedule[n]
		counts = append(counts, s.part.SpanCount())
		ids = append(ids, s.id)
		s.part.ResourceSpans().MoveAndAppendTo(req.ResourceSpans())
		n++
	}
	lg.schedule = lg.schedule[n:]
	if req.SpanCount() == 0 {
		return
	}
	// Retry refusals (memory_limiter) with backoff, as SDK exporters do.
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = lg.target.sendGRPC(req); err == nil {
			break
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.ResourceExhausted {
			break
		}
		lg.mu.Lock()
		lg.refused++
		lg.mu.Unlock()
		if lg.noRetry {
			break
		}
		time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
	}
	if err != nil {
		lg.mu.Lock()
		lg.lost += req.SpanCount()
		spanwalk.Traces(req, func(_ ptrace.ResourceSpans, s ptrace.Span) {
			if s.Status().Code() == ptrace.StatusCodeError {
				lg.errorsLost++
			}
		})
		lg.mu.Unlock()
		if !lg.noRetry {
			lg.t.Logf("request of %d spans not accepted: %v", req.SpanCount(), err)
		}
		return
	}
	at := time.Now()
	lg.mu.Lock()
	spanwalk.Traces(req, func(_ ptrace.ResourceSpans, s ptrace.Span) {
		if s.Status().Code() == ptrace.StatusCodeError {
			lg.errorSpans[s.SpanID()] = true
		}
	})
	for i, id := range ids {
		st := lg.traces[id]
		st.accepted += counts[i]
		if st.firstAccepted.IsZero() {
			st.firstAccepted = at
		}
		st.lastAccepted = at
	}
	lg.mu.Unlock()
}

// prometheus is a real Prometheus server scraping the collectors and
// evaluating the shipped alert rules.
type prometheus struct {
	addr string
}

// startPrometheus scrapes targets every second. The rules are the shipped
// file with every `for:` shortened to forDuration, so that an alert can fire
// within a test; expressions and labels are unchanged.
func startPrometheus(t *testing.T, targets map[string][]string, forDuration string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "prometheus is needed: apt-get install prometheus")
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(chartDir(), "files", "alerts.yaml"))
	require.NoError(t, err)
	rules = regexp.MustCompile(`(?m)^(\s+for:) .*$`).ReplaceAll(rules, []byte("$1 "+forDuration))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.yaml"), rules, 0o600))
	var sc strings.Builder
	sc.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [alerts.yaml]\nscrape_configs:\n")
	for job, addrs := range targets {
		fmt.Fprintf(&sc, "  - job_name: %s\n    static_configs:\n      - targets: [%s]\n", job, strings.Join(addrs, ", "))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(sc.String()), 0o600))
	// A port picked free can be taken before Prometheus binds it: retry on
	// another, three times at most.
	for attempt := 1; ; attempt++ {
		p, err := launchPrometheus(t, bin, dir)
		if err == nil {
			return p
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("retrying prometheus on another port: %v", err)
	}
}

func launchPrometheus(t *testing.T, bin, dir string) (*prometheus, error) {
	t.Helper()
	p := &prometheus{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+p.addr)
	cmd.Dir = dir
	out := &procwatch.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	switch procwatch.WaitReady("http://"+p.addr+"/-/ready", exited, 30*time.Second) {
	case procwatch.ErrExited:
		return nil, fmt.Errorf("prometheus exited during start-up:\n%s", out.String())
	case procwatch.ErrNotReady:
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("prometheus not ready after 30s:\n%s", out.String())
	}
	return p, nil
}

// firing returns the firing alerts' names with their labels.
func (p *prometheus) firing(t *testing.T) []map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/api/v1/alerts")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	var out []map[string]string
	for _, a := range body.Data.Alerts {
		if a.State == "firing" {
			out = append(out, a.Labels)
		}
	}
	return out
}

func (p *prometheus) alertFiring(t *testing.T, name string, labels map[string]string) bool {
	for _, a := range p.firing(t) {
		if a["alertname"] != name {
			continue
		}
		match := true
		for k, v := range labels {
			if a[k] != v {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

// query runs an instant PromQL query and returns the first sample's value.
func (p *prometheus) query(t *testing.T, q string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	if len(body.Data.Result) == 0 {
		return 0, false
	}
	var v float64
	_, err = fmt.Sscanf(body.Data.Result[0].Value[1].(string), "%g", &v)
	require.NoError(t, err)
	return v, true
}

var _ = context.Background
