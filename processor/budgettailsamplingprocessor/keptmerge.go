package budgettailsamplingprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor"

import (
	"bytes"
	"hash/maphash"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"

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
	// chunks are the fragments' encodings, marks what their spans are
	// stamped with.
	chunks [][]byte
	marks  []mark
	// index is each fragment's index in turn.
	index     requestWire
	resources []resourceGroup
	byHash    map[uint64][]int32 // a resource's hash: its groups
	seed      maphash.Seed
	// booked is the bytes the fragments' decisions booked (egressMeter).
	booked int64
}

// piece is a range of one fragment's encoding.
type piece struct {
	chunk int32
	byteRange
}

type resourceGroup struct {
	head, tail piece // the ResourceSpans' fields around its ScopeSpans
	scopes     []scopeGroup
}

type scopeGroup struct {
	head, tail piece // the ScopeSpans' fields around its spans
	hash       uint64
	spans      []piece // span records, in arrival order
	body       int     // the merged ScopeSpans' body size, spans filed so far
}

func newKeptMerger() *keptMerger {
	return &keptMerger{byHash: map[uint64][]int32{}, seed: maphash.MakeSeed()}
}

// add takes a fragment's encoding, its spans to be stamped with m; the
// encoding must stay unchanged until merged returns.
func (k *keptMerger) add(encoded []byte, m mark) {
	k.chunks = append(k.chunks, encoded)
	k.marks = append(k.marks, m)
}

func (k *keptMerger) empty() bool { return len(k.chunks) == 0 }

func (k *keptMerger) bytes(p piece) []byte { return k.chunks[p.chunk][p.from:p.to] }

// merged is the fragments' spans as one TracesData, and each span's mark
// in the order the encoding holds the spans.
func (k *keptMerger) merged() ([]byte, []mark, error) {
	size, spans := 0, 0
	for c, chunk := range k.chunks {
		k.index.buf = chunk
		if err := k.index.indexRecords(); err != nil {
			return nil, nil, err
		}
		for r := range k.index.rs {
			k.group(int32(c), &k.index.rs[r])
		}
		size += len(chunk)
		spans += len(k.index.spans)
	}
	k.index.buf = nil
	out := make([]byte, 0, size)
	marks := make([]mark, 0, spans)
	for _, g := range k.resources {
		body := g.head.len() + g.tail.len()
		for _, sg := range g.scopes {
			body += otlpsize.Field(sg.body)
		}
		out = appendMessageHeader(out, resourceSpansField, body)
		out = append(out, k.bytes(g.head)...)
		for _, sg := range g.scopes {
			out = appendMessageHeader(out, scopeSpansField, sg.body)
			out = append(out, k.bytes(sg.head)...)
			for _, s := range sg.spans {
				out = append(out, k.bytes(s)...)
				marks = append(marks, k.marks[s.chunk])
			}
			out = append(out, k.bytes(sg.tail)...)
		}
		out = append(out, k.bytes(g.tail)...)
	}
	return out, marks, nil
}

// hash is the hash of a record's fields around its children (a resource or
// a scope, and its schema URL).
func (k *keptMerger) hash(head, tail piece) uint64 {
	return maphash.Bytes(k.seed, k.bytes(head)) ^ maphash.Bytes(k.seed, k.bytes(tail))*31
}

// group files a ResourceSpans record of fragment c (in k.index) under its
// resource's group, and its spans under their scopes'.
func (k *keptMerger) group(c int32, rs *rsRecord) {
	head, tail := piece{c, rs.head}, piece{c, rs.tail}
	h := k.hash(head, tail)
	g := int32(-1)
	for _, i := range k.byHash[h] {
		o := &k.resources[i]
		if bytes.Equal(k.bytes(o.head), k.bytes(head)) && bytes.Equal(k.bytes(o.tail), k.bytes(tail)) {
			g = i
			break
		}
	}
	if g < 0 {
		g = int32(len(k.resources))
		k.resources = append(k.resources, resourceGroup{head: head, tail: tail})
		k.byHash[h] = append(k.byHash[h], g)
	}
	scopes := k.resources[g].scopes
	for _, ss := range k.index.ss[rs.firstSS : rs.firstSS+rs.numSS] {
		sh, st := piece{c, ss.head}, piece{c, ss.tail}
		hs := k.hash(sh, st)
		i := 0
		for ; i < len(scopes); i++ {
			o := &scopes[i]
			if o.hash == hs && bytes.Equal(k.bytes(o.head), k.bytes(sh)) && bytes.Equal(k.bytes(o.tail), k.bytes(st)) {
				break
			}
		}
		if i == len(scopes) {
			scopes = append(scopes, scopeGroup{head: sh, tail: st, hash: hs, body: sh.len() + st.len()})
		}
		for _, s := range k.index.spans[ss.firstSpan : ss.firstSpan+ss.numSpans] {
			scopes[i].spans = append(scopes[i].spans, piece{c, s.byteRange})
			scopes[i].body += s.len()
		}
	}
	k.resources[g].scopes = scopes
}
