package grpcgzipextension // import "github.com/otelcol-cost/otelcol-cost/extension/grpcgzipextension"

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/grpc/encoding"

	// grpc-go's own registration must run first, for ours to replace it.
	_ "google.golang.org/grpc/encoding/gzip"
)

// Name is the gRPC content-coding the compressor answers to.
const Name = "gzip"

// DefaultLevel is klauspost/compress's default: about the size of the
// standard library's default (6) for much less CPU.
const DefaultLevel = 5

// registered is the compressor every gRPC client and server of the process
// uses for "gzip", from the moment this package is imported.
var registered = newCompressor()

func init() {
	encoding.RegisterCompressor(registered)
}

type compressor struct {
	level   atomic.Int32
	writers sync.Pool // *writer
	readers sync.Pool // *reader
}

func newCompressor() *compressor {
	c := &compressor{}
	c.level.Store(DefaultLevel)
	return c
}

func (*compressor) Name() string { return Name }

// setLevel applies to messages compressed from now on; pooled writers of
// another level are dropped as they come out of the pool.
func (c *compressor) setLevel(level int) { c.level.Store(int32(level)) }

func (c *compressor) Compress(w io.Writer) (io.WriteCloser, error) {
	level := int(c.level.Load())
	if z, ok := c.writers.Get().(*writer); ok && z.level == level {
		z.Reset(w)
		return z, nil
	}
	gz, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return nil, err
	}
	return &writer{Writer: gz, level: level, pool: &c.writers}, nil
}

func (c *compressor) Decompress(r io.Reader) (io.Reader, error) {
	z, ok := c.readers.Get().(*reader)
	if !ok {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return &reader{Reader: gz, pool: &c.readers}, nil
	}
	if err := z.Reset(r); err != nil {
		c.readers.Put(z)
		return nil, err
	}
	return z, nil
}

// writer goes back to its pool when gRPC closes it, after the last write.
type writer struct {
	*gzip.Writer
	level int
	pool  *sync.Pool
}

func (z *writer) Close() error {
	defer z.pool.Put(z)
	return z.Writer.Close()
}

// reader goes back to its pool when gRPC closes it, which it does once it
// has read the message or given up on it (e.g. past the size limit).
type reader struct {
	*gzip.Reader
	pool *sync.Pool
}

func (z *reader) Close() error {
	defer z.pool.Put(z)
	return z.Reader.Close()
}
