package handoff // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/handoff"

import (
	"net"

	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

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
