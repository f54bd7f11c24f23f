package spanmem

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

func TestChunkCodecRoundTrips(t *testing.T) {
	g := workload.NewGenerator(workload.Options{Services: 3})
	td, _ := g.Batch(20)
	var m ptrace.ProtoMarshaler
	encoded, err := m.MarshalTraces(td)
	require.NoError(t, err)
	var scratch []byte
	for _, c := range []Codec{NewCodec(false), NewCodec(true)} {
		chunk := c.Store(bytes.Clone(encoded), &scratch)
		back, err := c.Load(chunk)
		require.NoError(t, err)
		assert.Equal(t, encoded, back)
		if c.compress {
			assert.Less(t, len(chunk), len(encoded)/2, "spans compress")
		}
	}
	// A fragment S2 cannot shrink is stored as is, behind its header.
	c := NewCodec(true)
	tiny := []byte{0x0a, 0x01, 0x00}
	chunk := c.Store(bytes.Clone(tiny), &scratch)
	assert.Equal(t, append([]byte{chunkStored}, tiny...), chunk)
	_, err = c.Load([]byte{9, 1, 2})
	assert.ErrorContains(t, err, "unknown chunk header")
	_, err = c.Load(nil)
	assert.Error(t, err)
}
