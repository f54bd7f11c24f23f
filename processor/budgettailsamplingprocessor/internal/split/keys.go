package split // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/split"

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Pseudo-keys of baseline.keys: fields of the span rather than attributes.
const (
	KeySpanName   = "span.name"
	KeySpanKind   = "span.kind"
	KeyStatusCode = "status.code"
)

// KeySeparator joins a fairness key's values ("checkout|GET /cart|200").
const KeySeparator = '|'

// reservedPrefixes name span fields; an attribute key may not start with
// one unless it is a pseudo-key, so a typo fails at start-up instead of
// reading an attribute nobody sets.
var reservedPrefixes = []string{"span.", "status.", "root."}

type keyKind uint8

const (
	keyAttribute keyKind = iota
	keySpanName
	keySpanKind
	keyStatusCode
)

// Key is one field of the baseline's fairness key, read from the span a
// trace takes its names from: the root, else the longest span present.
type Key struct {
	kind keyKind
	attr string
}

// ParseKeys parses baseline.keys; errors name the field (under field).
// Keys are an attribute (the resource's, else the span's, as group_by
// reads them) or one of span.name, span.kind and status.code.
func ParseKeys(field string, fields []string) ([]Key, error) {
	var errs []string
	keys := make([]Key, 0, len(fields))
	seen := map[string]bool{}
	for i, f := range fields {
		bad := func(why string) { errs = append(errs, fmt.Sprintf("%s[%d]: %q %s", field, i, f, why)) }
		switch {
		case f == "":
			bad("must not be empty")
			continue
		case strings.TrimSpace(f) != f || strings.ContainsAny(f, " \t\n[]\"'{}$"):
			bad("is not a key: give an attribute name (service.name, http.route) or span.name, span.kind, status.code")
			continue
		case seen[f]:
			bad("is listed twice")
			continue
		}
		seen[f] = true
		switch f {
		case KeySpanName:
			keys = append(keys, Key{kind: keySpanName})
		case KeySpanKind:
			keys = append(keys, Key{kind: keySpanKind})
		case KeyStatusCode:
			keys = append(keys, Key{kind: keyStatusCode})
		default:
			reserved := false
			for _, p := range reservedPrefixes {
				if strings.HasPrefix(f, p) {
					reserved = true
				}
			}
			if reserved {
				if strings.HasPrefix(f, "root.") {
					bad("is not a key: keys are always read from the trace's root span (or, without one, its longest span); drop the root. prefix")
				} else {
					bad("is not a key: the span fields are span.name, span.kind and status.code")
				}
				continue
			}
			keys = append(keys, Key{kind: keyAttribute, attr: f})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return keys, nil
}

// appendValue appends the key's value for span; a missing attribute
// appends nothing, a missing service.name UnknownService.
func (k Key) appendValue(b []byte, res pcommon.Map, span ptrace.Span) []byte {
	switch k.kind {
	case keySpanName:
		return append(b, span.Name()...)
	case keySpanKind:
		return append(b, span.Kind().String()...)
	case keyStatusCode:
		return append(b, span.Status().Code().String()...)
	}
	if k.attr == serviceNameKey {
		return appendServiceName(b, res)
	}
	if v, ok := res.Get(k.attr); ok {
		return appendValue(b, v)
	}
	if v, ok := span.Attributes().Get(k.attr); ok {
		return appendValue(b, v)
	}
	return b
}
