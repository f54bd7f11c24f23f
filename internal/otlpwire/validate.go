package otlpwire // import "github.com/otelcol-cost/otelcol-cost/internal/otlpwire"

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrInvalid: pdata would refuse the request (a known field of the wrong
// wire type, an ID of the wrong length, a truncated record), or it is
// hostile in a way decoding it would make worse (values nested deeper
// than MaxNesting). The receiver answers it InvalidArgument.
var ErrInvalid = errors.New("not a valid OTLP trace request")

// ErrUnsupported: valid protobuf the wire check does not judge (groups,
// the deprecated instrumentation_library_spans): decoding says whether it
// is OTLP.
var ErrUnsupported = errors.New("encoding the wire check does not judge")

// MaxNesting bounds how deep AnyValues nest (arrays and maps in
// attributes). pdata decodes them recursively without a bound: 4 MiB of
// nested arrays would take a goroutine stack of hundreds of MiB.
const MaxNesting = 64

// kind is what a field's wire type and content must be for pdata to
// decode it.
type kind uint8

const (
	kindUnknown kind = iota // not a field of the message: skipped as pdata skips it
	kindVarint
	kindI64
	kindI32
	kindLen  // string or bytes: any content (pdata does not check UTF-8)
	kindID16 // a trace ID: empty or 16 bytes
	kindID8  // a span ID: empty or 8 bytes
	kindMsg
	kindUnsupported // judged by decoding
)

type fieldRule struct {
	kind kind
	wire protowire.Type // what a known field's wire type must be
	size int            // an ID's length
	msg  *message
}

// message lists a message's fields by number; numbers past the list are
// unknown fields.
type message struct {
	name   string
	fields []fieldRule
}

// The OTLP trace messages as pdata v1.67 decodes them (its generated
// UnmarshalProto): every known field's wire type, and the IDs' lengths.
var (
	spanMsg, statusMsg, eventMsg, linkMsg          message
	keyValueMsg, anyValueMsg, arrayMsg, kvListMsg  message
	resourceMsg, entityRefMsg, scopeMsg            message
	resourceHeadMsg, scopeSpansHeadMsg, tracesData message
)

func rules(name string, m *message, r map[protowire.Number]fieldRule) {
	top := protowire.Number(0)
	for n := range r {
		top = max(top, n)
	}
	m.name = name
	m.fields = make([]fieldRule, top+1)
	for n, f := range r {
		switch f.kind {
		case kindVarint:
			f.wire = protowire.VarintType
		case kindI64:
			f.wire = protowire.Fixed64Type
		case kindI32:
			f.wire = protowire.Fixed32Type
		case kindID16:
			f.wire, f.size = protowire.BytesType, 16
		case kindID8:
			f.wire, f.size = protowire.BytesType, 8
		default:
			f.wire = protowire.BytesType
		}
		m.fields[n] = f
	}
}

func msg(m *message) fieldRule { return fieldRule{kind: kindMsg, msg: m} }

var (
	varint = fieldRule{kind: kindVarint}
	i64    = fieldRule{kind: kindI64}
	i32    = fieldRule{kind: kindI32}
	str    = fieldRule{kind: kindLen}
)

func init() {
	rules("AnyValue", &anyValueMsg, map[protowire.Number]fieldRule{1: str, 2: varint, 3: varint, 4: i64, 5: msg(&arrayMsg), 6: msg(&kvListMsg), 7: str, 8: varint})
	rules("ArrayValue", &arrayMsg, map[protowire.Number]fieldRule{1: msg(&anyValueMsg)})
	rules("KeyValueList", &kvListMsg, map[protowire.Number]fieldRule{1: msg(&keyValueMsg)})
	rules("KeyValue", &keyValueMsg, map[protowire.Number]fieldRule{1: str, 2: msg(&anyValueMsg), 3: varint})
	rules("EntityRef", &entityRefMsg, map[protowire.Number]fieldRule{1: str, 2: str, 3: str, 4: str})
	rules("Resource", &resourceMsg, map[protowire.Number]fieldRule{1: msg(&keyValueMsg), 2: varint, 3: msg(&entityRefMsg)})
	rules("InstrumentationScope", &scopeMsg, map[protowire.Number]fieldRule{1: str, 2: str, 3: msg(&keyValueMsg), 4: varint})
	rules("Status", &statusMsg, map[protowire.Number]fieldRule{2: str, 3: varint})
	rules("Span.Event", &eventMsg, map[protowire.Number]fieldRule{1: i64, 2: str, 3: msg(&keyValueMsg), 4: varint})
	rules("Span.Link", &linkMsg, map[protowire.Number]fieldRule{1: {kind: kindID16}, 2: {kind: kindID8}, 3: str, 4: msg(&keyValueMsg), 5: varint, 6: i32})
	rules("Span", &spanMsg, map[protowire.Number]fieldRule{
		1: {kind: kindID16}, 2: {kind: kindID8}, 3: str, 4: {kind: kindID8}, 5: str, 6: varint,
		7: i64, 8: i64, 9: msg(&keyValueMsg), 10: varint, 11: msg(&eventMsg), 12: varint,
		13: msg(&linkMsg), 14: varint, 15: msg(&statusMsg), 16: i32,
	})
	// The fields of a ResourceSpans and a ScopeSpans besides their
	// children, which the index walks itself (listed for their wire type).
	rules("ResourceSpans", &resourceHeadMsg, map[protowire.Number]fieldRule{1: msg(&resourceMsg), 2: str, 3: str, 1000: {kind: kindUnsupported}})
	rules("ScopeSpans", &scopeSpansHeadMsg, map[protowire.Number]fieldRule{1: msg(&scopeMsg), 2: str, 3: str})
	rules("TracesData", &tracesData, map[protowire.Number]fieldRule{1: str})
}

// consumeVarint reads a varint at buf[pos:] as pdata does (up to ten
// bytes, the excess bits of the tenth ignored); -1: unreadable.
func consumeVarint(buf []byte, pos int) (uint64, int) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if pos >= len(buf) {
			return 0, -1
		}
		b := buf[pos]
		pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, pos
		}
	}
	return 0, -1
}

// checkField checks one field of message m whose tag is at buf[pos:]:
// what pdata's decoder would say of it. It returns where the field ends.
func checkField(buf []byte, pos int, m *message, depth int) (int, error) {
	var tag uint64
	if pos < len(buf) && buf[pos] < 0x80 {
		tag, pos = uint64(buf[pos]), pos+1
	} else if tag, pos = consumeVarint(buf, pos); pos < 0 {
		return -1, fmt.Errorf("%w: %s: unreadable tag", ErrInvalid, m.name)
	}
	if int32(tag>>3) <= 0 {
		return -1, fmt.Errorf("%w: %s: field number 0", ErrInvalid, m.name)
	}
	num, typ := protowire.Number(int32(tag>>3)), protowire.Type(tag&7)
	var r fieldRule
	if int(num) < len(m.fields) {
		r = m.fields[num]
	}
	if typ == protowire.StartGroupType || typ == protowire.EndGroupType || r.kind == kindUnsupported {
		return -1, ErrUnsupported
	}
	if r.kind != kindUnknown && typ != r.wire {
		return -1, fmt.Errorf("%w: %s field %d: wrong wire type %d", ErrInvalid, m.name, num, typ)
	}
	switch typ {
	case protowire.VarintType:
		if pos < len(buf) && buf[pos] < 0x80 {
			return pos + 1, nil
		}
		if _, pos = consumeVarint(buf, pos); pos < 0 {
			return -1, fmt.Errorf("%w: %s field %d: truncated", ErrInvalid, m.name, num)
		}
		return pos, nil
	case protowire.Fixed64Type:
		if len(buf)-pos < 8 {
			return -1, fmt.Errorf("%w: %s field %d: truncated", ErrInvalid, m.name, num)
		}
		return pos + 8, nil
	case protowire.Fixed32Type:
		if len(buf)-pos < 4 {
			return -1, fmt.Errorf("%w: %s field %d: truncated", ErrInvalid, m.name, num)
		}
		return pos + 4, nil
	case protowire.BytesType:
	default:
		return -1, fmt.Errorf("%w: %s field %d: illegal wire type %d", ErrInvalid, m.name, num, typ)
	}
	var length uint64
	var body int
	if pos < len(buf) && buf[pos] < 0x80 {
		length, body = uint64(buf[pos]), pos+1
	} else {
		length, body = consumeVarint(buf, pos)
	}
	if body < 0 || int(length) < 0 || uint64(len(buf)-body) < length {
		return -1, fmt.Errorf("%w: %s field %d: length past the record", ErrInvalid, m.name, num)
	}
	end := body + int(length)
	switch r.kind {
	case kindID16, kindID8:
		if length != 0 && int(length) != r.size {
			return -1, fmt.Errorf("%w: %s field %d: an ID of %d bytes (want %d)", ErrInvalid, m.name, num, length, r.size)
		}
	case kindMsg:
		check := checkMessage
		if r.msg == &keyValueMsg {
			check = checkKeyValue
		}
		if err := check(buf[:end], body, r.msg, depth+1); err != nil {
			return -1, err
		}
	}
	return end, nil
}

// consumeLen reads a length-delimited field's length at buf[pos:] and
// returns where its body starts and ends (-1: past the record).
func consumeLen(buf []byte, pos int) (body, end int) {
	var n uint64
	if pos < len(buf) && buf[pos] < 0x80 {
		n, body = uint64(buf[pos]), pos+1
	} else if n, body = consumeVarint(buf, pos); body < 0 {
		return -1, -1
	}
	if int(n) < 0 || uint64(len(buf)-body) < n {
		return -1, -1
	}
	return body, body + int(n)
}

// checkKeyValue is checkMessage for a KeyValue, the commonest message
// (every attribute): a key and a value of one string, bool, int or double
// are checked inline; anything else goes field by field.
func checkKeyValue(buf []byte, pos int, m *message, depth int) error {
	if depth > MaxNesting {
		return fmt.Errorf("%w: values nested deeper than %d levels", ErrInvalid, MaxNesting)
	}
	for pos < len(buf) {
		switch buf[pos] {
		case 0x0a: // key
			if _, end := consumeLen(buf, pos+1); end >= 0 {
				pos = end
				continue
			}
		case 0x12: // value: an AnyValue of one scalar or string field
			if b, end := consumeLen(buf, pos+1); end >= 0 && b < end && anyValueScalar(buf[b:end]) {
				pos = end
				continue
			}
		}
		end, err := checkField(buf, pos, m, depth)
		if err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// anyValueScalar reports whether v, an AnyValue's body, is exactly one
// string, bool, int or double field (what pdata decodes); false when it
// is anything else, which checkMessage then judges.
func anyValueScalar(v []byte) bool {
	switch v[0] {
	case 0x0a: // string_value
		_, end := consumeLen(v, 1)
		return end == len(v)
	case 0x10, 0x18: // bool_value, int_value
		_, end := consumeVarint(v, 1)
		return end == len(v)
	case 0x21: // double_value
		return len(v) == 9
	}
	return false
}

// checkMessage checks the body buf[from:] of a message m.
func checkMessage(buf []byte, from int, m *message, depth int) error {
	if depth > MaxNesting {
		return fmt.Errorf("%w: values nested deeper than %d levels", ErrInvalid, MaxNesting)
	}
	for pos := from; pos < len(buf); {
		end, err := checkField(buf, pos, m, depth)
		if err != nil {
			return err
		}
		pos = end
	}
	return nil
}
