package tracerouterexporter

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"google.golang.org/grpc/encoding"

	"github.com/otelcol-cost/otelcol-cost/internal/otlpwire"
	"github.com/otelcol-cost/otelcol-cost/internal/workload"
)

// BenchmarkPartCompression compresses what the router sends one sampler
// (a third of a request) with each compression the gateway offers, as
// gRPC does, and reports CPU and bytes per span: what the gateway's
// default compression is chosen on. Two request sizes: 512 spans (an SDK's
// default export batch, what the trace_router receiver splits) and 4,096
// (the exporter's queue merging requests). gzip is klauspost's at
// level 5 (what the grpc_gzip extension installs); zstd and snappy are the
// compressors configgrpc registers.
//
//	go test -run '^$' -bench PartCompression ./exporter/tracerouterexporter/
func BenchmarkPartCompression(b *testing.B) {
	for _, traces := range []int{128, 1024} { // of 4 spans
		b.Run(fmt.Sprintf("spans=%d", 4*traces), func(b *testing.B) { benchmarkPartCompression(b, traces) })
	}
}

func benchmarkPartCompression(b *testing.B, traces int) {
	td, _ := workload.NewGenerator(workload.Options{Services: 10}).Batch(traces)
	rg := testRing(3)
	var idx otlpwire.Index
	if err := idx.Marshal(td); err != nil {
		b.Fatal(err)
	}
	p, err := splitIndex(&idx, rg, 1<<30)
	if err != nil {
		b.Fatal(err)
	}
	part := idx.AppendEncoding(nil, p.first[0])
	spans := float64(p.spans[0])
	compressors := map[string]func(io.Writer) (io.WriteCloser, error){
		"gzip_level5": func(w io.Writer) (io.WriteCloser, error) { return kgzip.NewWriterLevel(w, 5) },
		"gzip_level1": func(w io.Writer) (io.WriteCloser, error) { return kgzip.NewWriterLevel(w, 1) },
		"none":        func(w io.Writer) (io.WriteCloser, error) { return nopCloser{w}, nil },
	}
	for _, name := range []string{"zstd", "snappy"} {
		c := encoding.GetCompressor(name)
		if c == nil {
			b.Fatalf("%s not registered", name)
		}
		compressors[name] = c.Compress
	}
	for _, name := range []string{"none", "snappy", "zstd", "gzip_level1", "gzip_level5"} {
		b.Run(name, func(b *testing.B) {
			var out bytes.Buffer
			for range b.N {
				out.Reset()
				w, err := compressors[name](&out)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = w.Write(part)
				_ = w.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/spans, "ns/span")
			b.ReportMetric(float64(out.Len())/spans, "bytes/span")
			b.ReportMetric(float64(len(part))/spans, "raw-bytes/span")
		})
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
