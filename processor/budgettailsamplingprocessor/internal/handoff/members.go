package handoff // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"

import (
	"context"
	"net"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

// LookupIPs resolves a name for one address family ("ip4" or "ip6").
type LookupIPs func(ctx context.Context, network, host string) ([]net.IP, error)

// ResolvePeers looks name up. The count needs IPv6 only where there is no
// IPv4; the ring (forRing) needs both, as the gateways' dns resolver has
// an entry per address.
func ResolvePeers(ctx context.Context, lookup LookupIPs, name string, forRing bool) (v4, v6 []net.IP, err error) {
	v4, err4 := lookup(ctx, "ip4", name)
	if !forRing && err4 == nil && len(v4) > 0 {
		return v4, nil, nil
	}
	v6, err6 := lookup(ctx, "ip6", name)
	if err4 != nil && err6 != nil {
		return nil, nil, err4
	}
	return v4, v6, nil
}

// PeerCount: a pod of a dual-stack headless Service has an A and an AAAA
// record; the peers are the distinct IPv4 addresses, or the IPv6 ones
// where there are none.
func PeerCount(v4, v6 []net.IP) int64 {
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
