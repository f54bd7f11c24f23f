package budgettailsamplingprocessor

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/metadata"
)

func durableConfig(dir string) *Config {
	cfg := testConfig()
	cfg.Budget.SpansPerSecond = 1e9 // keep everything: a lost or repeated span shows
	cfg.Durable.Enabled = true
	cfg.Durable.Directory = dir
	return cfg
}

// A sampler stops without shutting down (a SIGKILL) with traces buffered
// and traces decided; another starts on its log. The buffered ones are
// replayed with their arrival times and decided whole when their roots
// come; the decided ones are not sent again.
func TestDurableReplayKeepsTracesWholeAndSendsDecidedOnesOnce(t *testing.T) {
	dir := t.TempDir()
	killed := newTestSampler(t, durableConfig(dir))
	var buffered, decided []pcommon.TraceID
	for i := range 100 {
		id := traceIDWithRandomness(uint64(i+1), 0.5)
		killed.send(oneSpan("db", id, 2, 1, killed.now, time.Millisecond))
		if i < 50 {
			killed.send(oneSpan("frontend", id, 1, 0, killed.now, time.Millisecond)) // its root: decided first
			decided = append(decided, id)
		} else {
			buffered = append(buffered, id)
		}
	}
	killed.advance(3 * time.Second) // past decision_wait_after_root (2 s), not decision_wait (10 s)
	require.Len(t, killed.keptSpans(), 50)
	require.EqualValues(t, 50, killed.p.bufferedTraces())

	killed.kill()
	restarted := newTestSampler(t, durableConfig(dir))
	restarted.now = killed.now.Add(time.Second)
	require.NoError(t, restarted.p.replayWAL(context.Background()))
	assert.EqualValues(t, 50, restarted.p.bufferedTraces(), "the undecided traces, and only they, buffered again")
	assert.Equal(t, 50.0, restarted.metric(metadata.MetricDurableReplayed))
	assert.Equal(t, 50.0, restarted.metric(metadata.MetricDurableTraces))
	for _, id := range buffered {
		restarted.send(oneSpan("frontend", id, 1, 0, restarted.now, time.Millisecond))
	}
	restarted.advance(3 * time.Second)
	kept := restarted.keptSpans()
	for _, id := range buffered {
		assert.Len(t, kept[id], 2, "replayed and whole")
	}
	for _, id := range decided {
		assert.Empty(t, kept[id], "decided before the kill: not sent again")
	}
}

// Replayed traces keep their arrival time: decision_wait counts from when
// they first arrived, before the restart.
func TestDurableReplayKeepsTheArrivalTime(t *testing.T) {
	dir := t.TempDir()
	killed := newTestSampler(t, durableConfig(dir))
	id := traceIDWithRandomness(7, 0.5)
	killed.send(oneSpan("db", id, 2, 1, killed.now, time.Millisecond))
	killed.kill()

	restarted := newTestSampler(t, durableConfig(dir))
	restarted.now = killed.now.Add(8 * time.Second)
	require.NoError(t, restarted.p.replayWAL(context.Background()))
	restarted.advance(time.Second) // 9 s after arrival: still waiting
	require.EqualValues(t, 1, restarted.p.bufferedTraces())
	restarted.advance(time.Second) // 10 s: decision_wait over
	assert.Zero(t, restarted.p.bufferedTraces())
	assert.Len(t, restarted.keptSpans()[id], 1)
}

// Segments go once every trace in them is decided; a graceful shutdown
// with everything decided leaves no segment with a fragment.
func TestDurableSegmentsGoOnceTheirTracesAreDecided(t *testing.T) {
	dir := t.TempDir()
	cfg := durableConfig(dir)
	cfg.Durable.SegmentBytes = 64 << 10
	ts := newTestSampler(t, cfg)
	for i := range 2000 {
		id := traceIDWithRandomness(uint64(i+1), 0.5)
		td := oneSpan("db", id, 2, 1, ts.now, time.Millisecond)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("padding", string(make([]byte, 200)))
		ts.send(td)
	}
	log := ts.p.wal.log
	require.Greater(t, log.Segments(), 4)
	ts.p.maintainWAL()
	assert.Greater(t, log.Segments(), 4, "nothing decided yet: every segment stays")
	ts.advance(11 * time.Second)
	ts.p.maintainWAL()
	assert.Equal(t, 1, log.Segments(), "all decided: only the segment being written stays")
	require.NoError(t, ts.p.Shutdown(context.Background()))
	files, _ := filepath.Glob(filepath.Join(dir, "budget_tail_sampling", "wal-*.log"))
	var replayed int
	again := newTestSampler(t, durableConfig(dir))
	require.NoError(t, again.p.replayWAL(context.Background()))
	replayed = int(again.p.bufferedTraces())
	assert.Zero(t, replayed, "nothing to replay after a clean stop (%d files)", len(files))
}

// A request whose fragments cannot be written (the log at max_bytes) has
// its traces decided at once, before it is acknowledged: nothing
// acknowledged is only in memory.
func TestDurableWriteFailureDecidesTheRequestsTracesAtOnce(t *testing.T) {
	cfg := durableConfig(t.TempDir())
	cfg.Durable.SegmentBytes = 64 << 10
	cfg.Durable.MaxBytes = 256 << 10
	ts := newTestSampler(t, cfg)
	sent := 0
	for i := range 3000 {
		id := traceIDWithRandomness(uint64(i+1), 0.5)
		td := oneSpan("db", id, 2, 1, ts.now, time.Millisecond)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("padding", string(make([]byte, 200)))
		ts.send(td)
		sent++
	}
	failures := ts.metric(metadata.MetricDurableFailures)
	require.Positive(t, failures, "the log reached max_bytes")
	buffered := ts.p.bufferedTraces()
	kept := len(ts.keptSpans())
	assert.Equal(t, sent, int(buffered)+kept, "every trace buffered (and written) or decided and forwarded")
	assert.LessOrEqual(t, ts.p.wal.log.Size(), int64(256<<10)+64<<10, "the log stays near its bound")
	ts.p.maintainWAL() // at the bound: the oldest traces are decided so that segments can go
	assert.Less(t, ts.p.wal.log.Size(), int64(256<<10))
	_ = ptrace.NewTraces
}

// A sampler is killed while it owns buffered traces, and starts again
// outside the ring (scaled in, or its peers took its share meanwhile): it
// replays its log and hands the replayed traces, with their arrival times,
// to the sampler that owns them now, where their roots arrive. Every trace
// is whole at one sink.
func TestDurableReplayHandsOnTracesTheRingGivesAway(t *testing.T) {
	base := t.TempDir()
	tune := func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = filepath.Join(base, c.Handoff.SelfAddress)
	}
	ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, tune)
	a := ht.samplers["127.0.0.2"]
	ht.resolve("127.0.0.2") // A owns everything
	later := multipart(t, a, 200)
	require.EqualValues(t, 200, a.p.bufferedTraces())
	ht.advance(2 * time.Second)

	// Killed: its handoff server stops, nothing is handed over, its buffer
	// is gone with it.
	a.p.handoff.Leave(context.Background())
	a.kill()
	delete(ht.samplers, "127.0.0.2")
	ht.resolve("127.0.0.3") // the ring is B alone now
	restarted := ht.start("127.0.0.2", tune)
	restarted.p.refreshPeers()
	require.NoError(t, restarted.p.replayWAL(context.Background()))
	restarted.p.rebalance() // as Start does after replaying
	ht.settle()
	b := ht.samplers["127.0.0.3"]
	assert.Zero(t, restarted.p.bufferedTraces(), "every replayed trace handed on")
	assert.EqualValues(t, 200, b.p.bufferedTraces())
	for _, part := range later { // the gateways send the roots to B now
		require.NoError(t, b.p.ConsumeTraces(context.Background(), part))
	}
	ht.advance(3 * time.Second)
	assert.Zero(t, b.p.bufferedTraces())
	assertWhole(t, ht.where(), 200)
}

// How long a restart takes to replay a full default buffer
// (max_buffered_bytes, 256 MiB of 4-span traces in 50-trace requests,
// nothing decided): the log is read, every fragment decoded, split and
// buffered again.
//
//	go test -run '^$' -bench DurableReplayFullBuffer -benchtime 1x ./processor/budgettailsamplingprocessor/
func BenchmarkDurableReplayFullBuffer(b *testing.B) {
	dir := b.TempDir()
	cfg := durableConfig(dir)
	cfg.MaxBufferedBytes = createDefaultConfig().MaxBufferedBytes
	cfg.MaxTraces = 10_000_000
	cfg.DecisionWait, cfg.DecisionWaitAfterRoot = time.Hour, time.Hour
	cfg.Durable.MaxBytes = 4 * cfg.MaxBufferedBytes
	filled := newTestSampler(b, cfg)
	g := workload.NewGenerator(workload.Options{Services: 20, SpansPerTrace: 4, Seed: 5, Start: filled.now})
	spans := 0
	for filled.p.totals.Bytes() < cfg.MaxBufferedBytes*9/10 {
		td := ptrace.NewTraces()
		for range 50 {
			spans += g.Next(td).Spans
		}
		filled.send(td)
	}
	logBytes := filled.p.wal.log.Size()
	filled.kill()
	b.ResetTimer()
	for b.Loop() {
		again := newTestSampler(b, cfg)
		start := time.Now()
		if err := again.p.replayWAL(context.Background()); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		if _, _, got, _ := again.p.tally(); int(got) != spans {
			b.Fatalf("replayed %d spans of %d (log %d bytes, %d failures, replayed metric %v, buffered traces %d)", got, spans, logBytes, filled.p.wal.log.Failures(), again.metric(metadata.MetricDurableReplayed), again.p.bufferedTraces())
		}
		b.ReportMetric(elapsed.Seconds(), "s/replay")
		b.ReportMetric(float64(spans)/elapsed.Seconds(), "spans/s")
		b.ReportMetric(float64(logBytes)/(1<<20), "log-MiB")
		again.kill()
	}
}

// restartAlone kills a sampler, starts one at addr on its log (tune names
// its directory), makes it the whole ring, and replays the log.
func (ht *handoffTier) restartAlone(killed *testSampler, addr string, tune func(*Config)) *testSampler {
	ht.t.Helper()
	killed.kill()
	restarted := ht.start(addr, tune)
	ht.dns.set(addr)
	restarted.p.refreshPeers()
	require.NoError(ht.t, restarted.p.replayWAL(context.Background()))
	return restarted
}

// proxyToSilentPeer starts sampler A (127.0.0.2) alone, makes the ring a
// peer that accepts connections and never answers (127.0.0.4), and sends A
// 100 traces (workload seed): every fragment is proxied, and still on its
// way.
func proxyToSilentPeer(t *testing.T, tune func(*Config), seed uint64) (*handoffTier, *testSampler) {
	t.Helper()
	ht := newHandoffTier(t, []string{"127.0.0.2"}, tune)
	a := ht.samplers["127.0.0.2"]
	silentPeer(t, fmt.Sprintf("127.0.0.4:%d", ht.port))
	ht.resolve("127.0.0.4") // the ring is the silent peer alone
	g := workload.NewGenerator(workload.Options{Services: 4, SpansPerTrace: 6, Seed: seed, Start: ht.now()})
	for range 100 {
		td := ptrace.NewTraces()
		g.Next(td)
		require.NoError(t, a.p.ConsumeTraces(context.Background(), td))
	}
	require.Zero(t, a.p.bufferedTraces(), "every fragment proxied")
	return ht, a
}

// silentPeer accepts connections on addr and never answers: a send to it
// hangs until its timeout.
func silentPeer(t *testing.T, addr string) {
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
}

// A sampler passes its buffered traces on to a new owner (the ring
// changed) and is killed while they are still on their way, after its
// log deleted the segments behind its (now empty) buffer. A sampler that
// starts on its log replays them, and they are kept whole. Without a hold
// on the segments while the traces were on their way, none was left.
func TestDurablePassedOnTracesSurviveACrashBeforeThePeerTakesThem(t *testing.T) {
	dir := t.TempDir()
	tune := func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = dir
		c.Durable.SegmentBytes = 64 << 10 // the smallest: several segments, deleted behind the buffer
		c.Handoff.Timeout = time.Minute
	}
	ht := newHandoffTier(t, []string{"127.0.0.2"}, tune)
	a := ht.samplers["127.0.0.2"]
	silentPeer(t, fmt.Sprintf("127.0.0.4:%d", ht.port))
	ht.resolve("127.0.0.2")
	later := multipart(t, a, 400)
	require.EqualValues(t, 400, a.p.bufferedTraces())
	require.Greater(t, a.p.wal.log.Segments(), 3)
	ht.advance(time.Second)
	ht.resolve("127.0.0.4") // scale out and in at once: the silent peer owns everything
	require.Zero(t, a.p.bufferedTraces(), "every trace passed on")
	require.NotZero(t, a.p.handoff.Pending())
	a.p.maintainWAL() // what its ticker does every 250 ms

	restarted := ht.restartAlone(a, "127.0.0.5", tune)
	assert.EqualValues(t, 400, restarted.p.bufferedTraces(), "every trace on its way replayed")
	for _, part := range later {
		require.NoError(t, restarted.p.ConsumeTraces(context.Background(), part))
	}
	ht.advance(10 * time.Second)
	assertWhole(t, ht.where(), 400)
}

// A sampler proxies fragments of traces it does not own to their owner
// (the ring is changing) and is killed while they are still on their way:
// the peer accepts the connection and never answers. Another sampler that
// starts on its log (and now owns the traces) replays them: every trace
// is kept whole. Without the handed records, all of them were lost.
func TestDurableProxiedFragmentsSurviveACrashBeforeThePeerTakesThem(t *testing.T) {
	dir := t.TempDir()
	tune := func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = dir
		c.Handoff.Timeout = time.Minute // the send hangs for the whole test
	}
	ht, a := proxyToSilentPeer(t, tune, 12)
	require.NotZero(t, a.p.handoff.Pending(), "still on its way when the sampler dies")

	// Killed: a sampler on another address starts on its log and owns
	// everything now.
	restarted := ht.restartAlone(a, "127.0.0.5", tune)
	assert.EqualValues(t, 100, restarted.p.bufferedTraces(), "every proxied trace replayed")
	ht.advance(10 * time.Second)
	assert.Zero(t, restarted.p.bufferedTraces())
	assertWhole(t, ht.where(), 100)
}

// Fragments the owner took are settled in the log: a sampler that starts
// on it afterwards replays none of them (they would reach the backend
// twice).
func TestDurableProxiedFragmentsTheOwnerTookAreNotReplayed(t *testing.T) {
	base := t.TempDir()
	tune := func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = filepath.Join(base, c.Handoff.SelfAddress)
	}
	ht := newHandoffTier(t, []string{"127.0.0.2", "127.0.0.3"}, tune)
	a, b := ht.samplers["127.0.0.2"], ht.samplers["127.0.0.3"]
	ht.resolve("127.0.0.3") // B owns everything; the gateways still send to A
	g := workload.NewGenerator(workload.Options{Services: 4, SpansPerTrace: 6, Seed: 13, Start: ht.now()})
	for range 100 {
		td := ptrace.NewTraces()
		g.Next(td)
		require.NoError(t, a.p.ConsumeTraces(context.Background(), td))
	}
	ht.settle()
	require.EqualValues(t, 100, b.p.bufferedTraces(), "the owner took every fragment")
	require.NoError(t, a.p.wal.log.CommitPending()) // as maintainWAL does every 250 ms

	// A sampler starts on A's log, owning everything.
	restarted := ht.restartAlone(a, "127.0.0.5", func(c *Config) {
		c.Durable.Enabled = true
		c.Durable.Directory = filepath.Join(base, "127.0.0.2")
	})
	assert.Zero(t, restarted.p.bufferedTraces(), "fragments the owner took, replayed")
	assert.Zero(t, restarted.metric(metadata.MetricDurableReplayed))
}
