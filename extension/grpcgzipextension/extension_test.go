package grpcgzipextension

import (
	"bytes"
	stdgzip "compress/gzip"
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/stats"

	"github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension/internal/metadata"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

func otlpRequest(t *testing.T) (ptrace.Traces, []byte) {
	t.Helper()
	td, _ := workload.NewGenerator(workload.Options{Services: 10}).Batch(50)
	var m ptrace.ProtoMarshaler
	raw, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return td, raw
}

// deflated writes raw through the writer newWriter gives.
func deflated(t *testing.T, newWriter func(io.Writer) (io.WriteCloser, error), raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := newWriter(&out)
	require.NoError(t, err)
	_, err = w.Write(raw)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return out.Bytes()
}

// compressed is what klauspost/compress's gzip makes of raw at level.
func compressed(t *testing.T, raw []byte, level int) []byte {
	return deflated(t, func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, level) }, raw)
}

// compress is what gRPC's compressor c sends for raw.
func compress(t *testing.T, c encoding.Compressor, raw []byte) []byte {
	return deflated(t, c.Compress, raw)
}

func decompress(t *testing.T, c encoding.Compressor, data []byte) []byte {
	t.Helper()
	r, err := c.Decompress(bytes.NewReader(data))
	require.NoError(t, err)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.(io.Closer).Close())
	return out
}

func start(t *testing.T, name string, level int) extension.Extension {
	t.Helper()
	set := extensiontest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, name)
	ext, err := NewFactory().Create(context.Background(), set, &Config{Level: level})
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return ext
}

func TestGRPCGzipIsReplacedOnImport(t *testing.T) {
	assert.Same(t, registered, encoding.GetCompressor("gzip"))
}

// The wire format is gzip's: the standard library reads what we write and
// the other way round, with pooled readers and writers reused in between.
func TestInteroperatesWithTheStandardLibrary(t *testing.T) {
	_, raw := otlpRequest(t)
	for i := range 3 {
		ours := compress(t, registered, raw[i:])
		r, err := stdgzip.NewReader(bytes.NewReader(ours))
		require.NoError(t, err)
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, raw[i:], got)

		std := deflated(t, func(w io.Writer) (io.WriteCloser, error) { return stdgzip.NewWriter(w), nil }, raw[i:])
		assert.Equal(t, raw[i:], decompress(t, registered, std))
	}
	_, err := registered.Decompress(bytes.NewReader([]byte("not gzip")))
	assert.Error(t, err)
	assert.Equal(t, raw, decompress(t, registered, compress(t, registered, raw)), "a failed read leaves the pool usable")
}

// A writer pooled at the old level must not serve the new one.
func TestLevelAppliesToTheNextMessage(t *testing.T) {
	_, raw := otlpRequest(t)
	assert.Equal(t, compressed(t, raw, DefaultLevel), compress(t, registered, raw))
	ext := start(t, "", 1)
	assert.Equal(t, compressed(t, raw, 1), compress(t, registered, raw))
	require.NoError(t, ext.Shutdown(context.Background()))
	assert.Equal(t, compressed(t, raw, DefaultLevel), compress(t, registered, raw), "the default is back after shutdown")
	assert.NotEqual(t, len(compressed(t, raw, 1)), len(compressed(t, raw, DefaultLevel)))
}

func TestConflictingLevelsFailAtStart(t *testing.T) {
	start(t, "", 1)
	start(t, "same", 1)
	set := extensiontest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, "other")
	other, err := NewFactory().Create(context.Background(), set, &Config{Level: 9})
	require.NoError(t, err)
	err = other.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "grpc_gzip/other: level 9 conflicts with level 1 of grpc_gzip")
	require.NoError(t, other.Shutdown(context.Background()))
	_, raw := otlpRequest(t)
	assert.Equal(t, compressed(t, raw, 1), compress(t, registered, raw), "the failed instance changed nothing")
}

// payloadSizes records what a gRPC server received, compressed and not.
type payloadSizes struct {
	mu                 sync.Mutex
	length, compressed int
}

func (*payloadSizes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (*payloadSizes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (*payloadSizes) HandleConn(context.Context, stats.ConnStats) {}
func (p *payloadSizes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		p.mu.Lock()
		p.length, p.compressed = in.Length, in.CompressedLength
		p.mu.Unlock()
	}
}

type traceSink struct {
	ptraceotlp.UnimplementedGRPCServer
	got chan ptrace.Traces
}

func (s *traceSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.got <- req.Traces()
	return ptraceotlp.NewExportResponse(), nil
}

// An OTLP export over loopback with `gzip`, as configgrpc's clients and
// servers do it: the bytes on the wire are ours at the extension's level,
// and the server reads them back whole.
func TestOTLPExportOverGRPCUsesTheConfiguredLevel(t *testing.T) {
	td, raw := otlpRequest(t)
	start(t, "", 1)

	sizes := &payloadSizes{}
	srv := grpc.NewServer(grpc.StatsHandler(sizes))
	sink := &traceSink{got: make(chan ptrace.Traces, 1)}
	ptraceotlp.RegisterGRPCServer(srv, sink)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.UseCompressor("gzip")))
	require.NoError(t, err)
	defer conn.Close()
	_, err = ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
	require.NoError(t, err)

	var m ptrace.ProtoMarshaler
	got, err := m.MarshalTraces(<-sink.got)
	require.NoError(t, err)
	assert.Equal(t, raw, got)
	sizes.mu.Lock()
	defer sizes.mu.Unlock()
	assert.Equal(t, len(raw), sizes.length)
	assert.Equal(t, len(compressed(t, raw, 1)), sizes.compressed)
}
