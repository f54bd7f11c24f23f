package otlpwire

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

var wideLimits = Limits{MaxRecords: 1 << 20, MaxSpanBytes: 1 << 30}

// richRequest uses every field of the trace messages pdata knows:
// attributes of each value type (nested), events, links, status, flags,
// entity refs, schema URLs.
func richRequest(rnd *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range 1 + rnd.IntN(3) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		rs.Resource().Attributes().PutStr("service.name", "svc")
		rs.Resource().Attributes().PutInt("pod", int64(r))
		rs.Resource().SetDroppedAttributesCount(1)
		for range 1 + rnd.IntN(2) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.SetSchemaUrl("s")
			ss.Scope().SetName("lib")
			ss.Scope().SetVersion("1.0")
			ss.Scope().Attributes().PutBool("b", true)
			for range 1 + rnd.IntN(4) {
				sp := ss.Spans().AppendEmpty()
				sp.SetTraceID(pcommon.TraceID{byte(rnd.IntN(256)), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
				sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, byte(rnd.IntN(256))})
				sp.SetParentSpanID(pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
				sp.TraceState().FromRaw("ot=th:8")
				sp.SetFlags(1)
				sp.SetName("GET /x")
				sp.SetKind(ptrace.SpanKindServer)
				sp.SetStartTimestamp(1)
				sp.SetEndTimestamp(2)
				a := sp.Attributes()
				a.PutStr("s", "v")
				a.PutInt("i", -3)
				a.PutDouble("d", 1.5)
				a.PutBool("b", true)
				a.PutEmptyBytes("y").FromRaw([]byte{1, 2})
				arr := a.PutEmptySlice("arr")
				arr.AppendEmpty().SetStr("x")
				arr.AppendEmpty().SetEmptyMap().PutInt("deep", 1)
				a.PutEmptyMap("m").PutEmptySlice("in").AppendEmpty().SetInt(4)
				sp.SetDroppedAttributesCount(2)
				ev := sp.Events().AppendEmpty()
				ev.SetName("exception")
				ev.SetTimestamp(3)
				ev.Attributes().PutStr("exception.message", "boom")
				ev.SetDroppedAttributesCount(1)
				sp.SetDroppedEventsCount(1)
				l := sp.Links().AppendEmpty()
				l.SetTraceID(pcommon.TraceID{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
				l.SetSpanID(pcommon.SpanID{7, 7, 7, 7, 7, 7, 7, 7})
				l.TraceState().FromRaw("a=b")
				l.Attributes().PutStr("k", "v")
				l.SetFlags(1)
				sp.SetDroppedLinksCount(1)
				sp.Status().SetCode(ptrace.StatusCodeError)
				sp.Status().SetMessage("err")
			}
		}
	}
	return td
}

// checkAgainstPdata parses data checked and asserts that the check agrees
// with pdata's decoder: what it takes, pdata decodes; what it calls
// invalid (but for nesting), pdata refuses. It returns the check's error.
func checkAgainstPdata(t *testing.T, data []byte) error {
	var w Index
	err := w.ParseChecked(data, wideLimits)
	var u ptrace.ProtoUnmarshaler
	td, derr := u.UnmarshalTraces(data)
	switch {
	case err == nil:
		require.NoError(t, derr, "the check took a request pdata refuses")
		require.Equal(t, td.SpanCount(), w.NumSpans())
	case errors.Is(err, ErrInvalid) && derr == nil:
		t.Fatalf("the check refused a request pdata decodes: %v", err)
	}
	return err
}

// Valid requests of every shape are taken by the check.
func TestCheckedParseTakesWhatPdataWrites(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var m ptrace.ProtoMarshaler
	for range 200 {
		b, err := m.MarshalTraces(richRequest(rnd))
		require.NoError(t, err)
		require.NoError(t, checkAgainstPdata(t, b))
	}
}

// Requests corrupted at random (bytes flipped, cut, spliced): the check
// takes none that pdata refuses. The index alone (before the check) took
// such requests and split them into parts no sampler could decode.
func TestCheckedParseRefusesWhatPdataRefuses(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	var m ptrace.ProtoMarshaler
	taken, invalid, indexOnly := 0, 0, 0
	for range 5000 {
		b, err := m.MarshalTraces(richRequest(rnd))
		require.NoError(t, err)
		switch rnd.IntN(3) {
		case 0:
			for range 1 + rnd.IntN(3) {
				b[rnd.IntN(len(b))] ^= byte(1 + rnd.IntN(255))
			}
		case 1:
			b = b[:rnd.IntN(len(b)+1)]
		default:
			at := rnd.IntN(len(b) + 1)
			b = append(b[:at:at], b[rnd.IntN(len(b)+1):]...)
		}
		switch err := checkAgainstPdata(t, b); {
		case err == nil:
			taken++
		case errors.Is(err, ErrInvalid):
			invalid++
		}
		var w Index
		var u ptrace.ProtoUnmarshaler
		if _, derr := u.UnmarshalTraces(b); derr != nil && w.Parse(b) == nil {
			indexOnly++
		}
	}
	t.Logf("taken %d, invalid %d; the unchecked index took %d that pdata refuses", taken, invalid, indexOnly)
	assert.Greater(t, taken, 200)
	assert.Greater(t, invalid, 1500)
	assert.Greater(t, indexOnly, 100, "the unchecked index is what let them through")
}

// Each class of bad input is named by the check.
func TestCheckedParseClasses(t *testing.T) {
	span := func(fields ...[]byte) []byte {
		var body []byte
		for _, f := range fields {
			body = append(body, f...)
		}
		s := protowire.AppendTag(nil, 2, protowire.BytesType)
		s = protowire.AppendBytes(s, body)
		ss := protowire.AppendTag(nil, 2, protowire.BytesType)
		ss = protowire.AppendBytes(ss, s)
		rs := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(rs, ss)
	}
	id := func(n protowire.Number, size int) []byte {
		b := protowire.AppendTag(nil, n, protowire.BytesType)
		return protowire.AppendBytes(b, make([]byte, size))
	}
	tid := id(1, 16)
	nested := protowire.AppendTag(nil, 1, protowire.BytesType)
	nested = protowire.AppendBytes(nested, nil) // string_value ""
	for range MaxNesting + 2 {
		arr := protowire.AppendTag(nil, 1, protowire.BytesType) // ArrayValue.values
		arr = protowire.AppendBytes(arr, nested)
		nested = protowire.AppendTag(nil, 5, protowire.BytesType) // AnyValue.array_value
		nested = protowire.AppendBytes(nested, arr)
	}
	kv := protowire.AppendTag(nil, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, nested)
	deepAttr := protowire.AppendTag(nil, 9, protowire.BytesType)
	deepAttr = protowire.AppendBytes(deepAttr, kv)
	for name, c := range map[string]struct {
		req  []byte
		want error
	}{
		"valid":                         {span(tid, id(2, 8)), nil},
		"unknown field":                 {span(tid, protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 5)), nil},
		"short trace ID":                {span(id(1, 5)), ErrInvalid},
		"short span ID":                 {span(tid, id(2, 3)), ErrInvalid},
		"long parent span ID":           {span(tid, id(4, 9)), ErrInvalid},
		"name as a varint":              {span(tid, protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1)), ErrInvalid},
		"start time as a varint":        {span(tid, protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1)), ErrInvalid},
		"flags as fixed64":              {span(tid, protowire.AppendFixed64(protowire.AppendTag(nil, 16, protowire.Fixed64Type), 1)), ErrInvalid},
		"attribute value nested deeply": {span(tid, deepAttr), ErrInvalid},
		"resource as a varint":          {append(protowire.AppendTag(nil, 1, protowire.BytesType), 4, 0x08, 0x01, 0x12, 0x00), ErrInvalid},
		"resource spans as a varint":    {[]byte{0x08, 0x01}, ErrInvalid},
		"length past the end":           {[]byte{0x0a, 0x7f, 0x12}, ErrInvalid},
		"a group":                       {span(tid, []byte{0x9b, 0x06, 0x9c, 0x06}), ErrUnsupported},
	} {
		var w Index
		err := w.ParseChecked(c.req, wideLimits)
		if c.want == nil {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorIs(t, err, c.want, name)
		}
		if name != "attribute value nested deeply" {
			_ = checkAgainstPdata(t, c.req)
		}
	}
}

// A flood of empty records is cut at MaxRecords, before the index grows
// past it; a span over MaxSpanBytes is refused.
func TestCheckedParseLimits(t *testing.T) {
	var flood []byte
	for range 100_000 {
		flood = append(flood, 0x0a, 0x00)
	}
	var w Index
	err := w.ParseChecked(flood, Limits{MaxRecords: 1000, MaxSpanBytes: 1 << 20})
	require.ErrorIs(t, err, ErrTooLarge)
	assert.LessOrEqual(t, len(w.rs), 1001)
	assert.Less(t, w.MemoryBytes(), 1<<20, "the index stopped growing at the limit")

	var m ptrace.ProtoMarshaler
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1})
	sp.Attributes().PutStr("big", string(make([]byte, 4096)))
	b, _ := m.MarshalTraces(td)
	require.ErrorIs(t, w.ParseChecked(b, Limits{MaxRecords: 10, MaxSpanBytes: 4000}), ErrTooLarge)
	require.NoError(t, w.ParseChecked(b, Limits{MaxRecords: 10, MaxSpanBytes: 5000}))
}

// What FuzzCheckedParse checks, on any input: no panic, and the check
// agrees with pdata.
func FuzzCheckedParse(f *testing.F) {
	rnd := rand.New(rand.NewPCG(5, 6))
	var m ptrace.ProtoMarshaler
	for range 4 {
		b, _ := m.MarshalTraces(richRequest(rnd))
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) { _ = checkAgainstPdata(t, data) })
}
