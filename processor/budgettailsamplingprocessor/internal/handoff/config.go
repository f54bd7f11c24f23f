package handoff // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configretry"
)

// Config: when the gateways' hash ring changes, a sampler sends the
// buffered traces it no longer owns to their new owner, proxies fragments
// of traces it does not own, and on shutdown hands its buffer to the
// samplers that stay. The ring is computed from budget.peers_dns exactly as
// the gateways' loadbalancing exporter computes it from the same name.
type Config struct {
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

// DefaultConfig listens on 4320 for peers and sends to them with snappy,
// retrying for up to 5 s.
func DefaultConfig() Config {
	server := configgrpc.NewDefaultServerConfig()
	server.NetAddr.Endpoint = "0.0.0.0:4320"
	client := configgrpc.NewDefaultClientConfig()
	client.TLS.Insecure = true
	client.Compression = configcompression.TypeSnappy
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval = 200 * time.Millisecond
	retry.MaxInterval = time.Second
	retry.MaxElapsedTime = 5 * time.Second
	return Config{
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

// Check reports every invalid field, named under handoff; peersDNS is
// budget.peers_dns, which the ring is resolved from.
func (h *Config) Check(peersDNS string) []error {
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
	if _, err := h.ServerPort(); err != nil {
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

// ServerPort is the port peers' handoff servers listen on: this one's.
func (h *Config) ServerPort() (string, error) {
	_, port, err := net.SplitHostPort(h.Server.NetAddr.Endpoint)
	if err != nil {
		return "", fmt.Errorf("must be host:port, got %q", h.Server.NetAddr.Endpoint)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("must have a fixed port (peers send to it), got %q", h.Server.NetAddr.Endpoint)
	}
	return port, nil
}
