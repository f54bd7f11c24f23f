package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"context"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// lookupIPs resolves a name for one address family ("ip4" or "ip6").
type lookupIPs func(ctx context.Context, network, host string) ([]net.IP, error)

// refreshPeers resolves peers_dns: the number of sampler instances the
// budget is divided among and, with handoff, the gateways' hash ring.
func (p *budgetTailSampler) refreshPeers() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v4, v6, err := p.resolvePeers(ctx)
	if n := peerCount(v4, v6); n > 0 {
		if n != p.peers.Swap(n) {
			p.logger.Info("sampler peers changed; budget share follows", zap.Int64("peers", n))
		}
	} else {
		p.logger.Warn("cannot count sampler peers; keeping the last count",
			zap.String("peers_dns", p.cfg.Budget.PeersDNS), zap.Int64("peers", p.peers.Load()), zap.Error(err))
	}
	if p.handoff != nil && err == nil {
		p.handoff.setMembers(append(v4, v6...))
	}
}

// resolvePeers looks the name up. The count needs IPv6 only where there is
// no IPv4; the ring, with handoff, needs both, as the gateways' dns
// resolver has an entry per address.
func (p *budgetTailSampler) resolvePeers(ctx context.Context) (v4, v6 []net.IP, err error) {
	v4, err4 := p.lookup(ctx, "ip4", p.cfg.Budget.PeersDNS)
	if p.handoff == nil && err4 == nil && len(v4) > 0 {
		return v4, nil, nil
	}
	v6, err6 := p.lookup(ctx, "ip6", p.cfg.Budget.PeersDNS)
	if err4 != nil && err6 != nil {
		return nil, nil, err4
	}
	return v4, v6, nil
}

// peerCount: a pod of a dual-stack headless Service has an A and an AAAA
// record; the peers are the distinct IPv4 addresses, or the IPv6 ones
// where there are none.
func peerCount(v4, v6 []net.IP) int64 {
	for _, ips := range [][]net.IP{v4, v6} {
		unique := map[string]struct{}{}
		for _, ip := range ips {
			unique[ip.String()] = struct{}{}
		}
		if len(unique) > 0 {
			return int64(len(unique))
		}
	}
	return 0
}

// ringOf is the ring the gateways build from these addresses.
func ringOf(ips []net.IP, port string) *ring.Ring {
	eps := make([]string, 0, len(ips))
	for _, ip := range ips {
		eps = append(eps, ring.Endpoint(ip, port))
	}
	return ring.New(eps)
}
