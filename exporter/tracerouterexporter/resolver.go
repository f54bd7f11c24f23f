package tracerouterexporter // import "github.com/otelcol-cost/otelcol-cost/exporter/tracerouterexporter"

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// resolver gives the samplers' endpoints, formatted as load_balancing's
// resolvers format them (the ring hashes these strings), and calls
// onChange with every new set, sorted.
type resolver interface {
	start(ctx context.Context, onChange func([]string)) error
	shutdown()
}

// staticResolver is the configured list, as given.
type staticResolver struct{ hostnames []string }

func (r *staticResolver) start(_ context.Context, onChange func([]string)) error {
	eps := slices.Clone(r.hostnames)
	slices.Sort(eps)
	onChange(eps)
	return nil
}

func (*staticResolver) shutdown() {}

// lookupIPAddr is net.Resolver's, replaceable in tests.
type lookupIPAddr func(ctx context.Context, host string) ([]net.IPAddr, error)

// dnsResolver resolves the name every interval; a failed resolution
// keeps the last set.
type dnsResolver struct {
	cfg      DNSResolver
	lookup   lookupIPAddr
	logger   *zap.Logger
	failed   func()
	stop     chan struct{}
	wg       sync.WaitGroup
	last     []string
	onChange func([]string)
}

func newDNSResolver(cfg DNSResolver, logger *zap.Logger, failed func()) *dnsResolver {
	if cfg.Interval == 0 {
		cfg.Interval = defaultDNSInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultDNSTimeout
	}
	return &dnsResolver{cfg: cfg, lookup: net.DefaultResolver.LookupIPAddr, logger: logger, failed: failed, stop: make(chan struct{})}
}

func (r *dnsResolver) start(_ context.Context, onChange func([]string)) error {
	r.onChange = onChange
	r.resolve()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.resolve()
			}
		}
	}()
	return nil
}

func (r *dnsResolver) resolve() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	addrs, err := r.lookup(ctx, r.cfg.Hostname)
	if err != nil {
		r.failed()
		r.logger.Warn("cannot resolve the samplers; routing on the last set", zap.String("hostname", r.cfg.Hostname), zap.Error(err))
		return
	}
	eps := make([]string, 0, len(addrs))
	for _, a := range addrs {
		eps = append(eps, ring.Endpoint(a.IP, r.cfg.Port))
	}
	slices.Sort(eps)
	if slices.Equal(eps, r.last) {
		return
	}
	r.last = eps
	r.onChange(eps)
}

func (r *dnsResolver) shutdown() {
	close(r.stop)
	r.wg.Wait()
}
