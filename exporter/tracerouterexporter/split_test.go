package tracerouterexporter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/internal/ring"
)

func testRing(n int) *ring.Ring {
	var eps []string
	for i := range n {
		eps = append(eps, fmt.Sprintf("10.1.0.%d:4317", i+1))
	}
	return ring.New(eps)
}

// mixedRequest is what gateways receive: SDK batches (a resource per pod,
// spans of many traces in it), single-trace resources, several scopes,
// some zero trace IDs.
func mixedRequest(rnd *rand.Rand, resources int) ptrace.Traces {
	td := ptrace.NewTraces()
	traces := make([]pcommon.TraceID, 1+rnd.IntN(30))
	for i := range traces {
		binary.BigEndian.PutUint64(traces[i][:8], rnd.Uint64())
		binary.BigEndian.PutUint64(traces[i][8:], rnd.Uint64())
	}
	for r := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", r%4))
		rs.Resource().Attributes().PutInt("pod", int64(r))
		oneTrace := rnd.IntN(3) == 0
		for s := range 1 + rnd.IntN(3) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(fmt.Sprintf("lib-%d", s))
			ss.Scope().Attributes().PutBool("scoped", true)
			for k := range rnd.IntN(6) {
				span := ss.Spans().AppendEmpty()
				id := traces[rnd.IntN(len(traces))]
				if oneTrace {
					id = traces[r%len(traces)]
				}
				if rnd.IntN(40) == 0 {
					id = pcommon.TraceID{}
				}
				span.SetTraceID(id)
				span.SetSpanID(pcommon.SpanID{byte(r), byte(s), byte(k), 1, 2, 3, 4, 5})
				span.SetName("op")
				span.Attributes().PutInt("k", int64(k))
				span.TraceState().FromRaw("ot=th:8")
			}
		}
	}
	return td
}

// pdataSplit is the reference: what load_balancing sends each member, a
// copy of every span with its resource and scope, grouped as in the
// request, empty groups left out.
func pdataSplit(td ptrace.Traces, rg *ring.Ring) []ptrace.Traces {
	out := make([]ptrace.Traces, rg.Size())
	for i := range out {
		out[i] = ptrace.NewTraces()
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		dstRS := make([]ptrace.ResourceSpans, len(out))
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			dstSS := make([]ptrace.ScopeSpans, len(out))
			have := make([]bool, len(out))
			for k := 0; k < ss.Spans().Len(); k++ {
				span := ss.Spans().At(k)
				if span.TraceID().IsEmpty() {
					continue
				}
				e := rg.OwnerIndex(span.TraceID())
				if !have[e] {
					if dstRS[e] == (ptrace.ResourceSpans{}) {
						dstRS[e] = out[e].ResourceSpans().AppendEmpty()
						rs.Resource().CopyTo(dstRS[e].Resource())
						dstRS[e].SetSchemaUrl(rs.SchemaUrl())
					}
					dstSS[e] = dstRS[e].ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(dstSS[e].Scope())
					dstSS[e].SetSchemaUrl(ss.SchemaUrl())
					have[e] = true
				}
				span.CopyTo(dstSS[e].Spans().AppendEmpty())
			}
		}
	}
	return out
}

// The wire split gives each ring member exactly the spans, resources and
// scopes a pdata split gives it: byte for byte, as pdata encodes it.
func TestWireSplitEqualsAPdataSplit(t *testing.T) {
	rnd := rand.New(rand.NewPCG(42, 1))
	asIs := func(b []byte) []byte { return b }
	for _, members := range []int{1, 2, 3, 7} {
		rg := testRing(members)
		for round := range 200 {
			td := mixedRequest(rnd, 1+rnd.IntN(12))
			var idx otlpwire.Index
			require.NoError(t, idx.Marshal(td))
			requirePartsMatchPdata(t, &idx, td, rg, asIs, fmt.Sprintf("members %d, round %d", members, round))
		}
	}
}

// Split as received, the way the trace_router receiver splits: requests
// encoded by protobuf-go, as the Go SDK's exporter encodes them (fields in
// number order, where pdata writes them in reverse), give each member the
// same spans, resources and scopes as a pdata split: each part decodes to
// what pdata's split holds.
func TestSplitAsReceivedEqualsAPdataSplit(t *testing.T) {
	rnd := rand.New(rand.NewPCG(43, 1))
	var m ptrace.ProtoMarshaler
	var u ptrace.ProtoUnmarshaler
	reencoded := func(b []byte) []byte {
		td, err := u.UnmarshalTraces(b)
		require.NoError(t, err)
		out, err := m.MarshalTraces(td)
		require.NoError(t, err)
		return out
	}
	for _, members := range []int{1, 3, 7} {
		rg := testRing(members)
		for round := range 100 {
			td := mixedRequest(rnd, 1+rnd.IntN(12))
			pdataBytes, err := m.MarshalTraces(td)
			require.NoError(t, err)
			var sdk tracepb.TracesData
			require.NoError(t, proto.Unmarshal(pdataBytes, &sdk))
			sdkBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(&sdk)
			require.NoError(t, err)
			require.NotEqual(t, pdataBytes, sdkBytes, "the two encoders lay fields out differently")

			var idx otlpwire.Index
			require.NoError(t, idx.Parse(sdkBytes))
			requirePartsMatchPdata(t, &idx, td, rg, reencoded, fmt.Sprintf("members %d, round %d", members, round))
		}
	}
}

// requirePartsMatchPdata splits the request indexed in idx (td's spans) on
// rg and requires each member's part, as asPdata gives its bytes, to be
// pdata's encoding of what a pdata split gives that member (a member with
// no spans gets no part), and every span to be in one part or counted as
// a zero trace ID.
func requirePartsMatchPdata(t *testing.T, idx *otlpwire.Index, td ptrace.Traces, rg *ring.Ring, asPdata func([]byte) []byte, label string) {
	t.Helper()
	p, err := splitIndex(idx, rg, 1<<30)
	require.NoError(t, err, label)
	var m ptrace.ProtoMarshaler
	want := pdataSplit(td, rg)
	total := p.zero
	for e := range want {
		total += p.spans[e]
		assert.Equal(t, want[e].SpanCount(), p.spans[e], "%s, member %d", label, e)
		if want[e].SpanCount() == 0 {
			require.Negative(t, p.first[e], "%s, member %d", label, e)
			continue
		}
		require.GreaterOrEqual(t, p.first[e], int32(0), "%s, member %d", label, e)
		wantBytes, err := m.MarshalTraces(want[e])
		require.NoError(t, err)
		require.Equal(t, wantBytes, asPdata(idx.AppendEncoding(nil, p.first[e])), "%s, member %d", label, e)
	}
	require.Equal(t, td.SpanCount(), total, "%s: every span in one part, or counted as a zero trace ID", label)
}

// Whatever bytes arrive, splitting them as received never panics; when
// the check takes them, pdata decodes them too, every span lands in
// exactly one part or is counted, and each part holds only its member's
// traces and decodes. A request the check refuses as invalid is one pdata
// refuses; one it does not judge is decoded by the receiver instead:
// nothing is lost either way.
func FuzzSplit(f *testing.F) {
	rnd := rand.New(rand.NewPCG(7, 7))
	var m ptrace.ProtoMarshaler
	for range 8 {
		b, _ := m.MarshalTraces(mixedRequest(rnd, 1+rnd.IntN(5)))
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})
	// A span whose trace_id is 3 bytes long.
	f.Add([]byte{0x0a, 0x09, 0x12, 0x07, 0x12, 0x05, 0x0a, 0x03, 1, 2, 3})
	rg := testRing(3)
	f.Fuzz(func(t *testing.T, data []byte) { checkSplitAsReceived(t, rg, data) })
}

// Corrupted requests as a client or a hostile peer could send them (bytes
// flipped, cut short, spliced), many per run: what FuzzSplit checks, on
// inputs made here, since the fuzzing engine is not run in CI.
func TestSplitSurvivesCorruptedRequests(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	var m ptrace.ProtoMarshaler
	rg := testRing(3)
	checked := 0
	for range 3000 {
		b, err := m.MarshalTraces(mixedRequest(rnd, 1+rnd.IntN(4)))
		require.NoError(t, err)
		switch rnd.IntN(3) {
		case 0:
			for range 1 + rnd.IntN(4) {
				if len(b) > 0 {
					b[rnd.IntN(len(b))] ^= byte(1 + rnd.IntN(255))
				}
			}
		case 1:
			b = b[:rnd.IntN(len(b)+1)]
		default:
			at := rnd.IntN(len(b) + 1)
			b = append(b[:at:at], b[rnd.IntN(len(b)+1):]...)
		}
		if checkSplitAsReceived(t, rg, b) {
			checked++
		}
	}
	t.Logf("%d of 3000 corrupted requests still valid OTLP, split and checked", checked)
	assert.Greater(t, checked, 300, "enough inputs reach the checks")
}

// checkSplitAsReceived splits data as the receiver would: no panic; when
// the check takes it, pdata decodes it, every span is in exactly one part
// or counted, and each part decodes and holds only its member's traces.
// It says whether data went through every check.
func checkSplitAsReceived(t *testing.T, rg *ring.Ring, data []byte) bool {
	var idx otlpwire.Index
	var u ptrace.ProtoUnmarshaler
	td, derr := u.UnmarshalTraces(data)
	err := idx.ParseChecked(data, otlpwire.Limits{MaxRecords: 1 << 20, MaxSpanBytes: 1 << 30})
	if errors.Is(err, otlpwire.ErrInvalid) {
		require.Error(t, derr, "the check refused a request pdata decodes: %v", err)
	}
	if err != nil {
		return false
	}
	require.NoError(t, derr, "the check took a request pdata refuses")
	p, err := splitIndex(&idx, rg, 1<<30)
	require.NoError(t, err)
	total := p.zero
	for e, first := range p.first {
		if first < 0 {
			continue
		}
		part, err := u.UnmarshalTraces(idx.AppendEncoding(nil, first))
		require.NoError(t, err)
		require.Equal(t, p.spans[e], part.SpanCount())
		total += part.SpanCount()
		rss := part.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				spans := rss.At(i).ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					require.Equal(t, e, rg.OwnerIndex(spans.At(k).TraceID()))
				}
			}
		}
	}
	require.Equal(t, td.SpanCount(), total)
	return true
}
