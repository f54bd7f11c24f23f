package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/pricing"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/livepolicy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/outliers"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/policy"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rare"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/red"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/relief"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"
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
	// Baseline is what the baseline is fair across.
	Baseline BaselineConfig `mapstructure:"baseline"`
	// Rare keeps a whole trace of every fairness key seen within an interval.
	Rare RareConfig `mapstructure:"rare"`
	// REDMetrics records requests, errors and durations per fairness key
	// from every trace decided (internal/red).
	REDMetrics REDMetricsConfig `mapstructure:"red_metrics"`
	// MaxServices is the former name of baseline.max_keys (deprecated; 0 =
	// unset).
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
	// StressRelief decides new traces at arrival while the sampler is
	// overloaded, instead of buffering them (see relief.go).
	StressRelief StressReliefConfig `mapstructure:"stress_relief"`
	// Durable writes the buffer ahead to disk before acknowledging, and
	// replays it on start (see durable.go).
	Durable DurableConfig `mapstructure:"durable"`
	// DryRun forwards every span, each with the decision it would have got
	// in attributes (internal/forward's DryRun names) instead of th; the
	// metrics count what would be kept.
	DryRun bool `mapstructure:"dry_run"`
	// PolicyFile is the part of the policy that may change while the
	// sampler runs (internal/livepolicy), read at start and re-read.
	PolicyFile PolicyFileConfig `mapstructure:"policy_file"`
}

// PolicyFileConfig is policy_file (internal/livepolicy).
type PolicyFileConfig = livepolicy.Config

// DurableConfig is the buffer's write-ahead log (internal/durable).
type DurableConfig = durable.Config

// BaselineConfig is the baseline's fairness key and its bound.
type BaselineConfig struct {
	// Keys make a trace's fairness key, read from its root span (or, without
	// one, its longest span): attributes (the resource's, else the span's),
	// span.name, span.kind or status.code. Max-min fairness is across keys.
	Keys []string `mapstructure:"keys"`
	// MaxKeys bounds the keys tracked; past it, the quietest fold into one
	// _other key.
	MaxKeys int `mapstructure:"max_keys"`
	// MinShare is the share of the budget the probabilistic baseline keeps
	// however much errors leave it (they alone may take it), so that every
	// trace has a chance to be kept and th-weighted counts stand for the
	// whole traffic.
	MinShare float64 `mapstructure:"min_share"`
}

// RareConfig keeps, within every interval, the first trace decided of each
// fairness key whole, with probability 1 unless the budget cannot cover
// them all (internal/rare).
type RareConfig = rare.Config

// REDMetricsConfig is red_metrics (internal/red).
type REDMetricsConfig = red.Config

// StressReliefConfig is when and how new traces are decided at arrival
// (internal/relief).
type StressReliefConfig = relief.Config

// HandoffConfig keeps traces whole when the sampler tier's membership
// changes (internal/handoff).
type HandoffConfig = handoff.Config

// RuleConfig is one named rule (internal/rules).
type RuleConfig = rules.Config

// OutliersConfig keeps traces slower than the learned quantile of their
// group (internal/outliers).
type OutliersConfig = outliers.Config

// BudgetConfig is the whole tier's budget: exactly one of the three
// (internal/policy).
type BudgetConfig = policy.BudgetConfig

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

const (
	groupBySpanName = split.GroupBySpanName
	defaultMaxTrace = 100_000
	defaultMaxKeys  = 10_000
)

// Buffer compression modes (buffer_compression).
const (
	compressionNone = "none"
	compressionS2   = "s2"
)

// Where slabs live (buffer_memory).
const (
	bufferMemoryHeap   = "heap"
	bufferMemoryMapped = "mapped"
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
		Outliers: outliers.DefaultConfig([]string{"service.name", groupBySpanName}),
		Budget: BudgetConfig{
			Pricing:              pricing.DefaultConfig(),
			Instances:            1,
			PeersRefreshInterval: 30 * time.Second,
			MaxPriorityShare:     0.8,
		},
		AdjustInterval: 5 * time.Second,
		Smoothing:      0.7,
		Baseline: BaselineConfig{
			Keys:     []string{"service.name"},
			MaxKeys:  defaultMaxKeys,
			MinShare: 0.2,
		},
		REDMetrics:   REDMetricsConfig{Enabled: true, MaxKeys: 1000},
		Handoff:      handoff.DefaultConfig(),
		StressRelief: relief.DefaultConfig(),
		Durable:      durable.DefaultConfig(),
		PolicyFile:   livepolicy.DefaultConfig(),
	}
}

// maxKeys is baseline.max_keys, or the deprecated max_services when only
// that was set.
func (c *Config) maxKeys() int {
	if c.MaxServices > 0 && c.Baseline.MaxKeys == defaultMaxKeys {
		return c.MaxServices
	}
	return c.Baseline.MaxKeys
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
	case c.BufferMemory == bufferMemoryMapped && !spanmem.CanMap:
		errs = append(errs, fmt.Errorf("buffer_memory: %q needs anonymous memory mappings, which this platform lacks", bufferMemoryMapped))
	}
	atLeast("max_spans_per_trace", c.MaxSpansPerTrace, 1)
	// Ring slots are 32-bit (an index entry stays small); 2^31 decisions
	// would need ≈ 250 GB anyway.
	inRange("decision_cache.sampled_size", c.DecisionCache.SampledSize, 1, math.MaxInt32)
	inRange("decision_cache.not_sampled_size", c.DecisionCache.NotSampledSize, 1, math.MaxInt32)
	atLeast("baseline.max_keys", c.Baseline.MaxKeys, 1)
	if c.MaxServices != 0 {
		atLeast("max_services", c.MaxServices, 1)
		if c.Baseline.MaxKeys != defaultMaxKeys && c.Baseline.MaxKeys != c.MaxServices {
			errs = append(errs, fmt.Errorf("max_services: is the former name of baseline.max_keys; set only baseline.max_keys (got %d and %d)", c.MaxServices, c.Baseline.MaxKeys))
		}
	}
	if len(c.Baseline.Keys) == 0 {
		errs = append(errs, errors.New("baseline.keys: at least one key is required (the default is [service.name])"))
	} else if _, err := split.ParseKeys("baseline.keys", c.Baseline.Keys); err != nil {
		errs = append(errs, err)
	}
	if !(c.Baseline.MinShare >= 0 && c.Baseline.MinShare < 1) {
		errs = append(errs, fmt.Errorf("baseline.min_share: must be in [0, 1) (0 = no floor), got %v", c.Baseline.MinShare))
	}
	errs = append(errs, c.Rare.Check(c.DecisionWait)...)
	errs = append(errs, c.REDMetrics.Check()...)
	atLeast("num_shards", c.NumShards, 0)
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		errs = append(errs, fmt.Errorf("smoothing: must be in (0, 1], got %v", c.Smoothing))
	}
	errs = append(errs, c.Outliers.Check()...)
	errs = append(errs, c.Budget.Check()...)
	errs = append(errs, c.Handoff.Check(c.Budget.PeersDNS)...)
	errs = append(errs, c.StressRelief.Check()...)
	errs = append(errs, c.Durable.Check()...)
	errs = append(errs, c.PolicyFile.Check()...)
	if _, err := rules.Compile(c.Rules, component.TelemetrySettings{Logger: zap.NewNop()}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
