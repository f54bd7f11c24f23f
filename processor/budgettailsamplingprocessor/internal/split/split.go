// Package split cuts an OTLP request into one fragment per trace: each
// fragment's spans summarized for the policy as they are read (errors, root,
// duration, names, incoming th and rv, rule matches, a fingerprint) and its
// encoding assembled from the request's, encoded once (otlpwire).
//
// It owns a request's per-trace view and the reading of span fields. It
// must not know where fragments go: the buffer, shards, decisions and
// handoff are the caller's.
package split // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/names"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/rules"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

const (
	serviceNameKey = "service.name"
	httpStatusKey  = "http.response.status_code"
	// UnknownService names traces whose resource has no service.name.
	UnknownService = "unknown"
	// GroupBySpanName is the group_by pseudo-key of the span's name.
	GroupBySpanName = "span.name"
)

// Settings say how spans are read.
type Settings struct {
	// HTTPServerErrors also counts a SERVER span with
	// http.response.status_code ≥ 500 as an error.
	HTTPServerErrors bool
	// GroupBy builds a trace's outlier group key (see traceNames).
	GroupBy []string
	// Keys build a trace's fairness key (ParseKeys); New makes none
	// [service.name].
	Keys  []Key
	Rules *rules.Set
	Names *names.Table
}

// Splitter splits requests; safe for concurrent use. Its rules and keys
// may change while it runs (SetRules, SetKeys): a request is split with
// those it started with.
type Splitter struct {
	s     Settings
	rules atomic.Pointer[rules.Set]
	keys  atomic.Pointer[[]Key]
}

// New returns a splitter.
func New(s Settings) *Splitter {
	x := &Splitter{s: s}
	x.SetRules(s.Rules)
	x.SetKeys(s.Keys)
	return x
}

// SetRules matches spans against rs from the next request on.
func (x *Splitter) SetRules(rs *rules.Set) { x.rules.Store(rs) }

// SetKeys builds fairness keys with keys (nil: service.name) from the
// next request on.
func (x *Splitter) SetKeys(keys []Key) {
	if len(keys) == 0 {
		keys = []Key{{kind: keyAttribute, attr: serviceNameKey}}
	}
	x.keys.Store(&keys)
}

// Bytes writing th adds to a span, estimated for the budget: "ot=th:" and a
// threshold of a few hex digits, plus the field's tag and length when the
// span had no tracestate; ";th:…" when it had one.
const (
	stampBytesFresh    = 12
	stampBytesExisting = 8
)

// Fragment is the part of one trace that arrived in one request.
type Fragment struct {
	traceinfo.Summary
	traceinfo.Names
	ID pcommon.TraceID
	// Encoded is the fragment's OTLP encoding, once the caller set it
	// (Request.AppendEncoding); Bytes its size (what the budget counts),
	// whatever the buffer holds of it.
	Encoded []byte
	Bytes   int64
	// first and last are the fragment's first and last spans in the
	// request's wire index, linked in request order.
	first, last int32
	// namesFrom is the span whose names the fragment takes (see summary).
	namesFrom spanAt
}

// Request is a request split into fragments, one per trace; pooled, with
// its wire index, so that splitting allocates little beyond the encodings.
type Request struct {
	wire  otlpwire.Index
	Frags []Fragment
	byID  map[pcommon.TraceID]int32
	// Invalid counts the request's invalid spans by cause; RuleErrors the
	// rule conditions that failed at runtime, per rule (nil: none).
	Invalid    [traceinfo.NumInvalidCauses]int64
	RuleErrors []int64
}

// maxPooledTraces is the most traces a pooled request's map keeps room for.
const maxPooledTraces = 4096

var requestPool = sync.Pool{New: func() any { return &Request{byID: map[pcommon.TraceID]int32{}} }}

// fragmentOf returns the index of id's fragment, adding it if new.
func (r *Request) fragmentOf(id pcommon.TraceID) int32 {
	if i, ok := r.byID[id]; ok {
		return i
	}
	i := int32(len(r.Frags))
	r.Frags = append(r.Frags, Fragment{ID: id, first: -1, last: -1})
	r.byID[id] = i
	return i
}

// link appends span s of the wire index to f.
func (r *Request) link(f *Fragment, s int32) {
	if f.last < 0 {
		f.first = s
	} else {
		r.wire.Link(f.last, s)
	}
	f.last = s
}

// Release returns r to the pool; nothing of it may be used afterwards but
// the fragments' encodings, which are the caller's.
func (r *Request) Release() {
	clear(r.Frags)
	r.Frags = r.Frags[:0]
	r.Invalid = [traceinfo.NumInvalidCauses]int64{}
	r.RuleErrors = nil
	if len(r.byID) > maxPooledTraces {
		// Clearing costs the map's capacity: do not make every later
		// request pay for one large one.
		r.byID = make(map[pcommon.TraceID]int32)
	} else {
		clear(r.byID)
	}
	r.wire.Reset()
	requestPool.Put(r)
}

// AppendEncoding appends f's OTLP encoding, copied out of the request's.
func (r *Request) AppendEncoding(dst []byte, f *Fragment) []byte {
	return r.wire.AppendEncoding(dst, f.first)
}

// InSlab reports whether the fragment carries its trace's root: such
// fragments of a request may share one allocation, as their traces are all
// decided within decision_wait_after_root.
func (f *Fragment) InSlab() bool { return f.HasRoot }

// splitter carries one request's per-span state: the last tracestate parsed
// (the spans of a trace share one) and the invalid-input tallies.
type splitter struct {
	s       *Settings
	rules   *rules.Set
	keys    []Key
	lastTS  string
	lastS   otep235.Sampling
	lastBad bool
	invalid *[traceinfo.NumInvalidCauses]int64
	// ruleErrs counts rule conditions that failed at runtime, per rule.
	ruleErrs []int64
	// key is where name keys are built, to be looked up without allocating;
	// fair holds the fairness key meanwhile.
	key, fair []byte
}

// start is one request's splitter, with the rules and keys of now.
func (x *Splitter) start() splitter {
	return splitter{s: &x.s, rules: x.rules.Load(), keys: *x.keys.Load()}
}

// spanAt is a span's place in its request.
type spanAt struct{ rs, ss, span int32 }

// Split cuts td into one fragment per trace, each summarized for the
// policy and sized; td is left as it was. The caller releases the request.
// pdata wrote the encoding: a layout the index does not expect is a bug,
// reported as otlpwire.ErrUnexpectedEncoding.
func (x *Splitter) Split(td ptrace.Traces) (*Request, error) {
	req := requestPool.Get().(*Request)
	w := &req.wire
	rss := td.ResourceSpans()
	refuse := func() (*Request, error) {
		req.Release()
		return nil, otlpwire.ErrUnexpectedEncoding
	}
	if err := w.Marshal(td); err != nil || w.ResourceSpans() != rss.Len() {
		return refuse()
	}
	sp := x.start()
	sp.invalid = &req.Invalid
	if sp.rules.HasSpanRules() {
		sp.ruleErrs = make([]int64, sp.rules.Len())
	}
	cur := int32(-1)
	var curID pcommon.TraceID
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		firstSS, numSS := w.ScopeSpans(i)
		missingService := !hasServiceName(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		if numSS != sss.Len() {
			return refuse()
		}
		// A ResourceSpans of one trace (a client batching per trace) is
		// copied into its fragment as one record. Contrib's loadbalancing
		// exporter (v0.161) does not send these: it keeps a source
		// ScopeSpans' spans for one sampler together, many traces in one.
		oneTrace, found := true, false
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			first, numSpans := w.Spans(firstSS + j)
			spans := ss.Spans()
			if numSpans != spans.Len() {
				return refuse()
			}
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				id := span.TraceID()
				if id.IsEmpty() {
					sp.invalid[traceinfo.InvalidZeroTraceID]++
					oneTrace = false
					continue
				}
				if found && id != curID {
					oneTrace = false
				}
				if cur < 0 || id != curID {
					cur, curID = req.fragmentOf(id), id
				}
				found = true
				f := &req.Frags[cur]
				req.link(f, int32(first+k))
				if missingService {
					sp.invalid[traceinfo.InvalidMissingServiceName]++
				}
				sp.summarize(f, rs, ss, span, spanAt{int32(i), int32(j), int32(k)})
			}
		}
		w.SetWhole(i, oneTrace && found)
	}
	if sp.hasRuleErrors() {
		req.RuleErrors = sp.ruleErrs
	}
	for i := range req.Frags {
		f := &req.Frags[i]
		f.Bytes = int64(w.EncodedSize(f.first))
		rs := rss.At(int(f.namesFrom.rs))
		f.Names = sp.traceNames(rs, rs.ScopeSpans().At(int(f.namesFrom.ss)).Spans().At(int(f.namesFrom.span)))
	}
	return req, nil
}

// hasRuleErrors reports whether a rule condition failed in this request.
func (sp *splitter) hasRuleErrors() bool {
	for _, n := range sp.ruleErrs {
		if n != 0 {
			return true
		}
	}
	return false
}

// summarize folds a span into its fragment's summary. The fragment's names
// are looked up once it is complete, from the span that gives them (at).
func (sp *splitter) summarize(f *Fragment, rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, at spanAt) {
	f.Spans++
	id := span.SpanID()
	f.FP += mix64(binary.LittleEndian.Uint64(id[:]))
	sp.rules.MatchSpan(rs, ss, span, &f.Rules, sp.ruleErrs)
	if !f.HasError && sp.isError(span) {
		f.HasError = true
	}
	sp.readTraceState(f, span)
	start, end := span.StartTimestamp(), span.EndTimestamp()
	var dur time.Duration
	if end >= start {
		dur = time.Duration(end - start)
	} else {
		sp.invalid[traceinfo.InvalidEndBeforeStart]++
	}
	switch {
	case span.ParentSpanID().IsEmpty():
		if !f.HasRoot {
			f.HasRoot = true
			f.Dur, f.namesFrom = dur, at
		}
	case !f.HasRoot && (f.Spans == 1 || dur > f.Dur):
		f.Dur, f.namesFrom = dur, at
	}
}

// readTraceState folds the span's OTEP 235 fields into the fragment: the
// largest consistent th (the probability the trace arrived with) and rv.
func (sp *splitter) readTraceState(f *Fragment, span ptrace.Span) {
	ts := span.TraceState().AsRaw()
	if ts == "" {
		f.StampBytes += stampBytesFresh
		return
	}
	f.StampBytes += stampBytesExisting
	if ts != sp.lastTS {
		var problem otep235.Problem
		sp.lastTS = ts
		sp.lastS, problem = otep235.Parse(ts)
		sp.lastBad = problem != otep235.OK
	}
	if sp.lastBad {
		sp.invalid[traceinfo.InvalidUnparseableTracestate]++
		return
	}
	s, problem := sp.lastS.Consistent(span.TraceID())
	if problem == otep235.Inconsistent {
		sp.invalid[traceinfo.InvalidInconsistentThreshold]++
	}
	if s.HasThreshold && (!f.HasTIn || sampling.ThresholdGreater(s.Threshold, f.TIn)) {
		f.TIn, f.HasTIn = s.Threshold, true
	}
	if s.HasRandomness && !f.HasRnd {
		f.Rnd, f.HasRnd = s.Randomness, true
	}
}

// isError: status ERROR, or with http_server_errors a SERVER span whose
// http.response.status_code (an int or a numeric string) is ≥ 500.
func (sp *splitter) isError(span ptrace.Span) bool {
	if span.Status().Code() == ptrace.StatusCodeError {
		return true
	}
	if !sp.s.HTTPServerErrors || span.Kind() != ptrace.SpanKindServer {
		return false
	}
	v, ok := span.Attributes().Get(httpStatusKey)
	if !ok {
		return false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int() >= 500
	case pcommon.ValueTypeStr:
		code, err := strconv.Atoi(strings.TrimSpace(v.Str()))
		return err == nil && code >= 500
	case pcommon.ValueTypeDouble:
		return v.Double() >= 500
	}
	return false
}

// hasServiceName reports whether the resource names its service.
func hasServiceName(res pcommon.Map) bool {
	v, ok := res.Get(serviceNameKey)
	return ok && v.AsString() != ""
}

// traceNames are the interned fairness key and outlier group of span: the
// keys' values joined by "|", and the group_by values joined by 0x1f. Both
// are read from the resource first, then the span's attributes.
func (sp *splitter) traceNames(rs ptrace.ResourceSpans, span ptrace.Span) traceinfo.Names {
	res := rs.Resource().Attributes()
	fair := sp.fair[:0]
	for i, k := range sp.keys {
		if i > 0 {
			fair = append(fair, KeySeparator)
		}
		fair = k.appendValue(fair, res, span)
	}
	sp.fair = fair
	b := names.AppendPairKey(sp.key[:0], fair)
	for i, key := range sp.s.GroupBy {
		if i > 0 {
			b = append(b, 0x1f)
		}
		if key == GroupBySpanName {
			b = append(b, span.Name()...)
			continue
		}
		if v, ok := res.Get(key); ok {
			b = appendValue(b, v)
		} else if v, ok := span.Attributes().Get(key); ok {
			b = appendValue(b, v)
		}
	}
	sp.key = b
	return sp.s.Names.Pair(b)
}

// appendServiceName appends the resource's service.name, or UnknownService.
func appendServiceName(b []byte, res pcommon.Map) []byte {
	n := len(b)
	if v, ok := res.Get(serviceNameKey); ok {
		b = appendValue(b, v)
	}
	if len(b) == n {
		b = append(b, UnknownService...)
	}
	return b
}

func appendValue(b []byte, v pcommon.Value) []byte {
	if v.Type() == pcommon.ValueTypeStr {
		return append(b, v.Str()...)
	}
	return append(b, v.AsString()...)
}

// mix64 is SplitMix64's finalizer: span IDs are random, but a sum of them
// must not cancel out for IDs that differ in few bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
