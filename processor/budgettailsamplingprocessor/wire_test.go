package budgettailsamplingprocessor

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// perTraceCopies is what a fragment must hold, built the slow way: for each
// trace, its spans copied into a new request, grouped by ResourceSpans and
// ScopeSpans as they came, a ResourceSpans all of whose spans are the
// trace's copied whole.
func perTraceCopies(td ptrace.Traces) map[pcommon.TraceID]ptrace.Traces {
	out := map[pcommon.TraceID]ptrace.Traces{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		ids := map[pcommon.TraceID]bool{}
		empty := false
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				if spans.At(k).TraceID().IsEmpty() {
					empty = true
				}
				ids[spans.At(k).TraceID()] = true
			}
		}
		for id := range ids {
			if id.IsEmpty() {
				continue
			}
			dst, ok := out[id]
			if !ok {
				dst = ptrace.NewTraces()
				out[id] = dst
			}
			if len(ids) == 1 && !empty {
				rs.CopyTo(dst.ResourceSpans().AppendEmpty())
				continue
			}
			drs := dst.ResourceSpans().AppendEmpty()
			rs.Resource().CopyTo(drs.Resource())
			drs.SetSchemaUrl(rs.SchemaUrl())
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				var dss ptrace.ScopeSpans
				for k := 0; k < ss.Spans().Len(); k++ {
					if ss.Spans().At(k).TraceID() != id {
						continue
					}
					if dss == (ptrace.ScopeSpans{}) {
						dss = drs.ScopeSpans().AppendEmpty()
						ss.Scope().CopyTo(dss.Scope())
						dss.SetSchemaUrl(ss.SchemaUrl())
					}
					ss.Spans().At(k).CopyTo(dss.Spans().AppendEmpty())
				}
			}
		}
	}
	return out
}

// mixedRequest is a request as SDKs and gateways send them: some
// ResourceSpans of one trace, others mixing traces over several scopes,
// schema URLs set or not, a span without a trace ID.
func mixedRequest(seed uint64) ptrace.Traces {
	r := rand.New(rand.NewPCG(seed, 1))
	g := workload.NewGenerator(workload.Options{Services: 3, SpansPerTrace: 6, Seed: seed, Start: time.Unix(1_700_000_000, 0)})
	src, _ := g.Batch(4)
	td := ptrace.NewTraces()
	src.ResourceSpans().At(0).CopyTo(td.ResourceSpans().AppendEmpty()) // one trace, as it came
	for n := 0; n < 3; n++ {
		rs := td.ResourceSpans().AppendEmpty()
		workload.FillResource(rs.Resource(), fmt.Sprintf("mixed-%d", n))
		if r.IntN(2) == 0 {
			rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		}
		for s := 0; s < 1+r.IntN(3); s++ {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(fmt.Sprintf("scope-%d", s))
			if r.IntN(2) == 0 {
				ss.SetSchemaUrl("https://opentelemetry.io/schemas/1.21.0")
			}
			for k := 0; k < 1+r.IntN(6); k++ {
				from := src.ResourceSpans().At(1 + r.IntN(src.ResourceSpans().Len()-1))
				from.ScopeSpans().At(0).Spans().At(r.IntN(from.ScopeSpans().At(0).Spans().Len())).CopyTo(ss.Spans().AppendEmpty())
			}
		}
	}
	td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().AppendEmpty().SetName("no trace ID")
	return td
}

// Each fragment's encoding is, byte for byte, its trace's spans copied out
// and marshaled by pdata; the request is left as it came.
func TestFragmentsAreEncodedAsTheirTracesCopiedOut(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	var m ptrace.ProtoMarshaler
	for seed := uint64(1); seed <= 50; seed++ {
		td := mixedRequest(seed)
		before, err := m.MarshalTraces(td)
		require.NoError(t, err)
		want := perTraceCopies(td)
		req, err := ts.p.splitRequest(td)
		require.NoError(t, err)
		require.Len(t, req.Frags, len(want), "seed %d", seed)
		// Into one slab, as intake does: each fragment's encoding must still
		// be whole once the others are written after it.
		sl := ts.p.newSlab(req)
		var reuse []byte
		encodings := map[pcommon.TraceID][]byte{}
		for _, f := range req.Frags {
			in := ts.p.encode(req, &f, sl, &reuse)
			encodings[f.ID] = f.Encoded
			assert.Equal(t, len(f.Encoded), cap(f.Encoded), "seed %d: a fragment's room is its size", seed)
			assert.Equal(t, f.HasRoot, in != nil, "seed %d: root-carrying fragments go in the slab", seed)
		}
		for _, f := range req.Frags {
			w, ok := want[f.ID]
			require.True(t, ok, "seed %d: a fragment of an unknown trace", seed)
			encoded, err := m.MarshalTraces(w)
			require.NoError(t, err)
			require.Equal(t, encoded, encodings[f.ID], "seed %d trace %v", seed, f.ID)
			assert.EqualValues(t, len(encoded), f.Bytes)
			assert.Equal(t, w.SpanCount(), f.Spans)
		}
		if sl != nil {
			assert.True(t, sl.Full(), "seed %d: the slab is filled exactly", seed)
		}
		ts.p.totals.LetGo(sl)
		assert.Zero(t, ts.p.totals.Bytes(), "seed %d: a slab nothing was buffered from is uncounted", seed)
		req.Release()
		after, err := m.MarshalTraces(td)
		require.NoError(t, err)
		require.Equal(t, before, after, "split changed the request")
	}
}
