package forward

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/spanmem"
)

// gate refuses every request while closed (a full exporter queue), and
// hands what it takes to the sink.
type gate struct {
	consumertest.TracesSink
	closed atomic.Bool
}

func (g *gate) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if g.closed.Load() {
		return errors.New("sending queue is full")
	}
	return g.TracesSink.ConsumeTraces(ctx, td)
}

// keptPass is a pass that kept n traces of 4 spans.
func keptPass(t *testing.T, seed uint64, n int) *Kept {
	td, _ := workload.NewGenerator(workload.Options{Services: 3, SpansPerTrace: 4, Seed: seed}).Batch(n)
	codec := spanmem.NewCodec(false)
	th, err := sampling.ProbabilityToThreshold(0.5)
	require.NoError(t, err)
	var k Kept
	for _, enc := range perTrace(t, td) {
		k.Add([]spanmem.Chunk{{Data: codec.Store(enc, new([]byte))}}, th, "baseline", 1)
	}
	return &k
}

// What the next consumer refuses is returned, counted, and taken when
// offered again once the consumer takes requests again; each entry says
// once whether it was taken. Past the bound the oldest is given up.
func TestRetriesOfferWhatWasRefusedUntilItIsTaken(t *testing.T) {
	g := &gate{}
	f := New(Settings{Next: g, Logger: zap.NewNop(), Codec: spanmem.NewCodec(false), Meter: &countingMeter{}})
	g.closed.Store(true)
	first := f.Forward(context.Background(), keptPass(t, 1, 5))
	require.NotNil(t, first)
	assert.EqualValues(t, 20, first.Spans())
	assert.EqualValues(t, 20, f.Failed())

	q := f.NewRetries(1 << 30)
	now := time.Unix(1000, 0)
	var outcomes []bool
	q.Add(first, now, func(taken bool) { outcomes = append(outcomes, taken) })
	assert.EqualValues(t, 20, q.Pending())
	assert.Equal(t, 1, q.Offer(context.Background(), now.Add(RetryFirst/2), false), "not due yet")
	assert.Equal(t, 1, q.Offer(context.Background(), now.Add(RetryFirst), false), "due, refused again")
	assert.EqualValues(t, 40, f.Failed())
	assert.Equal(t, 1, q.Offer(context.Background(), now.Add(2*RetryFirst), false), "its wait doubled")
	g.closed.Store(false)
	assert.Zero(t, q.Offer(context.Background(), now.Add(3*RetryFirst), false))
	assert.Equal(t, []bool{true}, outcomes)
	assert.Equal(t, 20, g.SpanCount())
	assert.Zero(t, q.Pending())
	assert.Nil(t, f.Forward(context.Background(), keptPass(t, 2, 1)), "taken at once")

	// Bounded: a second entry past the bound gives the first up.
	g.closed.Store(true)
	small := f.NewRetries(first.bytes + 1)
	outcomes = nil
	small.Add(f.Forward(context.Background(), keptPass(t, 3, 5)), now, func(taken bool) { outcomes = append(outcomes, taken) })
	small.Add(f.Forward(context.Background(), keptPass(t, 4, 5)), now, func(taken bool) { outcomes = append(outcomes, taken) })
	assert.Equal(t, []bool{false}, outcomes, "the oldest given up")
	assert.EqualValues(t, 20, f.Abandoned())
	assert.EqualValues(t, 20, small.GiveUp())
	assert.Equal(t, []bool{false, false}, outcomes)
	assert.EqualValues(t, 40, f.Abandoned())
}
