package tracerouterreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/otlptest"
)

// blockingSink holds every call until released: a pipeline that never
// answers.
type blockingSink struct{ release chan struct{} }

func (blockingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (b blockingSink) ConsumeTraces(ctx context.Context, _ ptrace.Traces) error {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}

// Shutdown ends within its context even while a client's call is held by
// the pipeline (a request the router decodes waits for it): it used to
// wait for gRPC's graceful stop, which waits for that call, forever.
func TestShutdownEndsWithinItsContext(t *testing.T) {
	_, addrs := otlptest.StartN(t, 1)
	startExporter(t, addrs, false)
	sink := blockingSink{release: make(chan struct{})}
	defer close(sink.release)
	addr, _, r := startReceiverWith(t, sink, nil, nil)
	go func() { _, _ = dialRaw(t, addr).export(interleavedRequest()) }() // decoded: held by the sink
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := r.Shutdown(ctx)
	assert.Error(t, err, "its time ran out, and it says so")
	assert.Less(t, time.Since(start), 2*time.Second)
}

// A sampler that keeps failing is held off longer each time, up to
// holdOffMax; an answered send ends the hold-off.
func TestHoldOffGrowsWithFailuresAndEndsOnSuccess(t *testing.T) {
	var s sender
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 7 {
		s.failed(now)
		got = append(got, s.heldUntil.Sub(now))
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second, 16 * time.Second}, got)
	assert.True(t, s.heldOff(now.Add(15*time.Second)))
	s.answered()
	assert.False(t, s.heldOff(now))
	s.failed(now)
	assert.Equal(t, time.Second, s.heldUntil.Sub(now), "back to the first hold-off")
}
