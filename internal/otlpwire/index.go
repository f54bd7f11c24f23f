package otlpwire // import "github.com/otelcol-cost/otelcol-cost/internal/otlpwire"

import (
	"errors"
	"fmt"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpsize"
)

// Index is a request's OTLP encoding, indexed: where each ResourceSpans,
// ScopeSpans and span record lies in it. The encoding of a subset of its
// spans is assembled from it by copying records, so a request is marshaled
// once whatever the number of subsets cut from it (pdata marshals whole
// messages only; re-encoding each subset copied every span into a new
// ptrace.Traces first, and re-encoded its resource).
//
// A subset is a chain of spans, linked with Link in request order, named by
// its first span.
type Index struct {
	buf   []byte
	rs    []rsRecord
	ss    []ssRecord
	spans []spanRecord
	// limits is set while ParseChecked indexes a peer's request.
	limits *Limits
}

// Limits are what ParseChecked takes from a peer.
type Limits struct {
	// MaxRecords bounds the ResourceSpans, ScopeSpans and spans of one
	// request, and so the index's memory (a flood of empty records
	// would otherwise index to many times the request's size).
	MaxRecords int
	// MaxSpanBytes bounds one span's record: no request to a sampler
	// could hold a larger one.
	MaxSpanBytes int
}

// ErrTooLarge: the request is over a limit of ParseChecked.
var ErrTooLarge = errors.New("request over the router's limits")

// Range is a byte range of an encoding.
type Range struct{ From, To int }

// Len is the range's length.
func (r Range) Len() int { return r.To - r.From }

type rsRecord struct {
	// record is the whole record (tag and length included); head and tail
	// are its fields before and after its ScopeSpans.
	record, head, tail Range
	firstSS, numSS     int
	// whole: every span in it belongs to one subset, which takes the
	// record as it is.
	whole bool
}

type ssRecord struct {
	head, tail Range
	rs         int32
	firstSpan  int
	numSpans   int
	// largestSpan is its largest span record's size.
	largestSpan int
}

type spanRecord struct {
	Range
	ss int32
	// next is the subset's next span, -1 after its last.
	next int32
}

// Field numbers in TracesData, ResourceSpans and ScopeSpans.
const (
	resourceSpansField protowire.Number = 1
	scopeSpansField    protowire.Number = 2
	spansField         protowire.Number = 2
)

// ErrUnexpectedEncoding: the encoding is not laid out as pdata writes it.
var ErrUnexpectedEncoding = errors.New("unexpected layout of the request's OTLP encoding")

// Marshal encodes td and indexes the encoding.
func (w *Index) Marshal(td ptrace.Traces) error {
	var m ptrace.ProtoMarshaler
	w.buf, _ = m.MarshalTraces(td)
	return w.index()
}

// Parse indexes buf, an encoded TracesData; buf must stay unchanged while
// the index is used.
func (w *Index) Parse(buf []byte) error {
	w.buf = buf
	return w.index()
}

// ParseChecked indexes buf, a peer's request, and checks it as pdata
// would decode it (ErrInvalid: pdata would refuse it; ErrUnsupported: only
// decoding can tell) and against lim (ErrTooLarge). Only requests that
// pdata decodes are indexed: a part cut from one always decodes.
func (w *Index) ParseChecked(buf []byte, lim Limits) error {
	w.buf, w.limits = buf, &lim
	defer func() { w.limits = nil }()
	return w.index()
}

// Reset lets the encoding go; the index's room is kept for the next one.
func (w *Index) Reset() { w.buf = nil }

// MemoryBytes is what the index's records take (their room, kept between
// requests when pooled).
func (w *Index) MemoryBytes() int {
	return cap(w.rs)*int(unsafe.Sizeof(rsRecord{})) + cap(w.ss)*int(unsafe.Sizeof(ssRecord{})) +
		cap(w.spans)*int(unsafe.Sizeof(spanRecord{}))
}

// Bytes is the indexed encoding.
func (w *Index) Bytes() []byte { return w.buf }

// ResourceSpans is how many ResourceSpans the request has.
func (w *Index) ResourceSpans() int { return len(w.rs) }

// ScopeSpans is ResourceSpans rs's first ScopeSpans (numbered over the
// request) and how many it has.
func (w *Index) ScopeSpans(rs int) (first, n int) { return w.rs[rs].firstSS, w.rs[rs].numSS }

// Spans is ScopeSpans ss's first span (numbered over the request) and how
// many it has.
func (w *Index) Spans(ss int) (first, n int) { return w.ss[ss].firstSpan, w.ss[ss].numSpans }

// SetWhole marks ResourceSpans rs as belonging to one subset, which then
// copies the record as it is.
func (w *Index) SetWhole(rs int, whole bool) { w.rs[rs].whole = whole }

// Link makes span next follow span last in their subset.
func (w *Index) Link(last, next int32) { w.spans[last].next = next }

func (w *Index) index() error {
	w.rs, w.ss, w.spans = w.rs[:0], w.ss[:0], w.spans[:0]
	for pos := 0; pos < len(w.buf); {
		if err := w.checkOther(pos, len(w.buf), &tracesData); err != nil {
			return err
		}
		num, typ, body, end := w.field(pos, len(w.buf))
		if end < 0 {
			return ErrUnexpectedEncoding
		}
		if num == resourceSpansField && typ == protowire.BytesType {
			if err := w.indexResourceSpans(pos, body, end); err != nil {
				return err
			}
		}
		pos = end
	}
	return nil
}

// checkOther checks, when parsing checked, the field at pos of a message m
// whose body ends at limit (of a child record, which the walk goes into,
// only its wire type and length).
func (w *Index) checkOther(pos, limit int, m *message) error {
	if w.limits == nil {
		return nil
	}
	_, err := checkField(w.buf[:limit], pos, m, 0)
	return err
}

// checkRecords checks, when parsing checked, that the records so far are
// within the limits.
func (w *Index) checkRecords() error {
	if w.limits == nil {
		return nil
	}
	if len(w.rs)+len(w.ss)+len(w.spans) > w.limits.MaxRecords {
		return fmt.Errorf("%w: more than %d ResourceSpans, ScopeSpans and spans in one request", ErrTooLarge, w.limits.MaxRecords)
	}
	return nil
}

// checkSpan checks, when parsing checked, the span record buf[from:to]
// whose body starts at body: its size, and that pdata decodes it.
func (w *Index) checkSpan(from, body, to int) error {
	if w.limits == nil {
		return nil
	}
	if to-from > w.limits.MaxSpanBytes {
		return fmt.Errorf("%w: a span of %d bytes, over the %d bytes a request to a sampler may hold", ErrTooLarge, to-from, w.limits.MaxSpanBytes)
	}
	return checkMessage(w.buf[:to], body, &spanMsg, 0)
}

func (w *Index) indexResourceSpans(from, body, to int) error {
	rs := rsRecord{record: Range{from, to}, firstSS: len(w.ss)}
	var err error
	rs.head, rs.tail, err = w.children(body, to, scopeSpansField, &resourceHeadMsg, func(_, body, to int) error {
		ss := ssRecord{rs: int32(len(w.rs)), firstSpan: len(w.spans)}
		var err error
		ss.head, ss.tail, err = w.children(body, to, spansField, &scopeSpansHeadMsg, func(from, body, to int) error {
			if err := w.checkSpan(from, body, to); err != nil {
				return err
			}
			w.spans = append(w.spans, spanRecord{Range: Range{from, to}, ss: int32(len(w.ss)), next: -1})
			ss.largestSpan = max(ss.largestSpan, to-from)
			return w.checkRecords()
		})
		ss.numSpans = len(w.spans) - ss.firstSpan
		w.ss = append(w.ss, ss)
		if err != nil {
			return err
		}
		return w.checkRecords()
	})
	rs.numSS = len(w.ss) - rs.firstSS
	w.rs = append(w.rs, rs)
	if err != nil {
		return err
	}
	return w.checkRecords()
}

// children calls child for each record of field n in the message body
// buf[from:to]; head and tail are the body's other fields, before and after
// those records (pdata writes them so: never between). When parsing
// checked, the other fields are checked as fields of m.
func (w *Index) children(from, to int, n protowire.Number, m *message, child func(from, body, to int) error) (head, tail Range, err error) {
	head, tail = Range{from, to}, Range{to, to}
	seen, otherAfter := false, false
	for pos := from; pos < to; {
		if err := w.checkOther(pos, to, m); err != nil {
			return head, tail, err
		}
		num, typ, body, end := w.field(pos, to)
		if end < 0 {
			return head, tail, ErrUnexpectedEncoding
		}
		if num != n || typ != protowire.BytesType {
			if seen && !otherAfter {
				otherAfter, tail.From = true, pos
			}
			pos = end
			continue
		}
		if otherAfter {
			return head, tail, ErrUnexpectedEncoding
		}
		if !seen {
			seen, head.To = true, pos
		}
		if err := child(pos, body, end); err != nil {
			return head, tail, err
		}
		pos = end
	}
	return head, tail, nil
}

// field reads the field at pos: its number and type, where a length-
// delimited field's body starts, and where the field ends (-1: malformed).
func (w *Index) field(pos, limit int) (protowire.Number, protowire.Type, int, int) {
	b := w.buf[pos:limit]
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, 0, -1
	}
	if typ == protowire.BytesType {
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return 0, 0, 0, -1
		}
		return num, typ, pos + n + m - len(v), pos + n + m
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, 0, -1
	}
	return num, typ, pos + n, pos + n + m
}

func (w *Index) bytes(r Range) []byte { return w.buf[r.From:r.To] }

func (w *Index) rsOf(s int32) int32 { return w.ss[w.spans[s].ss].rs }

// EncodedSize is the size of the encoding of the subset whose first span
// is first.
func (w *Index) EncodedSize(first int32) int {
	size := 0
	for s := first; s >= 0; {
		rs := &w.rs[w.rsOf(s)]
		if rs.whole {
			size += rs.record.Len()
			s = w.skipResourceSpans(s)
			continue
		}
		var n int
		n, s = w.resourceSpansBody(s)
		size += otlpsize.Field(n)
	}
	return size
}

// AppendEncoding appends the encoding of the subset whose first span is
// first: a TracesData of its spans, grouped as in the request.
func (w *Index) AppendEncoding(dst []byte, first int32) []byte {
	for s := first; s >= 0; {
		r := w.rsOf(s)
		rs := &w.rs[r]
		if rs.whole {
			dst = append(dst, w.bytes(rs.record)...)
			s = w.skipResourceSpans(s)
			continue
		}
		n, _ := w.resourceSpansBody(s)
		dst = appendMessageHeader(dst, resourceSpansField, n)
		dst = append(dst, w.bytes(rs.head)...)
		for s >= 0 && w.rsOf(s) == r {
			ss := w.spans[s].ss
			m, _ := w.scopeSpansBody(s)
			dst = appendMessageHeader(dst, scopeSpansField, m)
			dst = append(dst, w.bytes(w.ss[ss].head)...)
			for ; s >= 0 && w.spans[s].ss == ss; s = w.spans[s].next {
				dst = append(dst, w.bytes(w.spans[s].Range)...)
			}
			dst = append(dst, w.bytes(w.ss[ss].tail)...)
		}
		dst = append(dst, w.bytes(rs.tail)...)
	}
	return dst
}

// appendMessageHeader appends the tag and length of field n, a message
// whose body is size bytes.
func appendMessageHeader(dst []byte, n protowire.Number, size int) []byte {
	dst = protowire.AppendTag(dst, n, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(size))
}

// resourceSpansBody sizes the body of a ResourceSpans holding the subset's
// spans from s on that share s's ResourceSpans; next is the subset's first
// span past them.
func (w *Index) resourceSpansBody(s int32) (size int, next int32) {
	r := w.rsOf(s)
	size = w.rs[r].head.Len() + w.rs[r].tail.Len()
	for s >= 0 && w.rsOf(s) == r {
		var n int
		n, s = w.scopeSpansBody(s)
		size += otlpsize.Field(n)
	}
	return size, s
}

func (w *Index) scopeSpansBody(s int32) (size int, next int32) {
	ss := w.spans[s].ss
	size = w.ss[ss].head.Len() + w.ss[ss].tail.Len()
	for ; s >= 0 && w.spans[s].ss == ss; s = w.spans[s].next {
		size += w.spans[s].Len()
	}
	return size, s
}

func (w *Index) skipResourceSpans(s int32) int32 {
	r := w.rsOf(s)
	for s >= 0 && w.rsOf(s) == r {
		s = w.spans[s].next
	}
	return s
}

// LargestPart bounds from above the encoding of the smallest subset that
// holds ScopeSpans ss's largest span: that span with its resource and
// scope.
func (w *Index) LargestPart(ss int) int {
	const header = 6 // a tag and a 5-byte length
	r := &w.ss[ss]
	rs := &w.rs[r.rs]
	return r.largestSpan + r.head.Len() + r.tail.Len() + rs.head.Len() + rs.tail.Len() + 2*header
}

// ChainSpans is how many spans the subset whose first span is first has.
func (w *Index) ChainSpans(first int32) int {
	n := 0
	for s := first; s >= 0; s = w.spans[s].next {
		n++
	}
	return n
}

// Cut breaks the subset whose first span is first into subsets whose
// encodings are each at most maxBytes (a span that alone is larger makes a
// subset alone), and returns their first spans. Sizes are bounded from
// above: the records, and their ResourceSpans' and ScopeSpans' fields with
// the longest header each.
func (w *Index) Cut(first int32, maxBytes int) []int32 {
	firsts := []int32{first}
	const header = 6 // a tag and a 5-byte length
	size, rs, ss := 0, int32(-1), int32(-1)
	for s, prev := first, int32(-1); s >= 0; prev, s = s, w.spans[s].next {
		add := w.spans[s].Len()
		if r := w.rsOf(s); r != rs {
			add += w.rs[r].head.Len() + w.rs[r].tail.Len() + header
		}
		if w.spans[s].ss != ss {
			add += w.ss[w.spans[s].ss].head.Len() + w.ss[w.spans[s].ss].tail.Len() + header
		}
		if prev >= 0 && size+add > maxBytes {
			if r := w.rsOf(s); r == rs {
				w.rs[r].whole = false // its spans are now in two subsets
			}
			w.spans[prev].next = -1
			firsts = append(firsts, s)
			size = 0
			add = w.spans[s].Len() + w.rs[w.rsOf(s)].head.Len() + w.rs[w.rsOf(s)].tail.Len() + header +
				w.ss[w.spans[s].ss].head.Len() + w.ss[w.spans[s].ss].tail.Len() + header
		}
		size += add
		rs, ss = w.rsOf(s), w.spans[s].ss
	}
	return firsts
}

// spanTraceIDField is Span.trace_id.
const spanTraceIDField protowire.Number = 1

// ErrBadTraceID: a span's trace_id is not 16 bytes (pdata refuses such a
// request whole).
var ErrBadTraceID = errors.New("a span's trace_id is not 16 bytes")

// NumSpans is how many spans the request has.
func (w *Index) NumSpans() int { return len(w.spans) }

// TraceID reads span s's trace ID from its record without decoding the
// span: zero when the field is absent or empty (as pdata reads it),
// ErrBadTraceID when it has another length than 16 (pdata refuses it).
func (w *Index) TraceID(s int) (id [16]byte, err error) {
	r := w.spans[s].Range
	_, _, body, end := w.field(r.From, r.To)
	for pos := body; pos < end; {
		num, typ, v, next := w.field(pos, end)
		if next < 0 {
			return id, ErrUnexpectedEncoding
		}
		if num == spanTraceIDField && typ == protowire.BytesType {
			// The last occurrence wins, as protobuf decoding has it; pdata
			// writes a zero ID as an empty field.
			switch next - v {
			case len(id):
				copy(id[:], w.buf[v:next])
			case 0:
				id = [16]byte{}
			default:
				return id, ErrBadTraceID
			}
		}
		pos = next
	}
	return id, nil
}
