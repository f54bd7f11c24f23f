package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	sets := map[string][]string{"default": nil}
	files, err := filepath.Glob(filepath.Join(chartDir(), "ci", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2, "at least two value sets besides the defaults")
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
	configs    map[string]string // ConfigMap name → config.yaml
	statefulSt *appsv1.StatefulSet
	deployment *appsv1.Deployment
	rule       *monitoringv1.PrometheusRule
}

func renderChart(t *testing.T, args []string) rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "cost", chartDir(), "--namespace", "observability"}, args...)...)
	require.NoError(t, err, out)
	r := rendered{kinds: map[string]int{}, configs: map[string]string{}}
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
			r.configs[cm.Name] = cm.Data["config.yaml"]
		case "v1/Service":
			decodeStrict(t, []byte(doc), &corev1.Service{})
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
			decodeStrict(t, []byte(doc), &policyv1.PodDisruptionBudget{})
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
			for _, kind := range []string{"Deployment", "StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap"} {
				assert.Positive(t, r.kinds[kind], kind)
			}
			assert.Equal(t, 2, r.kinds["PodDisruptionBudget"])
			require.Len(t, r.configs, 2)

			// Every rendered collector config validates with the built binary.
			for cmName, cfg := range r.configs {
				path := filepath.Join(t.TempDir(), cmName+".yaml")
				require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
				out, err := validate(t, nil, path)
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
			assert.Contains(t, r.configs["cost-otelcol-cost-gateway"], "hostname: cost-otelcol-cost-sampler-headless.observability.svc.cluster.local")
			assert.Contains(t, r.configs["cost-otelcol-cost-sampler"], "peers_dns: cost-otelcol-cost-sampler-headless.observability.svc.cluster.local")
			assert.Equal(t, "cost-otelcol-cost-sampler-headless", r.statefulSt.Spec.ServiceName)

			if r.rule != nil {
				// The PrometheusRule carries the rules file itself, not a copy.
				raw, err := os.ReadFile(filepath.Join(chartDir(), "files", "alerts.yaml"))
				require.NoError(t, err)
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
		{"pricing.preset=gold", "/pricing/preset"},
		{"sampler.decisionWait=ten", "/sampler/decisionWait"},
		{"budget.monthlyCost=100", "exactly one of spansPerSecond, bytesPerSecond, monthlyCost"},
		{"sampler.resources.limits.memory=2Ti", "/sampler/resources/limits/memory"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", "cost", chartDir(), "--set", tc.set)
			require.Error(t, err)
			assert.Contains(t, out, tc.want)
		})
	}
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
