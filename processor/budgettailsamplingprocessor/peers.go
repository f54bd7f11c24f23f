package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"net"
	"time"

	"go.uber.org/zap"
)

// lookupIPs resolves a name for one address family ("ip4" or "ip6").
type lookupIPs func(ctx context.Context, network, host string) ([]net.IP, error)

// refreshPeers counts the sampler instances behind peers_dns. A pod of a
// dual-stack headless Service has an A and an AAAA record: the peers are
// the distinct IPv4 addresses, or the IPv6 ones where there are none.
func (p *budgetTailSampler) refreshPeers() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := p.countPeers(ctx)
	if err != nil || n == 0 {
		p.logger.Warn("cannot count sampler peers; keeping the last count",
			zap.String("peers_dns", p.cfg.Budget.PeersDNS), zap.Int64("peers", p.peers.Load()), zap.Error(err))
		return
	}
	if n != p.peers.Swap(n) {
		p.logger.Info("sampler peers changed; budget share follows", zap.Int64("peers", n))
	}
}

func (p *budgetTailSampler) countPeers(ctx context.Context) (int64, error) {
	var lastErr error
	for _, family := range []string{"ip4", "ip6"} {
		ips, err := p.lookup(ctx, family, p.cfg.Budget.PeersDNS)
		if err != nil {
			lastErr = err
			continue
		}
		unique := map[string]struct{}{}
		for _, ip := range ips {
			unique[ip.String()] = struct{}{}
		}
		if len(unique) > 0 {
			return int64(len(unique)), nil
		}
	}
	return 0, lastErr
}
