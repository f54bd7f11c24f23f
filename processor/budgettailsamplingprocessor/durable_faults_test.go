package budgettailsamplingprocessor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

// fullQueue refuses every request while full (an exporter's sending queue
// at its size, a backend down), and hands the rest to the sink.
type fullQueue struct {
	sink consumer.Traces
	full atomic.Bool
}

func (q *fullQueue) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (q *fullQueue) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if q.full.Load() {
		return errors.New("sending queue is full")
	}
	return q.sink.ConsumeTraces(ctx, td)
}

// rootedTraces sends n traces of two spans, root included, and returns
// their IDs.
func rootedTraces(ts *testSampler, n int, seed uint64) []pcommon.TraceID {
	var ids []pcommon.TraceID
	for i := range n {
		id := traceIDWithRandomness(seed*1000+uint64(i+1), 0.5)
		ts.send(oneSpan("db", id, 2, 1, ts.now, time.Millisecond))
		ts.send(oneSpan("frontend", id, 1, 0, ts.now, time.Millisecond))
		ids = append(ids, id)
	}
	return ids
}

// Traces the next consumer refused are not marked done: a sampler killed
// before it took them replays them and keeps them whole; offered again
// once the consumer takes requests, they are marked and not replayed. With
// done marks written on refusal, all 50 were lost.
func TestDurableMarksWaitForTheNextConsumerToTakeTheTraces(t *testing.T) {
	dir := t.TempDir()
	var queue *fullQueue
	killed := newTestSamplerTo(t, durableConfig(dir), func(sink consumer.Traces) consumer.Traces {
		queue = &fullQueue{sink: sink}
		return queue
	})
	queue.full.Store(true)
	refused := rootedTraces(killed, 50, 1)
	killed.advance(3 * time.Second) // decided, refused by the full queue
	require.Zero(t, killed.p.bufferedTraces())
	require.Equal(t, 100.0, killed.metric(metadata.MetricForwardPending))
	killed.p.maintainWAL() // the pass holds its segments meanwhile
	killed.kill()

	restarted := newTestSamplerTo(t, durableConfig(dir), func(sink consumer.Traces) consumer.Traces {
		queue = &fullQueue{sink: sink}
		return queue
	})
	restarted.now = killed.now.Add(time.Second)
	require.NoError(t, restarted.p.replayWAL(context.Background()))
	assert.EqualValues(t, 50, restarted.p.bufferedTraces(), "every refused trace replayed")
	restarted.advance(11 * time.Second)
	kept := restarted.keptSpans()
	for _, id := range refused {
		assert.Len(t, kept[id], 2, "whole")
	}

	// Refused, then taken when offered again: marked, not replayed.
	queue.full.Store(true)
	taken := rootedTraces(restarted, 20, 2)
	restarted.advance(3 * time.Second)
	require.Equal(t, 40.0, restarted.metric(metadata.MetricForwardPending))
	queue.full.Store(false)
	restarted.now = restarted.now.Add(time.Second)
	restarted.p.maintainWAL()
	assert.Zero(t, restarted.metric(metadata.MetricForwardPending))
	kept = restarted.keptSpans()
	for _, id := range taken {
		assert.Len(t, kept[id], 2)
	}
	restarted.kill()
	again := newTestSampler(t, durableConfig(dir))
	require.NoError(t, again.p.replayWAL(context.Background()))
	assert.Zero(t, again.p.bufferedTraces(), "taken and marked: not replayed")
	again.kill()
}

// A graceful stop while the next consumer refuses keeps the log for the
// next start (it deleted it whole before), and counts the spans it gave up.
func TestDurableGracefulStopKeepsWhatTheNextConsumerRefused(t *testing.T) {
	dir := t.TempDir()
	stopped := newTestSamplerTo(t, durableConfig(dir), func(sink consumer.Traces) consumer.Traces {
		q := &fullQueue{sink: sink}
		q.full.Store(true)
		return q
	})
	ids := rootedTraces(stopped, 30, 3)
	stopped.advance(3 * time.Second)
	require.NoError(t, stopped.p.Shutdown(context.Background()))
	assert.EqualValues(t, 60, stopped.p.fwd.Abandoned(), "given up here, kept in the log")

	next := newTestSampler(t, durableConfig(dir))
	require.NoError(t, next.p.replayWAL(context.Background()))
	assert.EqualValues(t, 30, next.p.bufferedTraces())
	next.advance(11 * time.Second)
	kept := next.keptSpans()
	for _, id := range ids {
		assert.Len(t, kept[id], 2)
	}
	next.kill()
}

// A request that proxied fragments to their owner while its write failed
// (the log at max_bytes) is refused, not acknowledged: the fragments are
// only queued. It was acknowledged, and a kill before delivery lost them.
func TestDurableProxiedFragmentsWhoseWriteFailedAreNotAcknowledged(t *testing.T) {
	tune := func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = t.TempDir()
		c.Durable.SegmentBytes = 64 << 10
		c.Durable.MaxBytes = 256 << 10
		c.Handoff.Timeout = time.Minute
		c.DecisionWait, c.DecisionWaitAfterRoot = time.Hour, time.Hour
	}
	ht := newHandoffTier(t, []string{"127.0.0.2"}, tune)
	a := ht.samplers["127.0.0.2"]
	silentPeer(t, fmt.Sprintf("127.0.0.4:%d", ht.port))
	ht.resolve("127.0.0.2")
	g := workload.NewGenerator(workload.Options{Services: 4, SpansPerTrace: 6, Seed: 14, Start: ht.now()})
	for !a.p.wal.log.Full() {
		td := ptrace.NewTraces()
		g.Next(td)
		require.NoError(t, a.p.ConsumeTraces(context.Background(), td))
	}
	ht.resolve("127.0.0.4") // the silent peer owns everything now
	td := ptrace.NewTraces()
	g.Next(td)
	err := a.p.ConsumeTraces(context.Background(), td)
	require.ErrorIs(t, err, errLogFailing, "proxied, not written: refused")
	assert.Equal(t, 1.0, a.metric(metadata.MetricDurableRefused))
}
