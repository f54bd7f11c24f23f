package tracerouterreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-cost/otelcol-cost/internal/otlptest"
)

// Requests taken close together reach each sampler as one request per
// round: a round starts once batch.min_size spans wait and holds at most
// batch.max_size, whatever the pace they came at. Samplers pay per request
// (decode, its memory while held); the exporter's queue batches the same.
func TestRequestsAreMergedIntoRoundsOfBatchSize(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 3)
	startExporter(t, addrs, false)
	addr, _ := startReceiver(t, new(consumertest.TracesSink), func(c *Config) {
		// 10 requests of 60 spans make a round; flush_timeout is far
		// away, so only the sizes start rounds.
		c.Batch.MinSize, c.Batch.MaxSize, c.Batch.FlushTimeout = 600, 600, time.Minute
	})
	c := dialRaw(t, addr)
	sent := sendRequests(t, c, 20, 30)
	require.Equal(t, 1200, sent)
	total := func() int { return samplers[0].Count() + samplers[1].Count() + samplers[2].Count() }
	require.Eventually(t, func() bool { return total() == sent }, 5*time.Second, 10*time.Millisecond,
		"two full rounds are sent without waiting for flush_timeout")
	for i, s := range samplers {
		assert.Equal(t, int64(2), s.Calls(), "sampler %d: one request per round", i)
	}
}

// A round not filled to batch.min_size goes after batch.flush_timeout:
// spans never wait for traffic that does not come.
func TestAnUnfilledRoundGoesAfterFlushTimeout(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 2)
	startExporter(t, addrs, false)
	addr, _ := startReceiver(t, new(consumertest.TracesSink), func(c *Config) {
		c.Batch.MinSize, c.Batch.MaxSize, c.Batch.FlushTimeout = 1_000_000, 1_000_000, 300*time.Millisecond
	})
	c := dialRaw(t, addr)
	start := time.Now()
	sent := sendRequests(t, c, 5, 20)
	require.Eventually(t, func() bool { return samplers[0].Count()+samplers[1].Count() == sent }, 5*time.Second, 5*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "held until flush_timeout")
	for i, s := range samplers {
		assert.Equal(t, int64(1), s.Calls(), "sampler %d: the five requests in one round", i)
	}
}

// After a sampler fails a send, rounds send it nothing for holdOff: its
// parts go down the pipeline at once (whose queue retries with backoff),
// while the other samplers keep getting theirs. Without the pause a
// sampler refusing under memory pressure got every round's spans.
func TestARefusingSamplerIsHeldOffWhileOthersAreSent(t *testing.T) {
	samplers, addrs := otlptest.StartN(t, 2)
	samplers[1].Refuse.Store(true)
	startExporter(t, addrs, false)
	pipeline := new(consumertest.TracesSink)
	addr, _ := startReceiver(t, pipeline, func(c *Config) { c.Batch.MinSize, c.Batch.MaxSize = 1, 1 })
	c := dialRaw(t, addr)
	sent := sendRequests(t, c, 1, 20)
	require.Eventually(t, func() bool { return samplers[0].Count()+pipeline.SpanCount() == sent }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(1), samplers[1].Calls(), "the refusal")
	samplers[1].Refuse.Store(false)

	// Within the hold-off: three more rounds, none sent to samplers[1].
	sent += sendRequests(t, c, 3, 20)
	require.Eventually(t, func() bool { return samplers[0].Count()+pipeline.SpanCount() == sent }, 5*time.Second, 5*time.Millisecond,
		"the held-off sampler's parts are handed on, the other's sent")
	assert.Equal(t, int64(1), samplers[1].Calls(), "nothing sent to the sampler held off")
	assert.Equal(t, int64(4), samplers[0].Calls(), "the other sampler got every round")

	// After it, the sampler is sent to again.
	time.Sleep(holdOffForTests)
	sent += sendRequests(t, c, 1, 20)
	require.Eventually(t, func() bool { return samplers[0].Count()+samplers[1].Count()+pipeline.SpanCount() == sent },
		5*time.Second, 5*time.Millisecond)
	assert.Equal(t, int64(2), samplers[1].Calls(), "sent to again once the hold-off is over")
	assert.Positive(t, samplers[1].Count())
}

// holdOffForTests is the first hold-off (holdOffBase) and a margin.
const holdOffForTests = holdOffBase + 200*time.Millisecond

// Requests share a round only when their forwarded metadata are equal:
// values that join to the same bytes (binary "-bin" keys may hold any
// byte) or that move from one key to the next are still different
// tenants.
func TestTenantNamesNeverCollide(t *testing.T) {
	keys := []string{"x-token-bin", "x-org"}
	tenant := func(md map[string][]string) string {
		return tenantOf(client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(md)}), keys)
	}
	pairs := [][2]map[string][]string{
		{{"x-token-bin": {"a\x00b"}}, {"x-token-bin": {"a", "b"}}},
		{{"x-token-bin": {"a\x01"}}, {"x-token-bin": {"a"}, "x-org": {""}}},
		{{"x-token-bin": {"a"}, "x-org": {"b"}}, {"x-token-bin": {"a\x00\x01b"}}},
		{{"x-org": {"a"}}, {"x-token-bin": {"a"}}},
	}
	for _, p := range pairs {
		assert.NotEqual(t, tenant(p[0]), tenant(p[1]), "%v and %v", p[0], p[1])
	}
	assert.Equal(t, tenant(map[string][]string{"x-org": {"a"}}), tenant(map[string][]string{"x-org": {"a"}, "other": {"z"}}),
		"keys the router does not forward do not separate tenants")
}
