package handoff

import (
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func TestHandoffRecordsRoundTripAndRejectGarbage(t *testing.T) {
	id := pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	rec := Record{Kind: KindDecision, Age: 3 * time.Second, Sampled: true,
		Decision: traceinfo.Decided{Th: traceinfo.Downstream(sampling.AlwaysSampleThreshold, 0.25), Service: "checkout", Class: traceinfo.ReasonOutlier, Rule: -1}}
	gotID, got, ok := unmarshalRecord(rec.marshal(id))
	require.True(t, ok)
	assert.Equal(t, id, gotID)
	assert.Equal(t, rec.Decision.Th, got.Decision.Th)
	assert.Equal(t, rec.Decision.Service, got.Decision.Service)
	assert.Equal(t, rec.Decision.Class, got.Decision.Class)
	assert.Equal(t, rec.Decision.Rule, got.Decision.Rule)
	assert.True(t, got.Sampled)
	assert.Equal(t, 3*time.Second, got.Age)

	tr := Record{Kind: KindTrace, Age: time.Second, HasRoot: true, RootAge: 500 * time.Millisecond}
	_, got, ok = unmarshalRecord(tr.marshal(id))
	require.True(t, ok)
	assert.True(t, got.HasRoot)
	assert.Equal(t, 500*time.Millisecond, got.RootAge)

	good := tr.marshal(id)
	for _, bad := range [][]byte{nil, good[:10], append(append([]byte{}, good...), 1), append([]byte{9}, good[1:]...), func() []byte {
		b := append([]byte{}, good...)
		b[1] = 77
		return b
	}()} {
		_, _, ok := unmarshalRecord(bad)
		assert.False(t, ok)
	}
}
