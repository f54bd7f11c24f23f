package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"bytes"
	"hash/maphash"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpsize"
)

// mark is what a kept fragment's spans are stamped with.
type mark struct {
	th     sampling.Threshold
	reason string // on the root span, when configured
}

// keptMerger joins kept fragments' encodings into one TracesData with one
// ResourceSpans per distinct resource and one ScopeSpans per distinct scope
// in it. A buffered fragment is a TracesData of its own, so forwarding them
// as they are gave the next consumer one ResourceSpans, with its resource
// decoded and re-encoded, per fragment: SDK clients' traces come in a
// fragment per service, and the traces a pass keeps from one pod share its
// resource. Equal bytes are the test: pdata encodes equal resources alike.
type keptMerger struct {
	w requestWire
	// chunkEnds are where each fragment ends in w.buf, and chunkMarks
	// what its spans are stamped with.
	chunkEnds  []int
	chunkMarks []mark
	resources  []resourceGroup
	byHash     map[uint64][]int32 // a resource's hash: its groups
	seed       maphash.Seed
}

type resourceGroup struct {
	rs     int32 // a ResourceSpans record with the resource's bytes
	scopes []scopeGroup
}

type scopeGroup struct {
	ss    int32 // a ScopeSpans record with the scope's bytes
	hash  uint64
	spans []int32 // span records, in arrival order
}

func newKeptMerger() *keptMerger {
	return &keptMerger{byHash: map[uint64][]int32{}, seed: maphash.MakeSeed()}
}

// add appends a fragment's encoding, its spans to be stamped with m.
func (k *keptMerger) add(encoded []byte, m mark) {
	k.w.buf = append(k.w.buf, encoded...)
	k.chunkEnds = append(k.chunkEnds, len(k.w.buf))
	k.chunkMarks = append(k.chunkMarks, m)
}

func (k *keptMerger) empty() bool { return len(k.chunkEnds) == 0 }

// merged is the fragments' spans as one TracesData, and each span's mark
// in the order the encoding holds the spans.
func (k *keptMerger) merged() ([]byte, []mark, error) {
	if err := k.w.indexRecords(); err != nil {
		return nil, nil, err
	}
	for r := range k.w.rs {
		k.group(int32(r))
	}
	out := make([]byte, 0, len(k.w.buf))
	marks := make([]mark, 0, len(k.w.spans))
	chunkOf := func(s int32) int {
		// Spans are indexed in buffer order, fragments too: a binary
		// search keeps this exact whatever the fragments' sizes.
		from := k.w.spans[s].from
		lo, hi := 0, len(k.chunkEnds)
		for lo < hi {
			mid := (lo + hi) / 2
			if k.chunkEnds[mid] <= from {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return lo
	}
	for _, g := range k.resources {
		rs := &k.w.rs[g.rs]
		body := rs.head.len() + rs.tail.len()
		for _, sg := range g.scopes {
			body += otlpsize.Field(k.scopeBody(sg))
		}
		out = protowire.AppendTag(out, resourceSpansField, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(body))
		out = append(out, k.w.bytes(rs.head)...)
		for _, sg := range g.scopes {
			ss := &k.w.ss[sg.ss]
			out = protowire.AppendTag(out, scopeSpansField, protowire.BytesType)
			out = protowire.AppendVarint(out, uint64(k.scopeBody(sg)))
			out = append(out, k.w.bytes(ss.head)...)
			for _, s := range sg.spans {
				out = append(out, k.w.bytes(k.w.spans[s].byteRange)...)
				marks = append(marks, k.chunkMarks[chunkOf(s)])
			}
			out = append(out, k.w.bytes(ss.tail)...)
		}
		out = append(out, k.w.bytes(rs.tail)...)
	}
	return out, marks, nil
}

func (k *keptMerger) scopeBody(sg scopeGroup) int {
	ss := &k.w.ss[sg.ss]
	n := ss.head.len() + ss.tail.len()
	for _, s := range sg.spans {
		n += k.w.spans[s].len()
	}
	return n
}

// group files ResourceSpans record r's spans under its resource's and its
// scopes' groups.
func (k *keptMerger) group(r int32) {
	rs := &k.w.rs[r]
	head, tail := k.w.bytes(rs.head), k.w.bytes(rs.tail)
	h := maphash.Bytes(k.seed, head) ^ maphash.Bytes(k.seed, tail)*31
	g := int32(-1)
	for _, c := range k.byHash[h] {
		o := &k.w.rs[k.resources[c].rs]
		if bytes.Equal(k.w.bytes(o.head), head) && bytes.Equal(k.w.bytes(o.tail), tail) {
			g = c
			break
		}
	}
	if g < 0 {
		g = int32(len(k.resources))
		k.resources = append(k.resources, resourceGroup{rs: r})
		k.byHash[h] = append(k.byHash[h], g)
	}
	for j := range rs.numSS {
		ss := int32(rs.firstSS + j)
		rec := &k.w.ss[ss]
		sh, st := k.w.bytes(rec.head), k.w.bytes(rec.tail)
		hs := maphash.Bytes(k.seed, sh) ^ maphash.Bytes(k.seed, st)*31
		scopes := k.resources[g].scopes
		i := 0
		for ; i < len(scopes); i++ {
			o := &k.w.ss[scopes[i].ss]
			if scopes[i].hash == hs && bytes.Equal(k.w.bytes(o.head), sh) && bytes.Equal(k.w.bytes(o.tail), st) {
				break
			}
		}
		if i == len(scopes) {
			scopes = append(scopes, scopeGroup{ss: ss, hash: hs})
		}
		for s := rec.firstSpan; s < rec.firstSpan+rec.numSpans; s++ {
			scopes[i].spans = append(scopes[i].spans, int32(s))
		}
		k.resources[g].scopes = scopes
	}
}
