package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

func chartDir() string { return filepath.Join(repoRoot(), "charts", "otelcol-cost") }

// helmBinary is $HELM, else the one `make tools` installs, else PATH's.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if local := filepath.Join(repoRoot(), ".tools", "helm"); fileExists(local) {
		return local
	}
	h, err := exec.LookPath("helm")
	require.NoError(t, err, "helm is needed: `make tools` installs it")
	return h
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// valueSets are the chart's default values and every file under ci/.
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	// The chart has no default backend (an install without one fails with
	// a message): the defaults are rendered with just that set.
	sets := map[string][]string{"default": {"--set", "backend.endpoint=tempo-distributor.tempo.svc:4317"}}
	files, err := filepath.Glob(filepath.Join(chartDir(), "ci", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 3, "at least three value sets besides the defaults")
	for _, f := range files {
		sets[filepath.Base(f)] = []string{"-f", f}
	}
	return sets
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

func TestChartLint(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chartDir()}, args...)...)
			require.NoError(t, err, out)
		})
	}
}

// TestChartTemplatesWithTheToolsHelm: the documented commands, as a
// newcomer types them (no --kube-version), work with the helm `make tools`
// installs. A helm built with go install reports Kubernetes v1.20 unless
// the Makefile tells it its client-go version; the chart needs ≥ 1.30.
func TestChartTemplatesWithTheToolsHelm(t *testing.T) {
	out, err := helm(t, "template", "cost", chartDir(), "--namespace", "observability", "--set", "backend.endpoint=tempo:4317")
	require.NoError(t, err, out)
	assert.Contains(t, out, "kind: StatefulSet")
	out, err = helm(t, "version", "--template", "{{.Version}}")
	require.NoError(t, err, out)
	assert.Equal(t, "v3.21.4", strings.TrimSpace(out), "the Makefile's HELM_VERSION, stamped into the binary")
}

// decodeStrict decodes one manifest into its API type; unknown fields fail.
func decodeStrict(t *testing.T, doc []byte, into any) {
	t.Helper()
	js, err := sigsyaml.YAMLToJSON(doc)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(into), "strict decoding of\n%s", doc)
}

type rendered struct {
	kinds      map[string]int
	pdbs       map[string]bool
	services   []corev1.Service
	configs    map[string]string // ConfigMap name → config.yaml
	policy     string            // the samplers' policy.yaml
	shadow     string            // and its shadow.yaml
	budgets    string            // and span_cost's service-budgets.yaml
	statefulSt *appsv1.StatefulSet
	deployment *appsv1.Deployment
	rule       *monitoringv1.PrometheusRule
	dashboard  *corev1.ConfigMap
}

// policyMount is where the chart mounts the samplers' policy ConfigMap.
const policyMount = "/etc/otelcol-cost/policy/policy.yaml"

// withPolicyFile points a rendered sampler config at a copy of the
// rendered policy file, as the pod's mount does.
func (r rendered) withPolicyFile(t *testing.T, cfg string) string {
	t.Helper()
	if !strings.Contains(cfg, policyMount) {
		return cfg
	}
	require.NotEmpty(t, r.policy, "the config reads a policy file the chart renders")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(r.policy), 0o600))
	if r.shadow != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "shadow.yaml"), []byte(r.shadow), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "service-budgets.yaml"), []byte(r.budgets), 0o600))
	return strings.ReplaceAll(cfg, filepath.Dir(policyMount), dir)
}

// kubeVersion is the cluster version the chart is rendered for: helm
// template assumes v1.20 otherwise, older than Chart.yaml's kubeVersion.
const kubeVersion = "1.31.0"

func renderChart(t *testing.T, args []string) rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "cost", chartDir(), "--namespace", "observability", "--kube-version", kubeVersion}, args...)...)
	require.NoError(t, err, out)
	r := rendered{kinds: map[string]int{}, configs: map[string]string{}, pdbs: map[string]bool{}}
	for _, doc := range strings.Split(out, "\n---") {
		doc = strings.TrimSpace(doc)
		if doc == "" || strings.TrimSpace(strings.TrimLeft(doc, "-")) == "" {
			continue
		}
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &head))
		key := head.APIVersion + "/" + head.Kind
		r.kinds[head.Kind]++
		switch key {
		case "v1/ConfigMap":
			var cm corev1.ConfigMap
			decodeStrict(t, []byte(doc), &cm)
			if dash, ok := cm.Data["otelcol-cost.json"]; ok {
				r.dashboard = &cm
				require.True(t, json.Valid([]byte(dash)), "the dashboard is JSON")
				continue
			}
			if policy, ok := cm.Data["policy.yaml"]; ok {
				r.policy, r.shadow, r.budgets = policy, cm.Data["shadow.yaml"], cm.Data["service-budgets.yaml"]
				continue
			}
			r.configs[cm.Name] = cm.Data["config.yaml"]
		case "v1/Service":
			var svc corev1.Service
			decodeStrict(t, []byte(doc), &svc)
			r.services = append(r.services, svc)
		case "v1/ServiceAccount":
			decodeStrict(t, []byte(doc), &corev1.ServiceAccount{})
		case "apps/v1/Deployment":
			r.deployment = &appsv1.Deployment{}
			decodeStrict(t, []byte(doc), r.deployment)
		case "apps/v1/StatefulSet":
			r.statefulSt = &appsv1.StatefulSet{}
			decodeStrict(t, []byte(doc), r.statefulSt)
		case "autoscaling/v2/HorizontalPodAutoscaler":
			decodeStrict(t, []byte(doc), &autoscalingv2.HorizontalPodAutoscaler{})
		case "policy/v1/PodDisruptionBudget":
			var pdb policyv1.PodDisruptionBudget
			decodeStrict(t, []byte(doc), &pdb)
			r.pdbs[pdb.Name] = true
		case "monitoring.coreos.com/v1/ServiceMonitor":
			decodeStrict(t, []byte(doc), &monitoringv1.ServiceMonitor{})
		case "monitoring.coreos.com/v1/PrometheusRule":
			r.rule = &monitoringv1.PrometheusRule{}
			decodeStrict(t, []byte(doc), r.rule)
		default:
			t.Fatalf("rendered a %s the test does not know how to check", key)
		}
	}
	return r
}

func TestChartRendersValidManifests(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := renderChart(t, args)
			for _, kind := range []string{"Deployment", "StatefulSet", "Service", "ConfigMap"} {
				assert.Positive(t, r.kinds[kind], kind)
			}
			// A PDB only where the tier can lose a pod.
			gatewayReplicas := r.deployment.Spec.Replicas
			if gatewayReplicas == nil || *gatewayReplicas > 1 { // nil: the HPA's minReplicas (2) decides
				assert.True(t, r.pdbs["cost-otelcol-cost-gateway"], "gateway PDB")
			} else {
				assert.False(t, r.pdbs["cost-otelcol-cost-gateway"], "no gateway PDB at one replica: it would block node drains")
			}
			assert.Equal(t, *r.statefulSt.Spec.Replicas > 1, r.pdbs["cost-otelcol-cost-sampler"], "sampler PDB only above one replica")
			// gRPC ports say so, for meshes and L7 load balancers.
			for _, svc := range r.services {
				for _, port := range svc.Spec.Ports {
					if port.Name == "otlp-grpc" {
						require.NotNil(t, port.AppProtocol, svc.Name)
						assert.Equal(t, "grpc", *port.AppProtocol, svc.Name)
					}
				}
			}
			// Handoff: the pod IP as the sampler's ring identity, the handoff
			// port, and a preStop sleep inside the grace period.
			sampler := r.statefulSt.Spec.Template.Spec
			if strings.Contains(r.configs["cost-otelcol-cost-sampler"], "handoff:") {
				c := sampler.Containers[0]
				podIP := false
				for _, e := range c.Env {
					podIP = podIP || (e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP")
				}
				assert.True(t, podIP, "POD_IP from the downward API")
				require.NotNil(t, c.Lifecycle)
				require.NotNil(t, c.Lifecycle.PreStop.Sleep)
				assert.Greater(t, *sampler.TerminationGracePeriodSeconds, c.Lifecycle.PreStop.Sleep.Seconds+15, "grace covers the preStop sleep and the decision")
				ports := map[string]bool{}
				for _, p := range c.Ports {
					ports[p.Name] = true
				}
				assert.True(t, ports["handoff"])
			}
			// Samplers spread over nodes by default.
			require.NotEmpty(t, r.statefulSt.Spec.Template.Spec.TopologySpreadConstraints)
			assert.NotNil(t, r.statefulSt.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector)
			require.Len(t, r.configs, 2)

			// Every rendered collector config validates with the built binary.
			for cmName, cfg := range r.configs {
				path := filepath.Join(t.TempDir(), cmName+".yaml")
				require.NoError(t, os.WriteFile(path, []byte(r.withPolicyFile(t, cfg)), 0o600))
				// POD_IP comes from the downward API in the pod.
				out, err := validate(t, []string{"POD_IP=10.1.2.3"}, path)
				require.NoError(t, err, "%s:\n%s", cmName, out)
				assertMemoryLimiterFirst(t, cmName, []byte(cfg))
			}

			// Pods: non-root, read-only root, no escalation, probes, GOMEMLIMIT.
			for _, spec := range []corev1.PodSpec{r.deployment.Spec.Template.Spec, r.statefulSt.Spec.Template.Spec} {
				require.NotNil(t, spec.SecurityContext.RunAsNonRoot)
				assert.True(t, *spec.SecurityContext.RunAsNonRoot)
				c := spec.Containers[0]
				assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
				assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
				assert.NotNil(t, c.LivenessProbe)
				assert.NotNil(t, c.ReadinessProbe)
				var gomem string
				for _, e := range c.Env {
					if e.Name == "GOMEMLIMIT" {
						gomem = e.Value
					}
				}
				limit := c.Resources.Limits.Memory().Value()
				var mib int64
				_, err := fmt.Sscanf(gomem, "%dMiB", &mib)
				require.NoError(t, err, "GOMEMLIMIT %q", gomem)
				assert.InDelta(t, 0.8, float64(mib<<20)/float64(limit), 0.01, "GOMEMLIMIT is 80%% of the memory limit")
			}
			// The sampler outlives its decision wait on SIGTERM.
			var samplerCfg struct {
				Processors struct {
					Sampler struct {
						DecisionWait string `yaml:"decision_wait"`
					} `yaml:"budget_tail_sampling"`
				} `yaml:"processors"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(r.configs["cost-otelcol-cost-sampler"]), &samplerCfg))
			wait, err := parseSeconds(samplerCfg.Processors.Sampler.DecisionWait)
			require.NoError(t, err)
			assert.Greater(t, *r.statefulSt.Spec.Template.Spec.TerminationGracePeriodSeconds, wait)

			// The gateway resolves, and the samplers count, the headless Service.
			domain := "cluster.local"
			if name == "extended-values.yaml" {
				domain = "k8s.example.internal"
			}
			assert.Contains(t, r.configs["cost-otelcol-cost-gateway"], "hostname: cost-otelcol-cost-sampler-headless.observability.svc."+domain)
			assert.Contains(t, r.configs["cost-otelcol-cost-sampler"], "peers_dns: cost-otelcol-cost-sampler-headless.observability.svc."+domain)
			assert.Equal(t, "cost-otelcol-cost-sampler-headless", r.statefulSt.Spec.ServiceName)

			if name == "monthly-budget-values.yaml" {
				require.NotNil(t, r.dashboard, "dashboard.enabled renders the dashboard")
			}
			if r.dashboard != nil {
				// The sidecar's label and folder, and the dashboard file itself.
				assert.Equal(t, "1", r.dashboard.Labels["grafana_dashboard"])
				assert.Equal(t, "otelcol-cost", r.dashboard.Annotations["grafana_folder"])
				raw, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "otelcol-cost.json"))
				require.NoError(t, err)
				assert.JSONEq(t, string(raw), r.dashboard.Data["otelcol-cost.json"])
			}
			if r.rule != nil {
				// The PrometheusRule carries the rules file itself, not a copy.
				raw, err := os.ReadFile(filepath.Join(chartDir(), "files", "alerts.yaml"))
				require.NoError(t, err)
				// Only the samplers' job matcher is this release's.
				raw = bytes.ReplaceAll(raw, []byte(`up{job=~".*sampler.*"}`), []byte(`up{job=~"cost-otelcol-cost-sampler.*"}`))
				var want monitoringv1.PrometheusRuleSpec
				decodeStrict(t, raw, &want)
				assert.Equal(t, want, r.rule.Spec)
			}
		})
	}
}

func parseSeconds(d string) (int64, error) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(d, "%d%s", &n, &unit); err != nil {
		return 0, err
	}
	switch unit {
	case "s":
		return n, nil
	case "m":
		return n * 60, nil
	case "h":
		return n * 3600, nil
	}
	return 0, fmt.Errorf("unit %q", unit)
}

func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"gateway.replicas=three", "/gateway/replicas"},
		{"gateway.samplerGzipLevel=0", "/gateway/samplerGzipLevel"},
		{"pricing.preset=gold", "/pricing/preset"},
		{"sampler.decisionWait=ten", "/sampler/decisionWait"},
		{"budget.monthlyCost=100", "exactly one of spansPerSecond, bytesPerSecond, monthlyCost"},
		{"sampler.resources.limits.memory=2Ti", "/sampler/resources/limits/memory"},
		{"backend.endpoint=", "backend.endpoint: set your tracing backend's OTLP/gRPC host:port"},
		{"backend.headers.x-api-key=plaintext-key", "/backend/headers/x-api-key"},
		{"image.digest=latest", "/image/digest"},
		{"sampler.extraEnvs=oops", "/sampler/extraEnvs"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", "cost", chartDir(), "--kube-version", kubeVersion, "--set", "backend.endpoint=tempo:4317", "--set", tc.set)
			require.Error(t, err)
			assert.Contains(t, out, tc.want)
		})
	}
	// The samplers' preStop is the kubelet's sleep action, from 1.30 on.
	out, err := helm(t, "template", "cost", chartDir(), "--kube-version", "1.29.0", "--set", "backend.endpoint=tempo:4317")
	require.Error(t, err, "a cluster older than 1.30 is refused")
	assert.Contains(t, out, "kubeVersion")
}

// assertMemoryLimiterFirst checks every traces pipeline of a collector config.
func assertMemoryLimiterFirst(t *testing.T, name string, cfg []byte) {
	t.Helper()
	var c struct {
		Service struct {
			Pipelines map[string]struct {
				Processors []string `yaml:"processors"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	require.NoError(t, yaml.Unmarshal(cfg, &c), name)
	found := 0
	for id, p := range c.Service.Pipelines {
		if id != "traces" && !strings.HasPrefix(id, "traces/") {
			continue
		}
		found++
		require.NotEmpty(t, p.Processors, "%s: pipeline %s has no processors", name, id)
		assert.True(t, p.Processors[0] == "memory_limiter" || strings.HasPrefix(p.Processors[0], "memory_limiter/"),
			"%s: pipeline %s starts with %s, not memory_limiter", name, id, p.Processors[0])
	}
	assert.Positive(t, found, "%s has a traces pipeline", name)
}

func TestMemoryLimiterFirstInShippedConfigs(t *testing.T) {
	for _, set := range shippedConfigs(t) {
		f := set[0]
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		assertMemoryLimiterFirst(t, filepath.Base(f), raw)
	}
}

// TestChartAdaptsAndKeepsSecrets renders what a platform team changes
// (ci/extended-values.yaml) and checks each convention took effect.
func TestChartAdaptsAndKeepsSecrets(t *testing.T) {
	ext := filepath.Join(chartDir(), "ci", "extended-values.yaml")
	r := renderChart(t, []string{"-f", ext})
	sampler := r.configs["cost-otelcol-cost-sampler"]
	// The merged config: the added processor in the pipeline, the added
	// extension, the exporter's TLS changed, the rest shipped.
	for _, want := range []string{"attributes/team:", "- attributes/team", "pprof:", "- pprof", "ca_file: /etc/otelcol-cost/ca/ca.crt", "budget_tail_sampling:", "- k8s.namespace.name"} {
		assert.Contains(t, sampler, want)
	}
	// Header values come from the Secret through env; the ConfigMap only
	// names the variable.
	assert.Contains(t, sampler, "authorization: ${env:OTELCOL_COST_BACKEND_HEADER_AUTHORIZATION}")
	spec := r.statefulSt.Spec.Template.Spec
	c := spec.Containers[0]
	var header *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "OTELCOL_COST_BACKEND_HEADER_AUTHORIZATION" {
			header = &c.Env[i]
		}
	}
	require.NotNil(t, header)
	require.NotNil(t, header.ValueFrom)
	assert.Equal(t, "tempo-auth", header.ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "bearer", header.ValueFrom.SecretKeyRef.Key)
	// The Secret-backed values of the other value sets never reach a ConfigMap.
	monthly := renderChart(t, []string{"-f", filepath.Join(chartDir(), "ci", "monthly-budget-values.yaml")})
	for name, cfg := range monthly.configs {
		assert.NotContains(t, cfg, "example-key", name)
		assert.Contains(t, monthly.configs["cost-otelcol-cost-sampler"], "x-honeycomb-team: ${env:OTELCOL_COST_BACKEND_HEADER_X_HONEYCOMB_TEAM}")
	}
	assert.Equal(t, "registry.example.com/observability/otelcol-cost@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", c.Image)
	assert.Equal(t, "platform", r.statefulSt.Spec.Template.Annotations["example.com/owner"])
	assert.NotEmpty(t, r.statefulSt.Spec.Template.Annotations["checksum/config"])
	assert.Equal(t, "observability-critical", r.deployment.Spec.Template.Spec.PriorityClassName)
	assert.Equal(t, "otelcol-cost-extra", c.EnvFrom[0].SecretRef.Name)
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "backend-ca" && m.MountPath == "/etc/otelcol-cost/ca")
	}
	assert.True(t, mounted, "the CA is mounted")
	assert.Len(t, spec.Volumes, 4, "config, the live policy, the durable state, the extra CA")
	assert.Contains(t, r.configs["cost-otelcol-cost-gateway"], "max_connection_age: 5m", "gateway connections rebalance onto new pods")
	assert.Contains(t, r.configs["cost-otelcol-cost-gateway"], "grpc_gzip:\n    level: 1", "the gzip level towards the samplers")
	assert.Empty(t, r.pdbs, "one replica per tier: no PDB")

	// Alerts: runbooks at the team's own URL, the samplers' job as configured.
	withRule := renderChart(t, []string{"-f", ext, "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.runbookBaseURL=https://wiki.example.com/otelcol-cost",
		"--set", "prometheusRule.samplerJob=observability/sampler"})
	require.NotNil(t, withRule.rule)
	for _, g := range withRule.rule.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			assert.True(t, strings.HasPrefix(rule.Annotations["runbook_url"], "https://wiki.example.com/otelcol-cost#"), rule.Alert)
			if rule.Alert == "OtelcolCostSamplerDown" {
				assert.Equal(t, `up{job=~"observability/sampler"} == 0`, rule.Expr.String())
			}
		}
	}
}

// One value sizes the requests between the tiers: the samplers take what
// the gateway cuts its requests to (maxRequestMiB), so the gateway never
// sends what a sampler's gRPC server refuses.
func TestChartSizesRequestsBetweenTheTiersFromOneValue(t *testing.T) {
	for mib, want := range map[string]string{"4": "4194304", "16": "16777216"} {
		r := renderChart(t, []string{"--set", "backend.endpoint=tempo:4317", "--set", "maxRequestMiB=" + mib})
		var sampler, gateway struct {
			Receivers map[string]struct {
				Protocols struct {
					GRPC map[string]any `yaml:"grpc"`
				} `yaml:"protocols"`
			} `yaml:"receivers"`
			Exporters map[string]struct {
				Protocol struct {
					OTLP map[string]any `yaml:"otlp"`
				} `yaml:"protocol"`
			} `yaml:"exporters"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(r.configs["cost-otelcol-cost-sampler"]), &sampler))
		require.NoError(t, yaml.Unmarshal([]byte(r.configs["cost-otelcol-cost-gateway"]), &gateway))
		assert.Equal(t, mib, fmt.Sprint(sampler.Receivers["otlp"].Protocols.GRPC["max_recv_msg_size_mib"]), "the samplers' limit")
		assert.Equal(t, want, fmt.Sprint(gateway.Exporters["trace_router"].Protocol.OTLP["max_request_bytes"]), "what the gateway cuts to")
	}
}

// The samplers' durable state (the buffer's write-ahead log and the
// backend queue on file_storage) lives on a volume mounted where their
// config writes: an emptyDir by default, a claim per sampler with
// persistentVolume.enabled, nothing with durable off.
func TestChartGivesTheSamplersADurableStateVolume(t *testing.T) {
	type samplerConfig struct {
		Extensions map[string]map[string]any `yaml:"extensions"`
		Processors map[string]struct {
			Durable map[string]any `yaml:"durable"`
		} `yaml:"processors"`
		Exporters map[string]struct {
			SendingQueue map[string]any `yaml:"sending_queue"`
		} `yaml:"exporters"`
		Service struct {
			Extensions []string `yaml:"extensions"`
			Pipelines  map[string]struct {
				Processors []string `yaml:"processors"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	for _, tc := range []struct {
		name     string
		args     []string
		durable  bool
		claim    bool
		emptyDir bool
	}{
		{"default", nil, true, false, true},
		{"persistent volume", []string{"--set", "sampler.durable.persistentVolume.enabled=true", "--set", "sampler.durable.persistentVolume.storageClassName=fast"}, true, true, false},
		{"off", []string{"--set", "sampler.durable.enabled=false"}, false, false, false},
		{"sync always", []string{"--set", "sampler.durable.sync=always"}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, append([]string{"--set", "backend.endpoint=tempo:4317"}, tc.args...))
			var cfg samplerConfig
			require.NoError(t, yaml.Unmarshal([]byte(r.configs["cost-otelcol-cost-sampler"]), &cfg))
			assert.NotContains(t, cfg.Service.Pipelines["traces"].Processors, "batch", "no batch processor holds acknowledged spans in memory")
			pod := r.statefulSt.Spec.Template.Spec
			var emptyDir bool
			for _, v := range pod.Volumes {
				if v.Name == "state" {
					emptyDir = v.EmptyDir != nil
					if emptyDir {
						assert.Equal(t, "2Gi", v.EmptyDir.SizeLimit.String())
					}
				}
			}
			assert.Equal(t, tc.emptyDir, emptyDir, "the state emptyDir")
			var claim bool
			for _, c := range r.statefulSt.Spec.VolumeClaimTemplates {
				if c.Name == "state" {
					claim = true
					assert.Equal(t, "fast", *c.Spec.StorageClassName)
					assert.Equal(t, "2Gi", c.Spec.Resources.Requests.Storage().String())
				}
			}
			assert.Equal(t, tc.claim, claim, "the state claim")
			var mounted string
			for _, m := range pod.Containers[0].VolumeMounts {
				if m.Name == "state" {
					mounted = m.MountPath
				}
			}
			durable := cfg.Processors["budget_tail_sampling"].Durable
			queue := cfg.Exporters["otlp_grpc/backend"].SendingQueue
			if !tc.durable {
				assert.Empty(t, mounted)
				assert.Nil(t, durable)
				assert.Nil(t, queue["storage"])
				return
			}
			require.NotEmpty(t, mounted, "the state volume is mounted")
			assert.Equal(t, true, durable["enabled"])
			always := slices.Contains(tc.args, "sampler.durable.sync=always")
			assert.Equal(t, map[bool]string{false: "interval", true: "always"}[always], durable["sync"])
			assert.Equal(t, always, cfg.Extensions["file_storage/queue"]["fsync"],
				"with the log flushed before each acknowledgement, the queued copy is flushed too")
			assert.True(t, strings.HasPrefix(fmt.Sprint(durable["directory"]), mounted+"/"), "the log on the volume")
			assert.Equal(t, "file_storage/queue", queue["storage"], "the backend queue persistent")
			assert.Equal(t, "bytes", queue["sizer"], "and bounded in bytes")
			assert.EqualValues(t, 1073741824, queue["queue_size"], "sampler.durable.backendQueueBytes")
			assert.True(t, strings.HasPrefix(fmt.Sprint(cfg.Extensions["file_storage/queue"]["directory"]), mounted+"/"), "the queue on the volume")
			assert.Contains(t, cfg.Service.Extensions, "file_storage/queue")
		})
	}
}

// TestChartMigrationGuideValues: the processor README's worked migration
// renders with the chart, and the sampler config it makes validates with
// the built binary (rules, the renamed options, the budget).
func TestChartMigrationGuideValues(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "processor", "budgettailsamplingprocessor", "README.md"))
	require.NoError(t, err)
	const marker = "# values.yaml for charts/otelcol-cost\n"
	start := strings.Index(string(readme), marker)
	require.GreaterOrEqual(t, start, 0, "the README's worked migration")
	block := string(readme)[start:]
	block = block[:strings.Index(block, "```")]
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(block), 0o600))
	r := renderChart(t, []string{"-f", values, "--set", "backend.endpoint=tempo:4317"})
	cfg, ok := r.configs["cost-otelcol-cost-sampler"]
	require.True(t, ok, "the sampler's config")
	for _, want := range []string{"max_traces: 200000", "name: no-health", "sampled_size: 500000"} {
		assert.Contains(t, cfg, want)
	}
	assert.Contains(t, r.policy, "spans_per_second: 4200", "the budget, in the live policy")
	path := filepath.Join(t.TempDir(), "sampler.yaml")
	require.NoError(t, os.WriteFile(path, []byte(r.withPolicyFile(t, cfg)), 0o600))
	out, err := validate(t, []string{"POD_IP=10.1.2.3"}, path)
	require.NoError(t, err, out)
}

// TestChartPolicyChangeRollsNoSampler: the budget's amount and shares are
// in the policy ConfigMap, outside the samplers' pod template, so that
// changing them updates the file the samplers re-read and restarts no pod;
// the policy renders into a file the built binary accepts. With
// policy.enabled false they are in the config, and a change rolls the
// samplers.
func TestChartPolicyChangeRollsNoSampler(t *testing.T) {
	base := []string{"--set", "backend.endpoint=tempo:4317"}
	before := renderChart(t, base)
	after := renderChart(t, append(base, "--set", "budget.spansPerSecond=500", "--set-json", "budget.maxPriorityShare=0.6",
		"--set-json", "sampler.baseline.minShare=0.1", "--set", "policy.version=halved",
		"--set-json", `sampler.baseline.keys=["service.name","http.route"]`,
		"--set", "sampler.rare.interval=5m", "--set", "sampler.stressRelief.activationLevel=80", "--set", "sampler.stressRelief.deactivationLevel=60",
		"--set", "serviceBudgets.services.checkout=1500",
		"--set-json", `policy.rules=[{"name":"vip","action":"keep","max_share":0.2,"conditions":["resource.attributes[\"customer.tier\"] == \"gold\""]},{"name":"health","action":"drop","trace_conditions":["trace.span_count == 1"]}]`))
	assert.Equal(t, before.statefulSt.Spec.Template, after.statefulSt.Spec.Template, "the pod template is unchanged: no rollout")
	assert.Equal(t, before.configs, after.configs)
	var pol struct {
		Version string `json:"version"`
		Budget  struct {
			SpansPerSecond   float64 `json:"spans_per_second"`
			MaxPriorityShare float64 `json:"max_priority_share"`
		} `json:"budget"`
		Baseline struct {
			MinShare float64  `json:"min_share"`
			Keys     []string `json:"keys"`
		} `json:"baseline"`
		Rare struct {
			Interval string `json:"interval"`
		} `json:"rare"`
		StressRelief struct {
			ActivationLevel   float64 `json:"activation_level"`
			DeactivationLevel float64 `json:"deactivation_level"`
		} `json:"stress_relief"`
		Rules []struct {
			Name            string   `json:"name"`
			Action          string   `json:"action"`
			MaxShare        float64  `json:"max_share"`
			Conditions      []string `json:"conditions"`
			TraceConditions []string `json:"trace_conditions"`
		} `json:"rules"`
	}
	decodeStrict(t, []byte(after.policy), &pol)
	assert.Equal(t, "halved", pol.Version)
	assert.Equal(t, 500.0, pol.Budget.SpansPerSecond)
	assert.Equal(t, 0.6, pol.Budget.MaxPriorityShare)
	assert.Equal(t, 0.1, pol.Baseline.MinShare)
	assert.Equal(t, []string{"service.name", "http.route"}, pol.Baseline.Keys, "the fairness keys are live too")
	assert.Equal(t, "5m", pol.Rare.Interval, "rare's interval")
	assert.Equal(t, [2]float64{80, 60}, [2]float64{pol.StressRelief.ActivationLevel, pol.StressRelief.DeactivationLevel}, "relief's levels")
	require.Len(t, pol.Rules, 2, "and the rules, in order")
	assert.Equal(t, "vip", pol.Rules[0].Name)
	assert.Equal(t, []string{"trace.span_count == 1"}, pol.Rules[1].TraceConditions)
	assert.NotEqual(t, before.policy, after.policy)
	assert.NotContains(t, after.configs["cost-otelcol-cost-sampler"], "http.route", "not in the config, which would roll the pods")
	assert.Contains(t, after.budgets, "checkout: 1500", "service budgets in span_cost's budgets file")
	assert.Contains(t, after.configs["cost-otelcol-cost-sampler"], "budgets_file:")
	// The built binary compiles the rendered rules and keys.
	rulesPath := filepath.Join(t.TempDir(), "rules-sampler.yaml")
	require.NoError(t, os.WriteFile(rulesPath, []byte(after.withPolicyFile(t, after.configs["cost-otelcol-cost-sampler"])), 0o600))
	out, err := validate(t, []string{"POD_IP=10.1.2.3"}, rulesPath)
	require.NoError(t, err, out)
	mounted := false
	for _, m := range after.statefulSt.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == "policy" {
			mounted = true
			assert.Equal(t, filepath.Dir(policyMount), m.MountPath)
			assert.Empty(t, m.SubPath, "a subPath mount is never updated")
		}
	}
	assert.True(t, mounted, "the policy ConfigMap is mounted")

	// A money budget: the kind in the config, the amount in the file.
	money := renderChart(t, append(base, "--set", "budget.spansPerSecond=0", "--set", "budget.monthlyCost=2500"))
	assert.Contains(t, money.configs["cost-otelcol-cost-sampler"], "monthly_cost: 1")
	assert.Contains(t, money.policy, "monthly_cost: 2500")
	path := filepath.Join(t.TempDir(), "sampler.yaml")
	require.NoError(t, os.WriteFile(path, []byte(money.withPolicyFile(t, money.configs["cost-otelcol-cost-sampler"])), 0o600))
	out, err = validate(t, []string{"POD_IP=10.1.2.3"}, path)
	require.NoError(t, err, out)

	// A shadow candidate: its file beside the live one, read by the
	// samplers (the built binary accepts both), its numbers outside the
	// pod template too.
	shadowArgs := append(base, "--set", "policy.shadow.budget=400", "--set", "policy.shadow.version=candidate")
	withShadow := renderChart(t, shadowArgs)
	moreShadow := renderChart(t, append(shadowArgs, "--set", "policy.shadow.budget=300"))
	assert.Equal(t, withShadow.statefulSt.Spec.Template, moreShadow.statefulSt.Spec.Template, "changing the candidate rolls no pod")
	assert.Contains(t, withShadow.shadow, "spans_per_second: 400")
	assert.Contains(t, withShadow.shadow, `version: "candidate"`)
	assert.Contains(t, withShadow.shadow, "max_priority_share: 0.8", "the live share by default")
	assert.Contains(t, moreShadow.shadow, "spans_per_second: 300")
	path = filepath.Join(t.TempDir(), "shadow-sampler.yaml")
	require.NoError(t, os.WriteFile(path, []byte(withShadow.withPolicyFile(t, withShadow.configs["cost-otelcol-cost-sampler"])), 0o600))
	out, err = validate(t, []string{"POD_IP=10.1.2.3"}, path)
	require.NoError(t, err, out)

	off := append(base, "--set", "policy.enabled=false")
	offBefore := renderChart(t, off)
	offAfter := renderChart(t, append(off, "--set", "budget.spansPerSecond=500"))
	assert.Empty(t, offAfter.policy, "no policy ConfigMap")
	assert.Contains(t, offAfter.configs["cost-otelcol-cost-sampler"], "spans_per_second: 500")
	assert.NotEqual(t, offBefore.statefulSt.Spec.Template.Annotations, offAfter.statefulSt.Spec.Template.Annotations, "the config changed: the samplers roll")
}

// The ServiceOverBudget runbook's example (docs/deploy.md) renders, its
// sample rule goes to the live policy file, and the built binary accepts
// what the samplers would run.
func TestChartRunbookSampleRuleExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "deploy.md"))
	require.NoError(t, err)
	text := string(doc)
	at := strings.Index(text, "### OtelcolCostServiceOverBudget")
	require.GreaterOrEqual(t, at, 0)
	block := text[at:]
	start := strings.Index(block, "```yaml\n")
	require.GreaterOrEqual(t, start, 0, "the runbook has a values example")
	block = block[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(block), 0o600))
	r := renderChart(t, []string{"--set", "backend.endpoint=tempo:4317", "-f", values})
	assert.Contains(t, r.policy, "name: cut-checkout", "the rule is in the live policy file")
	assert.Contains(t, r.policy, "probability: 0.1")
	path := filepath.Join(t.TempDir(), "sampler.yaml")
	require.NoError(t, os.WriteFile(path, []byte(r.withPolicyFile(t, r.configs["cost-otelcol-cost-sampler"])), 0o600))
	out, err := validate(t, []string{"POD_IP=10.1.2.3"}, path)
	require.NoError(t, err, out)
}
