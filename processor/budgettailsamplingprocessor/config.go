package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configretry"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
)

// Config is the budget_tail_sampling processor's configuration.
type Config struct {
	// DecisionWait is how long after its first span a trace is decided.
	DecisionWait time.Duration `mapstructure:"decision_wait"`
	// DecisionWaitAfterRoot decides a trace this long after its root span
	// arrived, when that comes before DecisionWait.
	DecisionWaitAfterRoot time.Duration `mapstructure:"decision_wait_after_root"`
	// MaxTraces bounds the traces buffered awaiting a decision.
	MaxTraces int `mapstructure:"max_traces"`
	// MaxBufferedBytes bounds the bytes the buffer holds awaiting a decision
	// (OTLP, compressed with BufferCompression s2).
	MaxBufferedBytes int64 `mapstructure:"max_buffered_bytes"`
	// BufferCompression is how buffered spans are held: none (their OTLP
	// encoding) or s2 (S2-compressed: less memory, more CPU).
	BufferCompression string `mapstructure:"buffer_compression"`
	// BufferMemory is where the buffer's shared allocations (slabs) live:
	// heap (the Go heap) or mapped (anonymous mappings outside it, which
	// memory_limiter and GOMEMLIMIT do not see; max_buffered_bytes bounds
	// them).
	BufferMemory string `mapstructure:"buffer_memory"`
	// MaxSpansPerTrace decides a trace at once when it grows past this.
	MaxSpansPerTrace int `mapstructure:"max_spans_per_trace"`
	// DecisionCache sizes the caches late spans are matched against.
	DecisionCache DecisionCacheConfig `mapstructure:"decision_cache"`
	// Errors is the error-keeping rule.
	Errors ErrorsConfig `mapstructure:"errors"`
	// Outliers is the latency-outlier rule.
	Outliers OutliersConfig `mapstructure:"outliers"`
	// Budget is the tier's budget and how it is split among instances.
	Budget BudgetConfig `mapstructure:"budget"`
	// AdjustInterval is how often the baseline probabilities are recomputed.
	AdjustInterval time.Duration `mapstructure:"adjust_interval"`
	// Smoothing is the weight of the newest interval in the rate estimates
	// (1 = no smoothing).
	Smoothing float64 `mapstructure:"smoothing"`
	// MaxServices caps the services the baseline tracks for fairness; the
	// rest share one entry.
	MaxServices int `mapstructure:"max_services"`
	// ReasonAttribute, when set, is written on each kept trace's root span
	// with the reason it was kept.
	ReasonAttribute string `mapstructure:"reason_attribute"`
	// NumShards splits the buffer so decisions scale with cores (0 = auto).
	NumShards int `mapstructure:"num_shards"`
	// Rules are keep, drop and sample rules in OTTL, tried in order; the
	// first that matches a trace applies (see rules.go).
	Rules []RuleConfig `mapstructure:"rules"`
	// Handoff keeps traces whole when the sampler tier's membership changes
	// (see handoff.go).
	Handoff HandoffConfig `mapstructure:"handoff"`
}

// HandoffConfig: when the gateways' hash ring changes, a sampler sends the
// buffered traces it no longer owns to their new owner, proxies fragments
// of traces it does not own, and on shutdown hands its buffer to the
// samplers that stay. The ring is computed from budget.peers_dns exactly as
// the gateways' loadbalancing exporter computes it from the same name.
type HandoffConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// SelfAddress is this sampler's IP as the gateways resolve it (in
	// Kubernetes the pod IP, from the downward API).
	SelfAddress string `mapstructure:"self_address"`
	// RingPort is the port the gateways' dns resolver is configured with:
	// the ring hashes "ip:port" strings, so it must be the same string (""
	// when the resolver has none).
	RingPort string `mapstructure:"ring_port"`
	// Server receives handoffs from peers (OTLP/gRPC); its port is where
	// this sampler sends to its peers too.
	Server configgrpc.ServerConfig `mapstructure:"server"`
	// Client is the connection to each peer; its endpoint is filled in with
	// the peer's address and the server's port.
	Client configgrpc.ClientConfig `mapstructure:"client"`
	// Timeout bounds one send to a peer.
	Timeout time.Duration `mapstructure:"timeout"`
	// RetryOnFailure retries a refused or failed send; past it the traces
	// are buffered and decided here, as without handoff.
	RetryOnFailure configretry.BackOffConfig `mapstructure:"retry_on_failure"`
	// Window is how long recent decisions travel to a trace's new owner, so
	// that its late spans follow the decision already made.
	Window time.Duration `mapstructure:"window"`
	// QueueSize bounds the traces and fragments waiting to be sent to one
	// peer; when it is full they stay here.
	QueueSize int `mapstructure:"queue_size"`
	// ShutdownTimeout bounds the handoff of the buffer at shutdown; what is
	// left is decided here.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
}

// RuleConfig is one named rule: OTTL conditions over a trace's spans and
// conditions on the whole trace, and what to do with a trace that matches.
type RuleConfig struct {
	Name string `mapstructure:"name"`
	// Conditions are OTTL conditions in the span context (span and resource
	// paths, the standard converters); the rule matches a trace when any of
	// its spans matches any condition. Empty: every trace.
	Conditions []string `mapstructure:"conditions"`
	// TraceConditions are comparisons on the whole trace, all of which must
	// hold: trace.duration (a Go duration) and trace.span_count, with
	// >, >=, <, <=, ==, != (e.g. "trace.duration > 2s").
	TraceConditions []string `mapstructure:"trace_conditions"`
	// Action is drop, keep or sample.
	Action string `mapstructure:"action"`
	// MaxShare caps a keep rule at this share of the budget (0 = only the
	// priority cap).
	MaxShare float64 `mapstructure:"max_share"`
	// Probability samples a sample rule's traces at this fixed probability.
	Probability float64 `mapstructure:"probability"`
	// Weight gives a sample rule's traces this weight in the fair baseline
	// (a service has weight 1).
	Weight float64 `mapstructure:"weight"`
}

// DecisionCacheConfig sizes the decision caches, in trace IDs.
type DecisionCacheConfig struct {
	SampledSize    int `mapstructure:"sampled_size"`
	NotSampledSize int `mapstructure:"not_sampled_size"`
}

// ErrorsConfig keeps traces with errors.
type ErrorsConfig struct {
	// HTTPServerErrors also treats http.response.status_code ≥ 500 as an error.
	HTTPServerErrors bool `mapstructure:"http_server_errors"`
}

// OutliersConfig keeps traces slower than the learned quantile of their group.
type OutliersConfig struct {
	Quantile                 float64       `mapstructure:"quantile"`
	MinObservations          int           `mapstructure:"min_observations"`
	FallbackLatencyThreshold time.Duration `mapstructure:"fallback_latency_threshold"`
	// GroupBy are attribute keys of the root span (resource, then span); the
	// pseudo-key "span.name" is the root span's name.
	GroupBy   []string      `mapstructure:"group_by"`
	MaxGroups int           `mapstructure:"max_groups"`
	Window    time.Duration `mapstructure:"window"`
	// RelativeAccuracy of the quantile sketch.
	RelativeAccuracy float64 `mapstructure:"relative_accuracy"`
}

// BudgetConfig is the whole tier's budget: exactly one of the three.
type BudgetConfig struct {
	SpansPerSecond float64        `mapstructure:"spans_per_second"`
	BytesPerSecond float64        `mapstructure:"bytes_per_second"`
	MonthlyCost    float64        `mapstructure:"monthly_cost"`
	Pricing        pricing.Config `mapstructure:"pricing"`
	// Instances is the static number of sampler instances sharing the budget.
	Instances int `mapstructure:"instances"`
	// PeersDNS, when set, counts the instances from this name's A/AAAA records.
	PeersDNS string `mapstructure:"peers_dns"`
	// PeersRefreshInterval is how often PeersDNS is resolved.
	PeersRefreshInterval time.Duration `mapstructure:"peers_refresh_interval"`
	// MaxPriorityShare caps errors and outliers at this share of the budget.
	MaxPriorityShare float64 `mapstructure:"max_priority_share"`
}

const (
	groupBySpanName = "span.name"
	defaultMaxTrace = 100_000
)

func createDefaultConfig() *Config {
	return &Config{
		// SDKs export through a batch span processor every 5 s at independent
		// phases: a root's children arrive up to 5 s after it, plus the
		// gateway's batching. A trace whose first span is a child waits for
		// the root's export too, hence the longer cap.
		DecisionWait:          15 * time.Second,
		DecisionWaitAfterRoot: 7 * time.Second,
		MaxTraces:             defaultMaxTrace,
		MaxBufferedBytes:      256 << 20,
		BufferCompression:     compressionNone,
		BufferMemory:          bufferMemoryHeap,
		MaxSpansPerTrace:      10_000,
		DecisionCache: DecisionCacheConfig{
			SampledSize:    10 * defaultMaxTrace,
			NotSampledSize: 10 * defaultMaxTrace,
		},
		Outliers: OutliersConfig{
			Quantile:                 0.99,
			MinObservations:          100,
			FallbackLatencyThreshold: time.Second,
			GroupBy:                  []string{"service.name", groupBySpanName},
			MaxGroups:                1000,
			Window:                   10 * time.Minute,
			RelativeAccuracy:         0.01,
		},
		Budget: BudgetConfig{
			Pricing:              pricing.DefaultConfig(),
			Instances:            1,
			PeersRefreshInterval: 30 * time.Second,
			MaxPriorityShare:     0.8,
		},
		AdjustInterval: 5 * time.Second,
		Smoothing:      0.7,
		MaxServices:    10_000,
		Handoff:        defaultHandoffConfig(),
	}
}

func defaultHandoffConfig() HandoffConfig {
	server := configgrpc.NewDefaultServerConfig()
	server.NetAddr.Endpoint = "0.0.0.0:4320"
	client := configgrpc.NewDefaultClientConfig()
	client.TLS.Insecure = true
	client.Compression = configcompression.TypeSnappy
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval = 200 * time.Millisecond
	retry.MaxInterval = time.Second
	retry.MaxElapsedTime = 5 * time.Second
	return HandoffConfig{
		RingPort:        "4317",
		Server:          server,
		Client:          client,
		Timeout:         5 * time.Second,
		RetryOnFailure:  retry,
		Window:          30 * time.Second,
		QueueSize:       50_000,
		ShutdownTimeout: 20 * time.Second,
	}
}

// Validate reports every invalid field by name.
func (c *Config) Validate() error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be > 0, got %v", name, d))
		}
	}
	atLeast := func(name string, v, min int) {
		if v < min {
			errs = append(errs, fmt.Errorf("%s: must be ≥ %d, got %d", name, min, v))
		}
	}
	inRange := func(name string, v, min, max int) {
		atLeast(name, v, min)
		if v > max {
			errs = append(errs, fmt.Errorf("%s: must be ≤ %d, got %d", name, max, v))
		}
	}
	positive("decision_wait", c.DecisionWait)
	positive("decision_wait_after_root", c.DecisionWaitAfterRoot)
	positive("adjust_interval", c.AdjustInterval)
	positive("outliers.window", c.Outliers.Window)
	atLeast("max_traces", c.MaxTraces, 1)
	if c.MaxBufferedBytes < 1 {
		errs = append(errs, fmt.Errorf("max_buffered_bytes: must be ≥ 1, got %d", c.MaxBufferedBytes))
	}
	if c.BufferCompression != compressionNone && c.BufferCompression != compressionS2 {
		errs = append(errs, fmt.Errorf("buffer_compression: must be %q or %q, got %q", compressionNone, compressionS2, c.BufferCompression))
	}
	switch {
	case c.BufferMemory != bufferMemoryHeap && c.BufferMemory != bufferMemoryMapped:
		errs = append(errs, fmt.Errorf("buffer_memory: must be %q or %q, got %q", bufferMemoryHeap, bufferMemoryMapped, c.BufferMemory))
	case c.BufferMemory == bufferMemoryMapped && !canMap:
		errs = append(errs, fmt.Errorf("buffer_memory: %q needs anonymous memory mappings, which this platform lacks", bufferMemoryMapped))
	}
	atLeast("max_spans_per_trace", c.MaxSpansPerTrace, 1)
	// Ring slots are 32-bit (an index entry stays small); 2^31 decisions
	// would need ≈ 250 GB anyway.
	inRange("decision_cache.sampled_size", c.DecisionCache.SampledSize, 1, math.MaxInt32)
	inRange("decision_cache.not_sampled_size", c.DecisionCache.NotSampledSize, 1, math.MaxInt32)
	atLeast("max_services", c.MaxServices, 1)
	atLeast("num_shards", c.NumShards, 0)
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		errs = append(errs, fmt.Errorf("smoothing: must be in (0, 1], got %v", c.Smoothing))
	}
	o := c.Outliers
	if !(o.Quantile > 0 && o.Quantile < 1) {
		errs = append(errs, fmt.Errorf("outliers.quantile: must be in (0, 1), got %v", o.Quantile))
	}
	atLeast("outliers.min_observations", o.MinObservations, 1)
	positive("outliers.fallback_latency_threshold", o.FallbackLatencyThreshold)
	atLeast("outliers.max_groups", o.MaxGroups, 1)
	if len(o.GroupBy) == 0 {
		errs = append(errs, errors.New("outliers.group_by: at least one key is required"))
	}
	for i, k := range o.GroupBy {
		if k == "" {
			errs = append(errs, fmt.Errorf("outliers.group_by[%d]: key must not be empty", i))
		}
	}
	if !(o.RelativeAccuracy > 0 && o.RelativeAccuracy < 0.5) {
		errs = append(errs, fmt.Errorf("outliers.relative_accuracy: must be in (0, 0.5), got %v", o.RelativeAccuracy))
	}
	errs = append(errs, c.Budget.validate()...)
	errs = append(errs, c.Handoff.validate(c.Budget.PeersDNS)...)
	if _, err := compileRules(c.Rules, component.TelemetrySettings{Logger: zap.NewNop()}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (b *BudgetConfig) validate() []error {
	var errs []error
	set := 0
	for _, f := range []struct {
		name string
		v    float64
	}{{"spans_per_second", b.SpansPerSecond}, {"bytes_per_second", b.BytesPerSecond}, {"monthly_cost", b.MonthlyCost}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("budget.%s: must be a finite number ≥ 0, got %v", f.name, f.v))
		}
		if f.v > 0 {
			set++
		}
	}
	if set != 1 {
		errs = append(errs, fmt.Errorf("budget: exactly one of spans_per_second, bytes_per_second, monthly_cost must be > 0, got %d", set))
	}
	if b.Instances < 1 {
		errs = append(errs, fmt.Errorf("budget.instances: must be ≥ 1, got %d", b.Instances))
	}
	if b.PeersDNS != "" && b.PeersRefreshInterval <= 0 {
		errs = append(errs, fmt.Errorf("budget.peers_refresh_interval: must be > 0, got %v", b.PeersRefreshInterval))
	}
	if !(b.MaxPriorityShare > 0 && b.MaxPriorityShare <= 1) {
		errs = append(errs, fmt.Errorf("budget.max_priority_share: must be in (0, 1], got %v", b.MaxPriorityShare))
	}
	return errs
}

func (h *HandoffConfig) validate(peersDNS string) []error {
	if !h.Enabled {
		return nil
	}
	var errs []error
	if peersDNS == "" {
		errs = append(errs, errors.New("handoff.enabled: needs budget.peers_dns, the name the gateways' dns resolver reads"))
	}
	if net.ParseIP(h.SelfAddress) == nil {
		errs = append(errs, fmt.Errorf("handoff.self_address: must be this sampler's IP address as the gateways resolve it, got %q", h.SelfAddress))
	}
	if h.RingPort != "" {
		if n, err := strconv.Atoi(h.RingPort); err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("handoff.ring_port: must be a port number or empty, got %q", h.RingPort))
		}
	}
	if _, err := h.serverPort(); err != nil {
		errs = append(errs, fmt.Errorf("handoff.server.endpoint: %w", err))
	}
	if err := h.RetryOnFailure.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("handoff.retry_on_failure: %w", err))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"timeout", h.Timeout}, {"window", h.Window}, {"shutdown_timeout", h.ShutdownTimeout}} {
		if f.d <= 0 {
			errs = append(errs, fmt.Errorf("handoff.%s: must be > 0, got %v", f.name, f.d))
		}
	}
	if h.QueueSize < 1 {
		errs = append(errs, fmt.Errorf("handoff.queue_size: must be ≥ 1, got %d", h.QueueSize))
	}
	return errs
}

// serverPort is the port peers' handoff servers listen on: this one's.
func (h *HandoffConfig) serverPort() (string, error) {
	_, port, err := net.SplitHostPort(h.Server.NetAddr.Endpoint)
	if err != nil {
		return "", fmt.Errorf("must be host:port, got %q", h.Server.NetAddr.Endpoint)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("must have a fixed port (peers send to it), got %q", h.Server.NetAddr.Endpoint)
	}
	return port, nil
}
