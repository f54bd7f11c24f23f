package spancostprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor/internal/metadata"
)

// With dry_run, what a dry-running sampler would drop is not metered, and
// what it would keep is metered at the size it would have had: the bytes
// of the same spans sent by an enforcing sampler (th in the tracestate,
// no dry-run attributes), within the length varints that enclose each span
// (a shorter span, scope and resource may each take a byte less to say
// their length: at most 3 bytes a span).
func TestDryRunMetersWhatWouldBeSent(t *testing.T) {
	dry := createDefaultConfig()
	dry.DryRun = true
	h := newHarness(t, dry)
	enforcedCfg := createDefaultConfig()
	enforced := newHarness(t, enforcedCfg)

	sent, asDry := ptrace.NewTraces(), ptrace.NewTraces()
	for i, ts := range []string{"", "ot=rv:abcdef12345678", "vendor=x"} {
		for _, keep := range []bool{true, false} {
			d := asDry.ResourceSpans().AppendEmpty()
			d.Resource().Attributes().PutStr("service.name", "checkout")
			span := d.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			span.SetName("GET /cart")
			span.Attributes().PutStr("http.route", "/cart")
			span.TraceState().FromRaw(ts)
			if keep {
				// As an enforcing sampler sends it.
				s := sent.ResourceSpans().AppendEmpty()
				d.Resource().CopyTo(s.Resource())
				out := s.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
				span.CopyTo(out)
				switch {
				case ts == "":
					out.TraceState().FromRaw("ot=th:c")
				case i == 1:
					out.TraceState().FromRaw("ot=rv:abcdef12345678;th:c")
				default:
					out.TraceState().FromRaw("vendor=x,ot=th:c")
				}
			}
			span.Attributes().PutBool(dryRunKept, keep)
			span.Attributes().PutStr(dryRunReason, "baseline")
			if keep {
				span.Attributes().PutStr(dryRunThreshold, "c")
			}
		}
	}
	h.send(asDry)
	enforced.send(sent)
	assert.Equal(t, sum(enforced.points(metadata.MetricSpans)), sum(h.points(metadata.MetricSpans)), "only what would be kept")
	assert.InDelta(t, sum(enforced.points(metadata.MetricBytes)), sum(h.points(metadata.MetricBytes)), 3*3, "at the size it would be sent")
	assert.Equal(t, 3.0, sum(h.points(metadata.MetricSpans)))
}
