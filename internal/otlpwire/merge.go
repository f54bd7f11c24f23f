package otlpwire // import "github.com/otelcol-cost/otelcol-cost/internal/otlpwire"

import (
	"bytes"
	"hash/maphash"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpsize"
)

// Merger joins encoded TracesData fragments into one TracesData with one
// ResourceSpans per distinct resource and one ScopeSpans per distinct scope
// in it. Forwarding fragments as they are gives the next consumer one
// ResourceSpans, with its resource decoded and re-encoded, per fragment:
// SDK clients' traces come in a fragment per service, and the traces a
// sampler keeps from one pod share its resource. Equal bytes are the test:
// pdata encodes equal resources alike.
type Merger struct {
	chunks    [][]byte
	index     Index
	resources []resourceGroup
	byHash    map[uint64][]int32 // a resource's hash: its groups
	seed      maphash.Seed
}

// piece is a range of one fragment's encoding.
type piece struct {
	chunk int32
	Range
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

// NewMerger returns an empty merger.
func NewMerger() *Merger {
	return &Merger{byHash: map[uint64][]int32{}, seed: maphash.MakeSeed()}
}

// Add takes a fragment's encoding and returns its number; the encoding
// must stay unchanged until Merged returns.
func (k *Merger) Add(encoded []byte) int32 {
	k.chunks = append(k.chunks, encoded)
	return int32(len(k.chunks) - 1)
}

// Len is how many fragments were added.
func (k *Merger) Len() int { return len(k.chunks) }

// Fragment is fragment i's encoding.
func (k *Merger) Fragment(i int) []byte { return k.chunks[i] }

func (k *Merger) bytes(p piece) []byte { return k.chunks[p.chunk][p.From:p.To] }

// Merged is the fragments' spans as one TracesData and, for each span in
// the order the encoding holds them, the fragment it came from.
func (k *Merger) Merged() ([]byte, []int32, error) {
	size, spans := 0, 0
	for c, chunk := range k.chunks {
		if err := k.index.Parse(chunk); err != nil {
			k.index.Reset()
			return nil, nil, err
		}
		for r := range k.index.rs {
			k.group(int32(c), &k.index.rs[r])
		}
		size += len(chunk)
		spans += len(k.index.spans)
	}
	k.index.Reset()
	out := make([]byte, 0, size)
	from := make([]int32, 0, spans)
	for _, g := range k.resources {
		body := g.head.Len() + g.tail.Len()
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
				from = append(from, s.chunk)
			}
			out = append(out, k.bytes(sg.tail)...)
		}
		out = append(out, k.bytes(g.tail)...)
	}
	return out, from, nil
}

// hash is the hash of a record's fields around its children (a resource or
// a scope, and its schema URL).
func (k *Merger) hash(head, tail piece) uint64 {
	return maphash.Bytes(k.seed, k.bytes(head)) ^ maphash.Bytes(k.seed, k.bytes(tail))*31
}

// group files a ResourceSpans record of fragment c (in k.index) under its
// resource's group, and its spans under their scopes'.
func (k *Merger) group(c int32, rs *rsRecord) {
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
			scopes = append(scopes, scopeGroup{head: sh, tail: st, hash: hs, body: sh.Len() + st.Len()})
		}
		for _, s := range k.index.spans[ss.firstSpan : ss.firstSpan+ss.numSpans] {
			scopes[i].spans = append(scopes[i].spans, piece{c, s.Range})
			scopes[i].body += s.Len()
		}
	}
	k.resources[g].scopes = scopes
}
