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
	"google.golang.org/protobuf/encoding/protowire"

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

// Each fragment's encoding decodes to its trace's spans copied out, sized
// as pdata sizes them; the request is left as it came.
func TestFragmentsAreEncodedAsTheirTracesCopiedOut(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	var m ptrace.ProtoMarshaler
	for seed := uint64(1); seed <= 50; seed++ {
		td := mixedRequest(seed)
		before, err := m.MarshalTraces(td)
		require.NoError(t, err)
		want := perTraceCopies(td)
		req, err := ts.p.split(td)
		require.NoError(t, err)
		require.Len(t, req.frags, len(want), "seed %d", seed)
		var reuse []byte
		for _, f := range req.frags {
			require.NoError(t, ts.p.encode(req, &f, &reuse))
			w, ok := want[f.id]
			require.True(t, ok, "seed %d: a fragment of an unknown trace", seed)
			encoded, err := m.MarshalTraces(w)
			require.NoError(t, err)
			// otlpwrite orders fields otherwise than pdata: compare what
			// pdata decodes, and the sizes.
			require.Equal(t, encoded, asPdataWritesIt(t, f.encoded), "seed %d trace %v", seed, f.id)
			assert.Len(t, f.encoded, len(encoded))
			assert.EqualValues(t, len(encoded), f.bytes)
			assert.Equal(t, w.SpanCount(), f.spans)
		}
		req.release()
		after, err := m.MarshalTraces(td)
		require.NoError(t, err)
		require.Equal(t, before, after, "split changed the request")
	}
	assert.Zero(t, ts.p.indexed.Load(), "a request was marshaled whole")
}

// asPdataWritesIt decodes an encoding with pdata and marshals it again.
func asPdataWritesIt(t testing.TB, b []byte) []byte {
	t.Helper()
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(b)
	require.NoError(t, err)
	var m ptrace.ProtoMarshaler
	out, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return out
}

// A request's encoding that is not as pdata writes it is refused whole,
// never half split.
func TestUnexpectedEncodingLayoutIsRefused(t *testing.T) {
	var w requestWire
	for name, buf := range map[string][]byte{
		"truncated length":         {0x0a, 0x05, 0x12},
		"field between its scopes": {0x0a, 0x06, 0x12, 0x00, 0x1a, 0x00, 0x12, 0x00},
		"bad tag":                  {0x0a, 0x01, 0x00},
	} {
		w.buf = buf
		w.rs, w.ss, w.spans = nil, nil, nil
		err := w.indexRecords()
		assert.ErrorIs(t, err, errUnexpectedEncoding, name)
	}
}

// withHiddenFields is a request of one span whose resource attribute
// carries a profiles string index (KeyValue field 3) beside its key:
// something pdata keeps and marshals but does not show.
func withHiddenFields(t *testing.T) ptrace.Traces {
	t.Helper()
	var kv, res, span, ss, rs, req []byte
	kv = protowire.AppendTag(kv, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "service.name")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "checkout"))
	kv = protowire.AppendTag(kv, 3, protowire.VarintType)
	kv = protowire.AppendVarint(kv, 7)
	res = protowire.AppendTag(res, 1, protowire.BytesType)
	res = protowire.AppendBytes(res, kv)
	span = protowire.AppendTag(span, 1, protowire.BytesType)
	span = protowire.AppendBytes(span, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span = protowire.AppendTag(span, 2, protowire.BytesType)
	span = protowire.AppendBytes(span, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	ss = protowire.AppendTag(ss, 2, protowire.BytesType)
	ss = protowire.AppendBytes(ss, span)
	rs = protowire.AppendTag(rs, 1, protowire.BytesType)
	rs = protowire.AppendBytes(rs, res)
	rs = protowire.AppendTag(rs, 2, protowire.BytesType)
	rs = protowire.AppendBytes(rs, ss)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, rs)
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(req)
	require.NoError(t, err)
	return td
}

// A request holding a field otlpwrite does not write is marshaled by
// pdata whole, and its fragment keeps the field: nothing is lost.
func TestHiddenFieldsAreKept(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	td := withHiddenFields(t)
	var m ptrace.ProtoMarshaler
	want, err := m.MarshalTraces(td)
	require.NoError(t, err)
	req, err := ts.p.split(td)
	require.NoError(t, err)
	defer req.release()
	require.Len(t, req.frags, 1)
	var reuse []byte
	require.NoError(t, ts.p.encode(req, &req.frags[0], &reuse))
	assert.Equal(t, want, req.frags[0].encoded, "the fragment lost what pdata holds")
	assert.EqualValues(t, 1, ts.p.indexed.Load())
}

// A direct layout turned indexed midway (otlpwrite wrote a span otherwise
// than it sized it) keeps every fragment's spans: the rest are copied out
// of pdata's encoding.
func TestDirectLayoutTurnsIndexedKeepingFragments(t *testing.T) {
	ts := newTestSampler(t, testConfig())
	td := mixedRequest(7)
	want := perTraceCopies(td)
	req, err := ts.p.split(td)
	require.NoError(t, err)
	defer req.release()
	require.True(t, req.wire.direct)
	var m ptrace.ProtoMarshaler
	var reuse []byte
	for i := range req.frags {
		f := &req.frags[i]
		if i == len(req.frags)/2 {
			require.NoError(t, req.wire.indexInstead())
			require.False(t, req.wire.direct)
		}
		require.NoError(t, ts.p.encode(req, f, &reuse))
		encoded, err := m.MarshalTraces(want[f.id])
		require.NoError(t, err)
		require.Equal(t, encoded, asPdataWritesIt(t, f.encoded), "fragment %d", i)
		if !req.wire.direct {
			assert.Equal(t, encoded, f.encoded, "fragment %d: indexed, pdata's bytes", i)
		}
	}
}
