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
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"
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
	require.ErrorIs(t, err, durable.ErrUnwritable, "proxied, not written: refused")
	assert.Equal(t, 1.0, a.metric(metadata.MetricDurableRefused))
}

// Fragments a restarted sampler replays and proxies again (the ring still
// gives them to a peer that does not answer) hold their old segment: a
// second crash replays them again, and a sampler that owns them keeps them
// whole. Replayed proxies held nothing before, and the second crash lost
// all 100.
func TestDurableReplayedFragmentsProxiedAgainHoldTheirSegment(t *testing.T) {
	dir := t.TempDir()
	tune := func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = dir
		c.Durable.SegmentBytes = 64 << 10
		c.Handoff.Timeout = 5 * time.Second // longer than the test needs it hanging
	}
	ht, a := proxyToSilentPeer(t, tune, 15)
	a.kill()
	delete(ht.samplers, "127.0.0.2")

	// Restarted with the silent peer still the ring: replayed, proxied again.
	b := ht.start("127.0.0.5", tune)
	b.p.refreshPeers()
	require.NoError(t, b.p.replayWAL(context.Background()))
	require.Zero(t, b.p.bufferedTraces())
	require.NotZero(t, b.p.handoff.Pending())
	b.p.maintainWAL() // its buffer is empty: only the holds keep the old segment
	b.p.maintainWAL()

	restarted := ht.restartAlone(b, "127.0.0.6", tune)
	assert.EqualValues(t, 100, restarted.p.bufferedTraces(), "replayed again after the second crash")
	ht.advance(10 * time.Second)
	assertWhole(t, ht.where(), 100)
}

// The wall clock steps back an hour (a chrony step, a restored VM) while
// traces are buffered: what the log records after the step is not older
// than what it recorded before (records and retention run on one clock,
// the monotonic one from a single wall-clock reading), and every trace is
// replayed. Read at every call, the wall clock stamped the later trace an
// hour before the earlier one, so that its segment looked older than
// traces still buffered.
func TestDurableWallClockStepBackMovesNoRecordBack(t *testing.T) {
	var step atomic.Int64
	defer func(orig func() time.Time) { wallClock = orig }(wallClock)
	wallClock = func() time.Time { return time.Now().Add(-time.Duration(step.Load())) }
	dir := t.TempDir()
	cfg := durableConfig(dir)
	cfg.Durable.SegmentBytes = 64 << 10
	set := processortest.NewNopSettings(metadata.Type)
	p, err := newBudgetTailSampler(set, cfg, new(consumertest.TracesSink))
	require.NoError(t, err)
	defer func() { _ = p.reg.Unregister(); p.totals.Arena().Close() }()
	before := traceIDWithRandomness(1, 0.5)
	require.NoError(t, p.ConsumeTraces(context.Background(), oneSpan("db", before, 2, 1, time.Now(), time.Millisecond)))
	step.Store(int64(time.Hour))
	after := traceIDWithRandomness(2, 0.5)
	require.NoError(t, p.ConsumeTraces(context.Background(), oneSpan("db", after, 2, 1, time.Now(), time.Millisecond)))
	for i := range 300 { // later segments
		id := traceIDWithRandomness(uint64(10+i), 0.5)
		td := oneSpan("db", id, 2, 1, time.Now(), time.Millisecond)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("padding", string(make([]byte, 400)))
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
	}
	p.maintainWAL()
	p.wal.log.Kill()

	l, err := durable.Open(p.wal.log.Dir(), durable.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	at := map[pcommon.TraceID]int64{}
	_, err = l.Replay(func(f durable.Fragment) { at[f.ID] = f.At })
	require.NoError(t, err)
	require.Contains(t, at, before)
	require.Contains(t, at, after)
	assert.GreaterOrEqual(t, at[after], at[before], "recorded after the step, not stamped before it")
	assert.Len(t, at, 302, "every buffered trace replays")
}
