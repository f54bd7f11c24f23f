package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// The sampler tier as the chart deploys it (with gateway.router:
// trace_router): a gateway whose trace_router exporter resolves the samplers' headless Service with its dns resolver,
// and samplers that resolve the same name (peers_dns) and hand traces over
// when it changes. The name lives in /etc/hosts inside a network namespace
// this test creates (ip netns mounts /etc/netns/NAME/hosts over /etc/hosts
// there), with each sampler on its own loopback address; the test edits
// that file as Kubernetes updates the Service's endpoints.
//
// TestE2EHandoff creates the namespace and runs TestE2EHandoffInNetns, this
// same test binary, inside it; the scenarios' figures come back in a file.

const samplersName = "samplers.e2e.test"

func TestE2EHandoff(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	_, err := exec.LookPath("ip")
	require.NoError(t, err, "ip (iproute2) is required: make deps installs it")
	name := fmt.Sprintf("otelcolcost%d", os.Getpid())
	dir := filepath.Join("/etc/netns", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
			for _, pid := range strings.Fields(string(out)) {
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
		_ = os.RemoveAll(dir)
	})
	require.NoError(t, os.MkdirAll(dir, 0o755))
	hosts := filepath.Join(dir, "hosts")
	require.NoError(t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644))
	for _, args := range [][]string{{"netns", "add", name}, {"netns", "exec", name, "ip", "link", "set", "lo", "up"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	rows := filepath.Join(t.TempDir(), "rows.jsonl")
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("ip", "netns", "exec", name, self, "-test.run", "^TestE2EHandoffInNetns$", "-test.v", "-test.count=1", "-test.timeout=30m")
	cmd.Dir, _ = os.Getwd()
	cmd.Env = append(os.Environ(), "OTELCOL_COST_BIN="+binary, "OTELCOL_COST_NETNS_HOSTS="+hosts, "OTELCOL_COST_NETNS_ROWS="+rows, "E2E_REPORT=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if f, err := os.Open(rows); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r handoffRow
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				reportRow(r.Scenario, r.Sent, r.Kept, r.Lost, r.Split, r.Note)
			}
		}
		f.Close()
	}
	if runErr != nil || t.Failed() {
		t.Fatalf("scenarios in the network namespace failed (%v):\n%s", runErr, out.String())
	}
	t.Logf("%s", lastLines(out.String(), 40))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type handoffRow struct {
	Scenario                string
	Sent, Kept, Lost, Split int
	Note                    string
}

// netnsTier is a gateway and samplers on 127.0.0.N inside the namespace.
type netnsTier struct {
	t        *testing.T
	hosts    string
	handoff  bool
	gateway  *collector
	live     []string // sampler addresses in the Service, in order
	samplers map[string]*collector
	envs     map[string]map[string]string
	sinks    map[string]*otlpSink
	next     int
	start    time.Time
	// The killed sampler, when, and the ring it was killed on.
	killed     string
	killedAt   time.Time
	killedRing *ring.Ring
}

// ringOf is the gateways' ring over these sampler addresses.
func ringOf(addrs []string) *ring.Ring {
	var eps []string
	for _, a := range addrs {
		eps = append(eps, a+":4317")
	}
	return ring.New(eps)
}

func newNetnsTier(t *testing.T, hosts string, handoff bool, n int) *netnsTier {
	nt := &netnsTier{t: t, hosts: hosts, handoff: handoff, samplers: map[string]*collector{}, envs: map[string]map[string]string{}, sinks: map[string]*otlpSink{}, next: 2}
	nt.publish() // a fresh Service: nothing left from the scenario before
	var addrs []string
	for range n {
		addrs = append(addrs, nt.startSampler())
	}
	nt.publish(addrs...)
	nt.gateway = startCollector(t, map[string]string{"LOG_LEVEL": "warn", "SAMPLERS_DNS": samplersName},
		configPath("gateway.yaml"), "integration/testdata/gateway-dns.yaml")
	return nt
}

// startSampler starts a sampler on the next free loopback address; it is
// not in the Service until published.
func (nt *netnsTier) startSampler() string {
	addr := fmt.Sprintf("127.0.0.%d", nt.next)
	nt.next++
	sink := startSink(nt.t)
	env := map[string]string{
		"OTLP_BACKEND_ENDPOINT":    sink.Addr,
		"BUDGET_SPANS_PER_SECOND":  "1000000", // keep everything: a split shows as a trace at two sinks
		"SAMPLER_PEERS_DNS":        samplersName,
		"SAMPLER_PEERS_REFRESH":    "1s",
		"SAMPLER_HANDOFF":          fmt.Sprint(nt.handoff),
		"POD_IP":                   addr,
		"HANDOFF_ENDPOINT":         addr + ":4320",
		"DECISION_WAIT":            "9s",
		"DECISION_WAIT_AFTER_ROOT": "6s",
		"ADJUST_INTERVAL":          "2s",
		"LOG_LEVEL":                "warn",
		// Its volume: a restart on the same address finds its log.
		"OTELCOL_COST_DATA_DIR": nt.t.TempDir(),
	}
	ep := endpoints{GRPC: addr + ":4317", HTTP: addr + ":4318", Health: addr + ":13133", MetricsPort: 8888, MetricsHost: addr}
	nt.samplers[addr] = startCollectorAt(nt.t, ep, env, configPath("sampler.yaml"))
	nt.envs[addr] = env
	nt.sinks[addr] = sink
	return addr
}

// restart SIGKILLs the sampler at addr and starts it again at once on the
// same address and volume (an OOM kill, a crashed container).
func (nt *netnsTier) restart(addr string) {
	old := nt.samplers[addr]
	old.kill()
	nt.samplers[addr] = startCollectorAt(nt.t, old.ep, nt.envs[addr], configPath("sampler.yaml"))
}

// publish sets the Service's endpoints. The file is rewritten in place:
// the namespace's /etc/hosts is a bind mount of this inode.
func (nt *netnsTier) publish(addrs ...string) {
	nt.live = addrs
	if !nt.start.IsZero() {
		nt.t.Logf("+%v: Service endpoints %v", time.Since(nt.start).Round(time.Millisecond), addrs)
	}
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for _, a := range addrs {
		fmt.Fprintf(&b, "%s %s\n", a, samplersName)
	}
	require.NoError(nt.t, os.WriteFile(nt.hosts, []byte(b.String()), 0o644))
}

func (nt *netnsTier) without(addr string) []string {
	var out []string
	for _, a := range nt.live {
		if a != addr {
			out = append(out, a)
		}
	}
	return out
}

func (nt *netnsTier) allSinks() []*otlpSink {
	var out []*otlpSink
	for _, s := range nt.sinks {
		out = append(out, s)
	}
	return out
}

// resolverLag is how long after the Service changes every gateway and
// sampler routes by the new endpoints: Go re-reads /etc/hosts at most every
// 5 s, the resolvers ask every second. A terminating pod's preStop sleep
// covers the same lag in a cluster.
const resolverLag = 7 * time.Second

type handoffScenario struct {
	name     string
	samplers int
	load     time.Duration
	// change runs 6 s into the load; it returns the spans the scenario may
	// lose (what a killed sampler held), or 0.
	change func(nt *netnsTier) int
	// handoffOnly: no comparison row without handoff.
	handoffOnly bool
}

var handoffScenarios = []handoffScenario{
	{"scale out 3→4", 3, 20 * time.Second, func(nt *netnsTier) int {
		nt.publish(append(nt.live, nt.startSampler())...)
		return 0
	}, false},
	{"scale out 4→6", 4, 20 * time.Second, func(nt *netnsTier) int {
		nt.publish(append(nt.live, nt.startSampler(), nt.startSampler())...)
		return 0
	}, false},
	{"scale in 4→3", 4, 22 * time.Second, func(nt *netnsTier) int {
		leaving := nt.live[1]
		nt.publish(nt.without(leaving)...)
		time.Sleep(resolverLag)
		nt.samplers[leaving].stop()
		return 0
	}, false},
	{"rolling restart (3)", 3, 46 * time.Second, func(nt *netnsTier) int {
		for _, old := range append([]string(nil), nt.live...) {
			// A new pod is ready and in the Service, the old one leaves it
			// and gets SIGTERM after its preStop sleep; the rollout moves on
			// once the new pod has been ready a while (minReadySeconds).
			fresh := nt.startSampler()
			nt.publish(append(nt.without(old), fresh)...)
			time.Sleep(resolverLag)
			nt.samplers[old].stop()
			time.Sleep(resolverLag)
		}
		return 0
	}, false},
	// A sampler is SIGKILLed while the ring changes (its traces on their
	// way to the new sampler, fragments proxied to their new owner) and
	// restarts on its volume: its durable log replays what it had
	// acknowledged, and nothing is lost or split.
	{"killed in scale out 3→4", 3, 24 * time.Second, func(nt *netnsTier) int {
		nt.publish(append(nt.live, nt.startSampler())...)
		time.Sleep(2 * time.Second)
		nt.restart(nt.live[1])
		return 0
	}, true},
	{"sampler killed", 3, 20 * time.Second, func(nt *netnsTier) int {
		victim := nt.live[2]
		// What it holds: its buffer, and the spans it kept that have not
		// reached its backend yet (batch processor, exporter queue).
		fams := nt.samplers[victim].metrics()
		buffered, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_buffered_spans", nil)
		kept, _ := metricValue(fams, "otelcol_processor_budget_tail_sampling_spans_total", map[string]string{"decision": "sampled"})
		held := int(buffered+kept) - nt.sinks[victim].spanCount()
		nt.killed, nt.killedAt, nt.killedRing = victim, time.Now(), ringOf(nt.live)
		nt.samplers[victim].kill()
		time.Sleep(time.Second) // the endpoint controller notices
		nt.publish(nt.without(victim)...)
		return held
	}, false},
}

func TestE2EHandoffInNetns(t *testing.T) {
	hosts := os.Getenv("OTELCOL_COST_NETNS_HOSTS")
	if hosts == "" {
		t.Skip("runs inside the network namespace TestE2EHandoff creates")
	}
	rows, err := os.OpenFile(os.Getenv("OTELCOL_COST_NETNS_ROWS"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer rows.Close()
	only := os.Getenv("OTELCOL_COST_HANDOFF_SCENARIO")
	for i, sc := range handoffScenarios {
		if only != "" && !strings.Contains(sc.name, only) {
			continue
		}
		for _, on := range []bool{true, false} {
			if !on && sc.handoffOnly {
				continue
			}
			mode := map[bool]string{true: "handoff", false: "no handoff"}[on]
			t.Run(sc.name+", "+mode, func(t *testing.T) {
				nt := newNetnsTier(t, hosts, on, sc.samplers)
				lg := newLoadGen(t, nt.gateway, 80, uint64(40+i))
				lg.partGap = 2500 * time.Millisecond // parts up to 5 s apart
				start := time.Now()
				done := lg.start(sc.load)
				time.Sleep(6 * time.Second)
				nt.start = start
				mayLose := sc.change(nt)
				<-done
				waitQuiet(t, nt.allSinks(), 12*time.Second)
				o := collectOutcome(lg, nt.allSinks())
				lost := o.sent - o.kept
				t.Logf("%s, %s: %d traces, %d spans sent, %d lost, %d traces split, %d spans duplicated", sc.name, mode, len(lg.traces), o.sent, lost, o.split, o.duplicates)
				note := mode
				if mayLose > 0 {
					note = fmt.Sprintf("%s; %d held", mode, mayLose)
				}
				if o.duplicates > 0 {
					note += fmt.Sprintf("; %d dup", o.duplicates)
				}
				row, _ := json.Marshal(handoffRow{Scenario: sc.name, Sent: o.sent, Kept: o.kept, Lost: lost, Split: o.split, Note: note})
				_, _ = rows.Write(append(row, '\n'))
				if !on {
					return // the comparison: measured, not asserted
				}
				for i, id := range o.splitIDs {
					if i == 5 {
						break
					}
					st := lg.traces[id]
					var at []string
					for addr, s := range nt.sinks {
						if n := len(s.trace(id)); n > 0 {
							at = append(at, fmt.Sprintf("%s:%d", addr, n))
						}
					}
					t.Logf("split trace %v: %d spans accepted %s … %s (test start +%v … +%v), kept at %v", id, st.accepted,
						st.firstAccepted.Format("15:04:05.000"), st.lastAccepted.Format("15:04:05.000"),
						st.firstAccepted.Sub(start).Round(time.Millisecond), st.lastAccepted.Sub(start).Round(time.Millisecond), at)
				}
				assert.Zero(t, o.split, "no trace decided by two samplers")
				if nt.killed == "" {
					assert.Zero(t, lost, "no span lost")
					return
				}
				// The killed sampler loses what it held and nothing else: spans
				// are missing only from traces it owned that had begun before
				// it died (their parts sent after are routed again).
				elsewhere := 0
				for id, st := range lg.traces {
					if st.accepted > o.got[id] && (nt.killedRing.Owner(id) != nt.killed+":4317" || !st.firstAccepted.Before(nt.killedAt)) {
						elsewhere += st.accepted - o.got[id]
					}
				}
				assert.Zero(t, elsewhere, "spans lost outside the killed sampler's buffer")
				t.Logf("killed sampler: %d spans lost, %d held by it a moment before (buffer + kept not yet exported)", lost, mayLose)
			})
		}
	}
}
