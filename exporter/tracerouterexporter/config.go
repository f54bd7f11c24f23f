package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// Config is the trace_router exporter's configuration: load_balancing's
// shape (routing by trace ID only), so that a gateway's config moves over
// by renaming the exporter.
type Config struct {
	TimeoutSettings exporterhelper.TimeoutConfig `mapstructure:",squash"`
	// BackOffConfig retries a failed send; each retry routes again on the
	// ring as it is then.
	BackOffConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`
	// QueueSettings is the one queue: a failed send goes back to it.
	QueueSettings configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	Protocol      Protocol                                                 `mapstructure:"protocol"`
	Resolver      ResolverSettings                                         `mapstructure:"resolver"`
	// RoutingKey is accepted for load_balancing's configs: only traceID.
	RoutingKey string `mapstructure:"routing_key"`
}

// Protocol is how samplers are sent to.
type Protocol struct {
	OTLP OTLPConfig `mapstructure:"otlp"`
}

// OTLPConfig is the gRPC client towards each sampler (the endpoint is the
// resolver's); load_balancing's protocol.otlp shape.
type OTLPConfig struct {
	// Timeout bounds one send to one sampler.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxRequestBytes bounds one request to a sampler (before gRPC
	// compression): at most the samplers' max_recv_msg_size_mib.
	MaxRequestBytes int `mapstructure:"max_request_bytes"`
	// ForwardMetadata are client metadata keys (the receiver's
	// include_metadata) whose values are sent on to the samplers as gRPC
	// headers, as headers_setter's from_context does: a tenant's key or
	// token. Requests whose values differ never share a request.
	ForwardMetadata []string `mapstructure:"forward_metadata"`
	// QueueConfig and RetryConfig exist for load_balancing's configs: they
	// must stay disabled (a queue per sampler would retry a dead sampler's
	// data alone, and drop it when the sampler leaves the ring).
	QueueConfig  configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig  configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`
	ClientConfig configgrpc.ClientConfig                                  `mapstructure:",squash"`
}

// ResolverSettings finds the samplers: exactly one of static and dns.
type ResolverSettings struct {
	Static configoptional.Optional[StaticResolver] `mapstructure:"static"`
	DNS    configoptional.Optional[DNSResolver]    `mapstructure:"dns"`
}

// StaticResolver is a fixed list of samplers ("host" or "host:port").
type StaticResolver struct {
	Hostnames []string `mapstructure:"hostnames"`
}

// DNSResolver resolves a name (a headless Service) to the samplers' IPs.
type DNSResolver struct {
	Hostname string        `mapstructure:"hostname"`
	Port     string        `mapstructure:"port"`
	Interval time.Duration `mapstructure:"interval"`
	Timeout  time.Duration `mapstructure:"timeout"`
}

const (
	defaultPort        = "4317"
	defaultDNSInterval = 5 * time.Second
	defaultDNSTimeout  = time.Second
	// defaultMaxRequestBytes is gRPC's default max_recv_msg_size_mib (4).
	defaultMaxRequestBytes = 4 << 20
	minRequestBytes        = 64 << 10
)

// Validate reports every invalid field by name.
func (c *Config) Validate() error {
	var errs []error
	if c.RoutingKey != "" && c.RoutingKey != "traceID" {
		errs = append(errs, fmt.Errorf("routing_key: only %q is supported (use load_balancing for other keys), got %q", "traceID", c.RoutingKey))
	}
	static, dns := c.Resolver.Static.HasValue(), c.Resolver.DNS.HasValue()
	switch {
	case static == dns:
		errs = append(errs, errors.New("resolver: exactly one of static and dns must be set"))
	case static:
		hosts := c.Resolver.Static.Get().Hostnames
		if len(hosts) == 0 {
			errs = append(errs, errors.New("resolver.static.hostnames: at least one sampler is required"))
		}
		for i, h := range hosts {
			if h == "" {
				errs = append(errs, fmt.Errorf("resolver.static.hostnames[%d]: must not be empty", i))
			}
		}
	default:
		d := c.Resolver.DNS.Get()
		if d.Hostname == "" {
			errs = append(errs, errors.New("resolver.dns.hostname: required"))
		}
		if d.Interval < 0 {
			errs = append(errs, fmt.Errorf("resolver.dns.interval: must be ≥ 0, got %v", d.Interval))
		}
		if d.Timeout < 0 {
			errs = append(errs, fmt.Errorf("resolver.dns.timeout: must be ≥ 0, got %v", d.Timeout))
		}
	}
	o := c.Protocol.OTLP
	if o.QueueConfig.HasValue() {
		errs = append(errs, errors.New("protocol.otlp.sending_queue: not supported: a failed send goes back to the exporter's sending_queue and is routed again on the current ring"))
	}
	if o.RetryConfig.Enabled {
		errs = append(errs, errors.New("protocol.otlp.retry_on_failure: not supported: set retry_on_failure on the exporter, whose retries route again"))
	}
	if o.ClientConfig.Endpoint != "" {
		errs = append(errs, errors.New("protocol.otlp.endpoint: must be empty: the resolver gives the endpoints"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("protocol.otlp.timeout: must be > 0 (a sampler that never answers would hold its sends forever), got %v", o.Timeout))
	}
	if len(o.ForwardMetadata) > 0 && c.QueueSettings.HasValue() && c.QueueSettings.Get().Batch.HasValue() {
		keys := map[string]bool{}
		for _, k := range c.QueueSettings.Get().Batch.Get().Partition.MetadataKeys {
			keys[strings.ToLower(k)] = true
		}
		for _, k := range o.ForwardMetadata {
			if !keys[strings.ToLower(k)] {
				errs = append(errs, fmt.Errorf("sending_queue.batch.partition.metadata_keys: must include %q of protocol.otlp.forward_metadata, or the queue's batches would mix tenants", k))
			}
		}
	}
	if o.MaxRequestBytes < minRequestBytes {
		errs = append(errs, fmt.Errorf("protocol.otlp.max_request_bytes: must be ≥ %d, got %d", minRequestBytes, o.MaxRequestBytes))
	}
	return errors.Join(errs...)
}
