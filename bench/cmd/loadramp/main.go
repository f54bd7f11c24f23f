// Command loadramp drives the built otelcol-cost binary over loopback at
// rising rates until it refuses, and reports for each setup the highest rate
// it sustained (< 1% of requests refused, ≥ 95% of the offered rate sent),
// the collector's CPU per span and its resident memory.
//
// Setups:
//
//	bare     the bare receive path: otlp → memory_limiter → nop
//	         (bench/testdata/bare.yaml), the baseline the others are
//	         compared with
//	tail     configs/tail.yaml as shipped (span_cost + budget_tail_sampling)
//	tail_s2  the same with the sampler's buffer S2-compressed
//	tail_heap the same with the buffer in the Go heap (the chart's default)
//	contrib  the same pipeline with contrib's tail_sampling instead
//	         (bench/testdata/contrib-tail.yaml)
//	gateway  configs/gateway.yaml (trace_router, receiver and exporter),
//	         routing by trace ID to three OTLP sinks that this process runs
//	         (they decompress but do not decode)
//	gateway_contrib
//	         the same with contrib's load_balancing
//	         (configs/gateway-loadbalancing.yaml)
//	gateway_decoded
//	         trace_router's exporter behind the otlp receiver, which
//	         decodes every request (bench/testdata/gateway-decoded.yaml)
//	gateway_none, gateway_contrib_none, …_gzip, …_snappy
//	         either with another compression towards the samplers
//
//	go run ./bench/cmd/loadramp -bin bin/otelcol-cost
//
// -warmup D offers the first step's rate for D before the first step, not
// measured: a sampler's first seconds differ from the rest (its buffer
// fills and maps fresh memory before any trace is decided), and a limit is
// what a setup sustains, not what it does while it starts.
//
// -rates R1,R2,... offers those rates in that order instead of a ramp (an
// overload, then a rate passed before it: does the setup recover?).
//
// -refine N bisects N more steps after the first failed one, between it and
// the last step passed, so that a limit is measured within a few percent
// rather than within the ramp's factor. A setup that passes every step is
// marked so in the summary: its limit is higher than the ramp went.
//
// -collector-cpus LIST runs the collector on those CPUs only (taskset -c;
// its Go runtime sizes GOMAXPROCS to them). Run loadramp itself on the
// others (taskset -c 0 loadramp -collector-cpus 1) and the generator no
// longer takes the collector's cores: a setup's limit is its own, not the
// sum's, which moved ±8% between rounds when both shared two cores.
//
// LOADRAMP_EXTRA_CONFIG names a configuration merged over each setup's (for
// instance the pprof extension, to profile the collector under load).
//
// Requests are pre-built OTLP protobuf (the reference workload: 100 traces
// of 4 spans, 10 services, 1% errors, 1% slow); each send gets fresh trace
// IDs patched into the bytes, so the generator costs little CPU and the
// samplers see new traces. The generator shares the machine with the
// collector: its own CPU is reported next to the collector's.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	// Registers the gRPC compressors the collector uses (gzip, zstd,
	// snappy), so that the sinks accept what the gateway sends.
	_ "go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	// The sinks stand for otelcol-cost samplers: the same gzip.
	_ "github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension"
	"github.com/otelcol-cost/otelcol-cost/internal/procwatch"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

func main() {
	bin := flag.String("bin", "bin/otelcol-cost", "the built distribution")
	setups := flag.String("setups", "bare,tail,contrib,gateway,gateway_contrib", "comma-separated setups to run")
	start := flag.Float64("start", 20000, "first offered rate, spans/s")
	factor := flag.Float64("factor", 1.5, "rate multiplier between steps")
	steps := flag.Int("steps", 10, "at most this many steps per setup")
	// The ramp's steps are coarse (12% apart in the documented ramps): a
	// setup that fails a step may hold anything up to it. Bisecting between
	// the last step passed and the first failed narrows the limit.
	refine := flag.Int("refine", 0, "after the first failed step, this many steps bisecting between it and the last step passed")
	step := flag.Duration("step", 20*time.Second, "duration of one step")
	rates := flag.String("rates", "", "comma-separated rates, spans/s, to offer in this order instead of a ramp")
	// tail.yaml holds a trace up to 7 s after its root: its buffer is full
	// from then on, and its mapped memory reused from ≈ 10 s.
	warmup := flag.Duration("warmup", 0, "offer the first step's rate this long before measuring (not reported as a step)")
	// 64 in flight measures capacity: with 16, a 30-60 ms hiccup of this
	// shared VM already drops slots, and the bare path "sustained" anywhere
	// from 255k to 514k spans/s on the same binary (docs/BENCHMARKS.md).
	workers := flag.Int("workers", 64, "concurrent requests in flight at most")
	out := flag.String("out", "", "also write the markdown table here")
	flag.StringVar(&collectorCPUs, "collector-cpus", "", "run the collector on these CPUs only (taskset -c list), e.g. 1")
	flag.Parse()
	switch {
	case *start <= 0:
		fail("-start must be above 0")
	case *factor <= 1:
		fail("-factor must be above 1: the rate has to rise")
	case *steps < 1 || *workers < 1:
		fail("-steps and -workers must be at least 1")
	case *refine < 0:
		fail("-refine must be 0 or more")
	case *warmup < 0:
		fail("-warmup must be 0 or more")
	}

	plan := rampPlan{start: *start, factor: *factor, steps: *steps, refine: *refine, warmup: *warmup}
	if *rates != "" {
		for _, f := range strings.Split(*rates, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || r <= 0 {
				fail(fmt.Sprintf("-rates: %q is not a rate above 0", f))
			}
			plan.rates = append(plan.rates, r)
		}
	}
	if err := run(*bin, strings.Split(*setups, ","), plan, *step, *workers, *out); err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "loadramp:", msg)
	os.Exit(1)
}

func run(bin string, setups []string, plan rampPlan, step time.Duration, workers int, out string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("binary: %w (run make build)", err)
	}
	reqs, err := buildRequests(64)
	if err != nil {
		return err
	}
	var table strings.Builder
	table.WriteString("| setup | offered spans/s | sent spans/s | refused | collector CPU µs/span | generator CPU µs/span | RSS MiB | request latency p50 / p99 ms |\n")
	table.WriteString("|---|---|---|---|---|---|---|---|\n")
	var summary strings.Builder
	results := map[string][]stepResult{}
	for _, name := range setups {
		s, ok := setupsByName[name]
		if !ok {
			return fmt.Errorf("unknown setup %q", name)
		}
		warm, res, err := ramp(bin, s, reqs, plan, step, workers)
		results[name] = res
		if warm != nil {
			table.WriteString(tableRow(fmt.Sprintf("%s (warm-up, %s)", name, plan.warmup), *warm))
		}
		for _, r := range res {
			table.WriteString(tableRow(name, r))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		best := sustained(res)
		if best == nil {
			fmt.Fprintf(&summary, "%s: no step sustained\n", name)
			continue
		}
		fmt.Fprintf(&summary, "%s: sustained %.0f spans/s, %.2f µs CPU/span, %d MiB RSS", name, best.sent, best.cpuPerSpan, best.rssMiB)
		if !slices.ContainsFunc(res, func(r stepResult) bool { return !r.passed }) {
			summary.WriteString(" (passed every step: it may hold more)")
		}
		summary.WriteString("\n")
	}
	for _, name := range setups {
		if name != "bare" && results["bare"] != nil {
			summary.WriteString(compare(name, results[name], results["bare"]) + "\n")
		}
	}
	fmt.Print("\n" + table.String() + "\n" + summary.String())
	if out != "" {
		return os.WriteFile(out, []byte(table.String()+"\n"+summary.String()), 0o644)
	}
	return nil
}

// tableRow is r as a row of the markdown table, labelled.
func tableRow(label string, r stepResult) string {
	return fmt.Sprintf("| %s | %.0f | %.0f | %.2f%% | %.2f | %.2f | %d | %.1f / %.1f |\n",
		label, r.offered, r.sent, 100*r.refusedShare, r.cpuPerSpan, r.genCPUPerSpan, r.rssMiB, ms(r.p50), ms(r.p99))
}

// stepResult is one rate step.
type stepResult struct {
	offered, sent float64 // spans/s
	refusedShare  float64 // of requests sent
	cpuPerSpan    float64 // collector user+system µs per accepted span
	genCPUPerSpan float64 // this process's µs per accepted span
	rssMiB        int     // collector's peak resident memory in the step
	accepted      int64
	sinkRequests  int64 // requests the gateway's sinks received
	// p50 and p99 are the export calls' latencies: with a bounded number
	// in flight, what the collector's per-request latency costs a sender.
	p50, p99 time.Duration
	passed   bool // refused < 1% and sent ≥ 95% of the offered rate
}

// sustained is the highest step that refused < 1% and sent ≥ 95% of the
// offered rate.
func sustained(res []stepResult) *stepResult {
	var best *stepResult
	for i := range res {
		if res[i].passed && (best == nil || res[i].sent > best.sent) {
			best = &res[i]
		}
	}
	return best
}

// compare relates a setup to the bare receive path: CPU per span at the
// highest offered rate both sustained, and the sustained rates.
func compare(name string, res, bare []stepResult) string {
	var at *stepResult
	var base stepResult
	for i := range res {
		for _, b := range bare {
			if res[i].passed && b.passed && res[i].offered == b.offered {
				at, base = &res[i], b
			}
		}
	}
	best, bestBare := sustained(res), sustained(bare)
	if at == nil || best == nil || bestBare == nil {
		return fmt.Sprintf("%s vs bare: no rate both sustained", name)
	}
	return fmt.Sprintf("%s vs bare: %.2f× the CPU per span at %.0f spans/s offered (%.2f vs %.2f µs); sustains %.0f%% of bare's spans/s (%.0f vs %.0f)",
		name, at.cpuPerSpan/base.cpuPerSpan, at.offered, at.cpuPerSpan, base.cpuPerSpan,
		100*best.sent/bestBare.sent, best.sent, bestBare.sent)
}

// setup is a collector configuration, how many sinks it exports to and
// extra environment.
type setup struct {
	config string // relative to the repository root
	// overlays are merged over config, in order.
	overlays []string
	sinks    int
	env      []string
}

// contribOverlay selects contrib's load_balancing in configs/gateway.yaml;
// decodedOverlay keeps trace_router's exporter but has the otlp receiver
// decode every request first (where trace_router's gain comes from).
const (
	contribOverlay = "configs/gateway-loadbalancing.yaml"
	decodedOverlay = "bench/testdata/gateway-decoded.yaml"
)

var setupsByName = map[string]setup{
	"bare": {config: "bench/testdata/bare.yaml"},
	// RED metrics' cost per span, two ways: contrib's spanmetrics connector
	// on the bare path, and budget_tail_sampling's red_metrics off (tail
	// keeps them on).
	"bare_spanmetrics": {config: "bench/testdata/bare.yaml", overlays: []string{"bench/testdata/spanmetrics.yaml"}},
	"tail":             {config: "configs/tail.yaml"},
	"tail_heap":        {config: "configs/tail.yaml", env: []string{"BUFFER_MEMORY=heap"}},
	"tail_red_off":     {config: "configs/tail.yaml", env: []string{"RED_METRICS_ENABLED=false"}},
	// The buffer's write-ahead log off (tail keeps it on): its cost.
	"tail_durable_off": {config: "configs/tail.yaml", env: []string{"DURABLE_ENABLED=false"}},
	"tail_sync_none":   {config: "configs/tail.yaml", env: []string{"DURABLE_SYNC=none"}},
	// The sampler's buffer held S2-compressed (buffer_compression: s2).
	"tail_s2": {config: "configs/tail.yaml", env: []string{"BUFFER_COMPRESSION=s2"}},
	"contrib": {config: "bench/testdata/contrib-tail.yaml"},
	// configs/gateway.yaml routes with trace_router (receiver and
	// exporter); gateway_contrib with contrib's load_balancing
	// (configs/gateway-loadbalancing.yaml); gateway_decoded with
	// trace_router's exporter behind the otlp receiver.
	"gateway":         {config: "configs/gateway.yaml", sinks: 3},
	"gateway_contrib": {config: "configs/gateway.yaml", overlays: []string{contribOverlay}, sinks: 3},
	"gateway_decoded": {config: "configs/gateway.yaml", overlays: []string{decodedOverlay}, sinks: 3},
	// The gateway's compression towards the samplers (zstd by default).
	// gzip at level 1 (grpc_gzip): least gzip CPU, ≈ 5% more bytes.
	"gateway_gzip1":          {config: "configs/gateway.yaml", sinks: 3, env: []string{"SAMPLER_COMPRESSION=gzip", "SAMPLER_GZIP_LEVEL=1"}},
	"gateway_gzip":           {config: "configs/gateway.yaml", sinks: 3, env: []string{"SAMPLER_COMPRESSION=gzip"}},
	"gateway_snappy":         {config: "configs/gateway.yaml", sinks: 3, env: []string{"SAMPLER_COMPRESSION=snappy"}},
	"gateway_none":           {config: "configs/gateway.yaml", sinks: 3, env: []string{"SAMPLER_COMPRESSION=none"}},
	"gateway_contrib_gzip":   {config: "configs/gateway.yaml", overlays: []string{contribOverlay}, sinks: 3, env: []string{"SAMPLER_COMPRESSION=gzip"}},
	"gateway_contrib_snappy": {config: "configs/gateway.yaml", overlays: []string{contribOverlay}, sinks: 3, env: []string{"SAMPLER_COMPRESSION=snappy"}},
	"gateway_contrib_none":   {config: "configs/gateway.yaml", overlays: []string{contribOverlay}, sinks: 3, env: []string{"SAMPLER_COMPRESSION=none"}},
}

// collectorCPUs is -collector-cpus.
var collectorCPUs string

// collector is a running binary: where it takes OTLP/gRPC, its process,
// closed when it exits, and its output.
type collector struct {
	grpcAddr string
	cmd      *exec.Cmd
	exited   chan struct{}
	logs     *procwatch.Output
	stop     func()
}

// startCollector starts the binary with setup s on free loopback ports,
// its sampler endpoints the sinks, and waits until it is healthy; stop
// shuts it down.
func startCollector(bin string, s setup, dir string, sinkAddrs []string) (*collector, error) {
	grpcAddr, health := freeAddr(), freeAddr()
	args := []string{"--config", filepath.Join(repoRoot(), s.config)}
	for _, o := range s.overlays {
		args = append(args, "--config", filepath.Join(repoRoot(), o))
	}
	if extra := os.Getenv("LOADRAMP_EXTRA_CONFIG"); extra != "" {
		// Merged over the setup's configuration, e.g. to add the pprof
		// extension and profile the collector under load.
		args = append(args, "--config", extra)
	}
	cmd := exec.Command(bin, args...)
	if collectorCPUs != "" {
		// taskset execs the binary: the PID, and so the CPU measured, is
		// the collector's.
		cmd = exec.Command("taskset", append([]string{"-c", collectorCPUs, bin}, args...)...)
	}
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(),
		"OTLP_GRPC_ENDPOINT="+grpcAddr, "OTLP_HTTP_ENDPOINT="+freeAddr(), "HEALTH_CHECK_ENDPOINT="+health,
		"METRICS_HOST=127.0.0.1", "METRICS_PORT="+strings.Split(freeAddr(), ":")[1],
		"OTELCOL_COST_DATA_DIR="+dir, "LOG_LEVEL="+cmp.Or(os.Getenv("LOADRAMP_LOG_LEVEL"), "warn"),
		// Equal bounds for both samplers, large enough that the samplers
		// hold their decision waits (tail.yaml: up to 7 s after the root) at
		// the rates reached here, so that CPU, not memory, stops them.
		"MAX_TRACES=2000000", "MAX_BUFFERED_BYTES=2147483648",
		"MEMORY_LIMIT_MIB=6144", "MEMORY_SPIKE_LIMIT_MIB=1024",
		"SAMPLER_ENDPOINTS=["+strings.Join(sinkAddrs, ", ")+"]",
	)
	cmd.Env = append(cmd.Env, s.env...)
	logs := &procwatch.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		if os.Getenv("LOADRAMP_LOGS") != "" {
			defer func() { fmt.Fprintln(os.Stderr, logs.String()) }()
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if err := procwatch.WaitReady("http://"+health+"/", exited, time.Minute); err != nil {
		stop()
		return nil, fmt.Errorf("collector health check: %w\n%s", err, logs.String())
	}
	return &collector{grpcAddr: grpcAddr, cmd: cmd, exited: exited, logs: logs, stop: stop}, nil
}

// rampPlan is the rates a ramp offers: start, then each step factor times
// the last while every step passes, at most steps of them; after the first
// failed step, refine more steps, each at the geometric middle of the
// highest rate passed and the lowest failed.
type rampPlan struct {
	start, factor float64
	steps, refine int
	warmup        time.Duration // at the first step's rate, before it
	// rates, when set, are the steps instead, in their order whatever
	// passes (e.g. an overload, then a rate passed before it: does the
	// setup recover?).
	rates []float64
}

// next is the rate of the step after done, or false when the ramp is over.
func (p rampPlan) next(done []stepResult) (float64, bool) {
	if p.rates != nil {
		if len(done) < len(p.rates) {
			return p.rates[len(done)], true
		}
		return 0, false
	}
	if len(done) == 0 {
		return p.start, true
	}
	firstFailed := slices.IndexFunc(done, func(r stepResult) bool { return !r.passed })
	if firstFailed < 0 {
		return done[len(done)-1].offered * p.factor, len(done) < p.steps
	}
	if len(done)-1-firstFailed >= p.refine {
		return 0, false
	}
	passed, failed := 0.0, math.Inf(1)
	for _, r := range done {
		if r.passed {
			passed = max(passed, r.offered)
		} else {
			failed = min(failed, r.offered)
		}
	}
	if passed == 0 || passed >= failed {
		return 0, false // nothing passed, or no bracket left to narrow
	}
	return math.Sqrt(passed * failed), true
}

// ramp runs setup s through plan's steps; warm is the warm-up (nil without
// one), which no step's result includes.
func ramp(bin string, s setup, reqs []request, plan rampPlan, step time.Duration, workers int) (warm *stepResult, res []stepResult, err error) {
	dir, err := os.MkdirTemp("", "loadramp")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	var sinkAddrs []string
	sinkRequests := new(atomic.Int64)
	for range s.sinks {
		addr, stop, err := startRawSink(sinkRequests)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
		sinkAddrs = append(sinkAddrs, addr)
	}
	var c *collector
	// A port freeAddr found free can be taken before the collector binds
	// it (tests of other packages run beside this one): then the
	// collector starts again on other ports.
	for attempt := 1; ; attempt++ {
		c, err = startCollector(bin, s, dir, sinkAddrs)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	defer c.stop()
	conn, err := grpc.NewClient(c.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()

	exited := func() error {
		select {
		case <-c.exited:
			return fmt.Errorf("collector exited during the run:\n%s", c.logs.String())
		default:
			return nil
		}
	}
	if plan.warmup > 0 {
		first, _ := plan.next(nil)
		w := runStep(conn, c.cmd.Process.Pid, reqs, first, plan.warmup, workers)
		fmt.Fprintf(os.Stderr, "warm-up: offered %.0f sent %.0f spans/s for %s, collector %.2f µs/span, RSS %d MiB\n",
			w.offered, w.sent, plan.warmup, w.cpuPerSpan, w.rssMiB)
		warm = &w
		if err := exited(); err != nil {
			return warm, nil, err
		}
	}
	for i := 0; ; i++ {
		rate, ok := plan.next(res)
		if !ok {
			break
		}
		delivered0 := sinkRequests.Load()
		r := runStep(conn, c.cmd.Process.Pid, reqs, rate, step, workers)
		r.sinkRequests = sinkRequests.Load() - delivered0
		fmt.Fprintf(os.Stderr, "step %d: offered %.0f sent %.0f spans/s, refused %.2f%%, collector %.2f µs/span, generator %.2f µs/span, RSS %d MiB, latency p50 %.1f p99 %.1f ms\n",
			i+1, r.offered, r.sent, 100*r.refusedShare, r.cpuPerSpan, r.genCPUPerSpan, r.rssMiB, ms(r.p50), ms(r.p99))
		res = append(res, r)
		if err := exited(); err != nil {
			return warm, res, err
		}
	}
	return warm, res, nil
}

// runStep offers rate spans/s for d: a pacer hands out request slots, at most
// workers are in flight, and a slot nobody could take (everyone busy) is not
// sent — the collector is not keeping up.
func runStep(conn *grpc.ClientConn, pid int, reqs []request, rate float64, d time.Duration, workers int) stepResult {
	spansPerReq := reqs[0].spans
	slots := make(chan struct{}, workers)
	var sentReqs, refused, accepted atomic.Int64
	latencies := make([][]time.Duration, workers) // per worker: no lock
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, 0, 1<<20)
			for n := w; ; n += workers {
				select {
				case <-stop:
					return
				case <-slots:
				}
				r := reqs[n%len(reqs)]
				buf = r.withFreshIDs(buf)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				sentAt := time.Now()
				err := conn.Invoke(ctx, exportMethod, rawMessage(buf), new(rawMessage))
				latencies[w] = append(latencies[w], time.Since(sentAt))
				cancel()
				sentReqs.Add(1)
				if err != nil {
					refused.Add(1)
				} else {
					accepted.Add(int64(r.spans))
				}
			}
		}(w)
	}

	cpu0, _ := procwatch.CPU(pid)
	gen0 := procwatch.SelfCPU()
	peakRSS := 0
	begin := time.Now()
	interval := time.Duration(float64(time.Second) * float64(spansPerReq) / rate)
	offeredReqs := 0
	tick := time.NewTicker(min(interval, 10*time.Millisecond))
	lastRSS := time.Time{}
	for now := range tick.C {
		if now.Sub(begin) >= d {
			break
		}
		due := int(now.Sub(begin) / interval)
		for ; offeredReqs < due; offeredReqs++ {
			select {
			case slots <- struct{}{}:
			default: // every worker busy and a backlog already waiting
			}
		}
		if now.Sub(lastRSS) >= 250*time.Millisecond {
			rss, _ := procwatch.RSSMiB(pid)
			peakRSS = max(peakRSS, rss)
			lastRSS = now
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	elapsed := time.Since(begin).Seconds()
	cpu1, _ := procwatch.CPU(pid)
	cpu, gen := cpu1-cpu0, procwatch.SelfCPU()-gen0

	r := stepResult{
		offered:  rate,
		sent:     float64(sentReqs.Load()*int64(spansPerReq)) / elapsed,
		accepted: accepted.Load(),
		rssMiB:   peakRSS,
	}
	if n := sentReqs.Load(); n > 0 {
		r.refusedShare = float64(refused.Load()) / float64(n)
	}
	if a := float64(r.accepted); a > 0 {
		r.cpuPerSpan = cpu.Seconds() * 1e6 / a
		r.genCPUPerSpan = gen.Seconds() * 1e6 / a
	}
	r.p50, r.p99 = percentiles(slices.Concat(latencies...))
	r.passed = r.sent >= 0.95*rate && r.refusedShare < 0.01
	return r
}

// percentiles returns the median and the 99th percentile of d (zero when
// empty); d is sorted in place.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.50), at(0.99)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// request is a pre-marshaled ExportTraceServiceRequest and where each of
// its traces' IDs sits in the bytes.
type request struct {
	body    []byte
	spans   int
	traceAt [][]int // per trace, the offsets of its 16-byte ID
}

func buildRequests(n int) ([]request, error) {
	g := workload.NewGenerator(workload.Options{Services: 10, ErrorEvery: 100, SlowEvery: 100, Seed: 42, Start: time.Now()})
	out := make([]request, 0, n)
	for range n {
		td, traces := g.Batch(100)
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return nil, err
		}
		r := request{body: body, spans: td.SpanCount()}
		for _, tr := range traces {
			var at []int
			for off := 0; ; {
				i := bytes.Index(body[off:], tr.ID[:])
				if i < 0 {
					break
				}
				at = append(at, off+i)
				off += i + len(tr.ID)
			}
			if len(at) != tr.Spans {
				return nil, fmt.Errorf("trace ID found %d times for %d spans", len(at), tr.Spans)
			}
			r.traceAt = append(r.traceAt, at)
		}
		out = append(out, r)
	}
	return out, nil
}

// withFreshIDs copies the request into buf with a new random ID per trace.
func (r request) withFreshIDs(buf []byte) []byte {
	buf = append(buf[:0], r.body...)
	var id [16]byte
	for _, at := range r.traceAt {
		_, _ = rand.Read(id[:])
		for _, off := range at {
			copy(buf[off:off+16], id[:])
		}
	}
	return buf
}

// rawMessage and rawCodec move protobuf bytes through gRPC untouched: the
// generator does not marshal, the sinks do not decode.
type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	// Requests and the sinks' responses are both sent as rawMessage values.
	m, ok := v.(rawMessage)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T", v)
	}
	return m, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("rawCodec: %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// startRawSink runs an OTLP/gRPC trace endpoint that accepts every request
// without decoding it, counting them.
func startRawSink(requests *atomic.Int64) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var m rawMessage
				if err := dec(&m); err != nil {
					return nil, err
				}
				requests.Add(1)
				return rawMessage(nil), nil
			},
		}},
	}, struct{}{})
	go func() { _ = srv.Serve(l) }()
	return l.Addr().String(), srv.Stop, nil
}

func freeAddr() string {
	port, err := procwatch.FreePort()
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// repoRoot is the module root: configs are read from there.
func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "builder-config.yaml")); err == nil {
			return d
		}
	}
	return dir
}
