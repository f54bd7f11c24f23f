package spancostprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpsize"
)

// A dry-running budget_tail_sampling forwards every span with the decision
// it would have got in these attributes (its README, "Dry run"). With
// dry_run, span_cost after it meters what would have been kept, as it
// would have been sent: the spend enforcing would make.
const (
	dryRunKept      = "sampling.dry_run.kept"
	dryRunReason    = "sampling.dry_run.reason"
	dryRunThreshold = "sampling.dry_run.th"
)

// wouldSend reports whether a dry run would have kept span (a span without
// a dry-run decision counts as sent), and the bytes it would have had:
// bytes without the dry-run attributes, with th in its tracestate.
func wouldSend(span ptrace.Span, bytes int) (int, bool) {
	attrs := span.Attributes()
	kept, ok := attrs.Get(dryRunKept)
	if !ok {
		return bytes, true
	}
	if kept.Type() != pcommon.ValueTypeBool || !kept.Bool() {
		return 0, false
	}
	const boolValue = 2 // AnyValue{bool_value}: tag and varint
	bytes -= attributeSize(dryRunKept, boolValue)
	if v, ok := attrs.Get(dryRunReason); ok {
		bytes -= attributeSize(dryRunReason, otlpsize.Field(len(v.AsString())))
	}
	th := ""
	if v, ok := attrs.Get(dryRunThreshold); ok {
		th = v.AsString()
		bytes -= attributeSize(dryRunThreshold, otlpsize.Field(len(th)))
	}
	switch ts := span.TraceState().AsRaw(); {
	case ts == "":
		bytes += otlpsize.Field(len("ot=th:") + len(th))
	case strings.Contains(ts, "ot="):
		bytes += len(";th:") + len(th)
	default:
		bytes += len(",ot=th:") + len(th)
	}
	return bytes, true
}

// attributeSize is the encoded size of a span's attribute: a KeyValue of
// key and a value whose AnyValue encodes in value bytes.
func attributeSize(key string, value int) int {
	return otlpsize.Field(otlpsize.Field(len(key)) + otlpsize.Field(value))
}
