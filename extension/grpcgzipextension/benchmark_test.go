package grpcgzipextension

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// BenchmarkCompress compresses one 100-trace reference request (115 KB of
// OTLP) with the standard library's gzip, which grpc-go's compressor wraps,
// and with klauspost/compress's, at the levels that matter, reusing one
// writer as both compressors' pools do; ratio is the request's size over
// the compressed size.
//
//	go test -run '^$' -bench Compress ./extension/grpcgzipextension/
func BenchmarkCompress(b *testing.B) {
	td, _ := workload.NewGenerator(workload.Options{Services: 10}).Batch(100)
	var m ptrace.ProtoMarshaler
	raw, err := m.MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		writer func(io.Writer, int) (resettable, error)
		levels []int
	}{
		{"stdlib", func(w io.Writer, l int) (resettable, error) { return stdgzip.NewWriterLevel(w, l) }, []int{1, 6}},
		{"klauspost", func(w io.Writer, l int) (resettable, error) { return gzip.NewWriterLevel(w, l) }, []int{1, 5, 6}},
	} {
		for _, level := range c.levels {
			b.Run(fmt.Sprintf("%s/level_%d", c.name, level), func(b *testing.B) {
				var out bytes.Buffer
				w, err := c.writer(&out, level)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					out.Reset()
					w.Reset(&out)
					_, _ = w.Write(raw)
					_ = w.Close()
				}
				b.ReportMetric(float64(len(raw))/float64(out.Len()), "ratio")
			})
		}
	}
}

type resettable interface {
	io.WriteCloser
	Reset(io.Writer)
}
