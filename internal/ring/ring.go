// Package ring computes the consistent-hash ring contrib's loadbalancing
// exporter (v0.161.0) routes trace IDs with, so that a sampler knows which
// sampler the gateways send each trace to. The two must agree bit for bit:
// integration/ring_test.go routes traces through the real exporter and
// checks every prediction.
//
// The exporter's algorithm: each endpoint string (as its resolver formats
// it: "ip:port", IPv6 in brackets, sorted) gets 200 points, point i at
// crc32(endpoint ‖ uint32le(i)) mod 131071; points are ordered by position,
// then hash, then endpoint; a point whose position is taken moves to the
// next free one, at most 10 steps, or is dropped. A trace ID goes to the
// first point at or after crc32(id) mod 131071, wrapping to the first.
package ring // import "github.com/otelcol-cost/otelcol-cost/internal/ring"

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"slices"
	"sort"
	"strings"
)

const (
	positions      = 131071
	pointsPerEntry = 200
	maxProbes      = 10
)

type point struct {
	pos      uint32
	endpoint int32 // index into Ring.endpoints
}

// Ring maps trace IDs to endpoints. The zero Ring owns nothing.
type Ring struct {
	endpoints []string
	points    []point
	// owners is each position's owner (an index into endpoints): a lookup
	// per trace ID instead of a search among points (256 KiB a ring; rings
	// change only when the samplers do).
	owners []uint16
}

// New builds the ring of these endpoints, in any order. A duplicate counts
// twice, as it does in the exporter.
func New(endpoints []string) *Ring {
	eps := slices.Clone(endpoints)
	sort.Strings(eps)
	type candidate struct {
		pos, hash uint32
		endpoint  int32
	}
	cands := make([]candidate, 0, len(eps)*pointsPerEntry)
	var suffix [4]byte
	for e, ep := range eps {
		for i := range pointsPerEntry {
			binary.LittleEndian.PutUint32(suffix[:], uint32(i))
			h := crc32.Update(crc32.ChecksumIEEE([]byte(ep)), crc32.IEEETable, suffix[:])
			cands = append(cands, candidate{pos: h % positions, hash: h, endpoint: int32(e)})
		}
	}
	// Endpoint indexes follow the sorted endpoints, so comparing them
	// compares the strings, as the exporter does.
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		if a.hash != b.hash {
			return a.hash < b.hash
		}
		return a.endpoint < b.endpoint
	})
	taken := make(map[uint32]bool, len(cands))
	r := &Ring{endpoints: eps, points: make([]point, 0, len(cands))}
	for _, c := range cands {
		pos, probes := c.pos, 0
		for taken[pos] && probes < maxProbes {
			pos = (pos + 1) % positions
			probes++
		}
		if probes >= maxProbes {
			continue
		}
		taken[pos] = true
		r.points = append(r.points, point{pos: pos, endpoint: c.endpoint})
	}
	sort.Slice(r.points, func(i, j int) bool { return r.points[i].pos < r.points[j].pos })
	if len(r.points) > 0 && len(eps) <= 1<<16 {
		r.owners = make([]uint16, positions)
		p := 0
		for pos := range uint32(positions) {
			for p < len(r.points) && r.points[p].pos < pos {
				p++
			}
			at := p
			if at == len(r.points) {
				at = 0
			}
			r.owners[pos] = uint16(r.points[at].endpoint)
		}
	}
	return r
}

// OwnerIndex is the index, in Endpoints, of the endpoint the exporter
// routes this trace ID to; -1 on an empty ring.
func (r *Ring) OwnerIndex(traceID [16]byte) int {
	if r == nil || len(r.points) == 0 {
		return -1
	}
	key := crc32.ChecksumIEEE(traceID[:]) % positions
	if r.owners != nil {
		return int(r.owners[key])
	}
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].pos >= key })
	if i == len(r.points) {
		i = 0
	}
	return int(r.points[i].endpoint)
}

// Owner is the endpoint the exporter routes this trace ID to ("" on an
// empty ring).
func (r *Ring) Owner(traceID [16]byte) string {
	i := r.OwnerIndex(traceID)
	if i < 0 {
		return ""
	}
	return r.endpoints[i]
}

// Endpoints are the ring's members, sorted.
func (r *Ring) Endpoints() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.endpoints)
}

// Has reports whether endpoint is a member.
func (r *Ring) Has(endpoint string) bool {
	if r == nil {
		return false
	}
	_, found := slices.BinarySearch(r.endpoints, endpoint)
	return found
}

// Size is the number of members.
func (r *Ring) Size() int {
	if r == nil {
		return 0
	}
	return len(r.endpoints)
}

// Equal reports whether both rings have the same members.
func (r *Ring) Equal(o *Ring) bool {
	return slices.Equal(r.Endpoints(), o.Endpoints())
}

// Without is the ring without one member.
func (r *Ring) Without(endpoint string) *Ring {
	return New(slices.DeleteFunc(r.Endpoints(), func(e string) bool { return e == endpoint }))
}

// Endpoint formats an address as the exporter's dns resolver does: IPv6 in
// brackets, then ":port" when a port is configured.
func Endpoint(ip net.IP, port string) string {
	s := ip.String()
	if ip.To4() == nil {
		s = "[" + s + "]"
	}
	if port != "" {
		s += ":" + port
	}
	return s
}

// Host is the address part of an endpoint, without brackets or port.
func Host(endpoint string) string {
	if h, _, err := net.SplitHostPort(endpoint); err == nil {
		return h
	}
	return strings.Trim(endpoint, "[]")
}
