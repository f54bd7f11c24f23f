package budgettailsamplingprocessor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-cost/otelcol-cost/internal/configtest"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
)

func loadConfig(t *testing.T, name string) *Config {
	return configtest.Load[*Config](t, NewFactory(), name)
}

func TestLoadConfig(t *testing.T) {
	def := loadConfig(t, "")
	require.NoError(t, confmap.Validate(def))
	want := createDefaultConfig()
	want.Budget.SpansPerSecond = 5000
	assert.Equal(t, want, def)

	full := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(full))
	assert.Equal(t, 20*time.Second, full.DecisionWait)
	assert.Equal(t, 3*time.Second, full.DecisionWaitAfterRoot)
	assert.Equal(t, int64(512<<20), full.MaxBufferedBytes)
	assert.Equal(t, "s2", full.BufferCompression)
	assert.Equal(t, "mapped", full.BufferMemory)
	assert.Equal(t, 400000, full.DecisionCache.NotSampledSize)
	assert.True(t, full.Errors.HTTPServerErrors)
	assert.Equal(t, []string{"service.name", "http.route"}, full.Outliers.GroupBy)
	assert.Equal(t, 1500.0, full.Budget.MonthlyCost)
	assert.Equal(t, "saas_indexed", full.Budget.Pricing.Preset)
	assert.Equal(t, 0.3, full.Baseline.MinShare)
	assert.Equal(t, 0.6, full.Budget.MaxPriorityShare)
	assert.Equal(t, "sampling.reason", full.ReasonAttribute)
	assert.Equal(t, 16, full.NumShards)
	require.Len(t, full.Rules, 5)
	assert.Equal(t, RuleConfig{Name: "gold-customers", Action: "keep", MaxShare: 0.2,
		Conditions: []string{`resource.attributes["customer.tier"] == "gold"`}}, full.Rules[1])
	assert.Equal(t, []string{"trace.duration > 2s"}, full.Rules[2].TraceConditions)
	assert.Equal(t, 3.0, full.Rules[4].Weight)
	assert.True(t, full.Handoff.Enabled)
	assert.Equal(t, "10.1.2.3", full.Handoff.SelfAddress)
	assert.Equal(t, "0.0.0.0:4399", full.Handoff.Server.NetAddr.Endpoint)
	assert.Equal(t, "zstd", string(full.Handoff.Client.Compression))
	assert.Equal(t, 10*time.Second, full.Handoff.Window)
	assert.Equal(t, 3*time.Second, full.Handoff.RetryOnFailure.MaxElapsedTime)
	assert.Equal(t, []string{"service.name", "http.route", "http.response.status_code"}, full.Baseline.Keys)
	assert.Equal(t, 2000, full.Baseline.MaxKeys)
	assert.Equal(t, time.Minute, full.Rare.Interval)
	assert.Equal(t, StressReliefConfig{Mode: "always", ActivationLevel: 85, DeactivationLevel: 60,
		MinimumActivationDuration: 30 * time.Second, MinimumDeactivationDuration: 5 * time.Second, MemoryLimitMiB: 1536,
		Recall: relief.RecallConfig{Window: 4 * time.Second, MaxBytes: 8 << 20}}, full.StressRelief)

	err := confmap.Validate(loadConfig(t, "bad_rule"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `rules[0] ("vip").conditions[0]`, "the rule is named")
	assert.Contains(t, err.Error(), "invalid syntax", "with the parser's message")
}

func TestValidateNamesTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "no_budget"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "budget: exactly one of spans_per_second, bytes_per_second, monthly_cost")

	err = confmap.Validate(loadConfig(t, "two_budgets"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "got 2")

	err = confmap.Validate(loadConfig(t, "bad_values"))
	require.Error(t, err)
	for _, field := range []string{"decision_wait:", "max_traces", "outliers.quantile", "outliers.group_by[0]",
		"budget.instances", "budget.max_priority_share", "pricing: preset: unknown preset \"platinum\""} {
		assert.Contains(t, err.Error(), field)
	}

	for field, mutate := range map[string]func(*Config){
		"max_buffered_bytes":                         func(c *Config) { c.MaxBufferedBytes = 0 },
		"max_spans_per_trace":                        func(c *Config) { c.MaxSpansPerTrace = 0 },
		"buffer_compression":                         func(c *Config) { c.BufferCompression = "zstd" },
		"buffer_memory":                              func(c *Config) { c.BufferMemory = "disk" },
		"decision_cache.sampled_size":                func(c *Config) { c.DecisionCache.SampledSize = 0 },
		"decision_cache.not_sampled_size: must be ≤": func(c *Config) { c.DecisionCache.NotSampledSize = math.MaxInt32 + 1 },
		"smoothing":                                  func(c *Config) { c.Smoothing = 0 },
		"adjust_interval":                            func(c *Config) { c.AdjustInterval = 0 },
		"outliers.relative_accuracy":                 func(c *Config) { c.Outliers.RelativeAccuracy = 0.9 },
		"outliers.max_groups":                        func(c *Config) { c.Outliers.MaxGroups = 0 },
		"outliers.fallback_latency_threshold":        func(c *Config) { c.Outliers.FallbackLatencyThreshold = -time.Second },
		"budget.spans_per_second":                    func(c *Config) { c.Budget.SpansPerSecond = -1 },
		"budget.peers_refresh_interval": func(c *Config) {
			c.Budget.PeersDNS = "x"
			c.Budget.PeersRefreshInterval = 0
		},
		"num_shards":      func(c *Config) { c.NumShards = -1 },
		"outliers.window": func(c *Config) { c.Outliers.Window = 0 },
		"policy_file.check_interval": func(c *Config) {
			c.PolicyFile.Path = "policy.yaml"
			c.PolicyFile.CheckInterval = 0
		},
		"handoff.enabled: needs budget.peers_dns": func(c *Config) {
			c.Handoff.Enabled, c.Handoff.SelfAddress = true, "10.0.0.1"
		},
		"handoff.self_address": func(c *Config) {
			c.Handoff.Enabled, c.Budget.PeersDNS, c.Handoff.SelfAddress = true, "s", "pod-0"
		},
		"handoff.ring_port": func(c *Config) {
			c.Handoff.Enabled, c.Budget.PeersDNS, c.Handoff.SelfAddress, c.Handoff.RingPort = true, "s", "10.0.0.1", "otlp"
		},
		"handoff.server.endpoint": func(c *Config) {
			c.Handoff.Enabled, c.Budget.PeersDNS, c.Handoff.SelfAddress = true, "s", "10.0.0.1"
			c.Handoff.Server.NetAddr.Endpoint = "0.0.0.0:0"
		},
		"handoff.retry_on_failure": func(c *Config) {
			c.Handoff.Enabled, c.Budget.PeersDNS, c.Handoff.SelfAddress = true, "s", "10.0.0.1"
			c.Handoff.RetryOnFailure.Multiplier = -1
		},
		"handoff.window": func(c *Config) {
			c.Handoff.Enabled, c.Budget.PeersDNS, c.Handoff.SelfAddress = true, "s", "10.0.0.1"
			c.Handoff.Window = 0
		},
		"handoff.queue_size": func(c *Config) {
			c.Handoff.Enabled, c.Budget.PeersDNS, c.Handoff.SelfAddress = true, "s", "10.0.0.1"
			c.Handoff.QueueSize = 0
		},
	} {
		t.Run(field, func(t *testing.T) {
			cfg := testConfig()
			mutate(cfg)
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), field)
		})
	}
}

func TestStressReliefConfigErrorsNameTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad_stress_relief"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `stress_relief.mode: must be "never", "monitor" or "always", got "sometimes"`)
	assert.Contains(t, err.Error(), "stress_relief.deactivation_level: must be below activation_level (70), got 80")
	assert.Contains(t, err.Error(), "stress_relief.recall.window: must be ≥ 0, got -1s")
	assert.Contains(t, err.Error(), "stress_relief.recall.max_bytes: must be ≥ 0, got -1")
	assert.Contains(t, err.Error(), "stress_relief.memory_spike_limit_mib: must be below memory_limit_mib (256), got 256")
	cfg := testConfig()
	cfg.StressRelief.ActivationLevel = 150
	err = confmap.Validate(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stress_relief.activation_level: must be a percentage in (0, 100], got 150")
	assert.Equal(t, "monitor", createDefaultConfig().StressRelief.Mode, "on by default")
}

func TestKeysAndRareConfigErrorsNameTheField(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad_keys"))
	require.Error(t, err)
	for _, want := range []string{
		`baseline.keys[1]: "attributes[\"http.route\"]" is not a key`,
		`baseline.keys[2]: "root.http.route" is not a key: keys are always read from the trace's root span`,
		`baseline.keys[3]: "span.status" is not a key: the span fields are span.name, span.kind and status.code`,
		`baseline.keys[4]: "service.name" is listed twice`,
		"baseline.max_keys: must be ≥ 1, got 0",
		"baseline.min_share: must be in [0, 1) (0 = no floor), got 1",
		"rare.interval: must be 0 (off) or ≥ decision_wait (15s), got 10s",
	} {
		assert.Contains(t, err.Error(), want)
	}
	cfg := testConfig()
	cfg.Baseline.Keys = nil
	assert.ErrorContains(t, confmap.Validate(cfg), "baseline.keys: at least one key is required")

	old := loadConfig(t, "deprecated_max_services")
	require.NoError(t, confmap.Validate(old), "the former name still loads")
	assert.Equal(t, 50, old.maxKeys())
	old.Baseline.MaxKeys = 70
	assert.ErrorContains(t, confmap.Validate(old), "max_services: is the former name of baseline.max_keys")
}

func TestDurableConfigLoadsAndErrorsNameTheField(t *testing.T) {
	ok := loadConfig(t, "durable")
	require.NoError(t, confmap.Validate(ok))
	assert.Equal(t, DurableConfig{Enabled: true, Directory: "/var/lib/otelcol-cost/tail", Sync: "always",
		SyncInterval: time.Second, SegmentBytes: 1 << 20, MaxBytes: 64 << 20}, ok.Durable)
	assert.False(t, createDefaultConfig().Durable.Enabled, "off unless configured (on in configs/sampler.yaml and the chart)")

	err := confmap.Validate(loadConfig(t, "bad_durable"))
	require.Error(t, err)
	for _, want := range []string{
		"durable.directory: must be set when durable.enabled is true",
		`durable.sync: must be "none", "interval" or "always", got "sometimes"`,
		"durable.segment_bytes: must be ≥ 65536, got 1024",
		"durable.max_bytes: must be ≥ 0, got -1",
	} {
		assert.Contains(t, err.Error(), want)
	}
	cfg := testConfig()
	cfg.Durable = DurableConfig{Enabled: true, Directory: "d", Sync: "interval", SegmentBytes: 1 << 20, MaxBytes: 1 << 20}
	assert.ErrorContains(t, confmap.Validate(cfg), "durable.sync_interval: must be > 0")
	assert.ErrorContains(t, confmap.Validate(cfg), "durable.max_bytes: must be 0 or at least 4 × segment_bytes")
}
