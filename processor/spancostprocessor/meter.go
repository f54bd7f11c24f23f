package spancostprocessor // import "github.com/otelcol-cost/otelcol-cost/processor/spancostprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-cost/otelcol-cost/internal/otep235"
	"github.com/otelcol-cost/otelcol-cost/internal/otlpsize"
)

// meter is one request's scratch: the dimension values being read, and the
// request's totals per series, merged into the series under the lock once
// the request is metered. Pooled; one goroutine at a time.
type meter struct {
	values []string
	onSpan []bool // dimensions the current resource lacks
	keyBuf []byte
	// last is the series of the previous lookup: consecutive resources are
	// often the same service, and the values compare faster than a key hashes.
	last    *series
	weights otep235.WeightReader
	sizes   otlpsize.Scratch

	totals []total
	// slot[series.id] is 1 + the series' index in totals, 0 when absent.
	slot       []int32
	overflowed int64
	invalid    int64
}

// total is what one request adds to one series.
type total struct {
	series      *series
	spans       int64
	bytes       int64
	represented float64
}

func newMeter(dims int) *meter {
	return &meter{values: make([]string, dims), onSpan: make([]bool, dims)}
}

func (m *meter) add(s *series, spans, bytes int64, represented float64) {
	if s.id >= len(m.slot) {
		m.slot = append(m.slot, make([]int32, s.id+1-len(m.slot))...)
	}
	i := m.slot[s.id]
	if i == 0 {
		m.totals = append(m.totals, total{series: s})
		i = int32(len(m.totals))
		m.slot[s.id] = i
	}
	t := &m.totals[i-1]
	t.spans += spans
	t.bytes += bytes
	t.represented += represented
}

// reset readies m for the next request; it drops its references to this
// request's data.
func (m *meter) reset() {
	for _, t := range m.totals {
		m.slot[t.series.id] = 0
	}
	clear(m.totals)
	m.totals = m.totals[:0]
	clear(m.values)
	m.last = nil
	m.weights = otep235.WeightReader{}
	m.overflowed, m.invalid = 0, 0
}

// key is the series key of m.values.
func (m *meter) key() []byte {
	m.keyBuf = m.keyBuf[:0]
	for _, v := range m.values {
		m.keyBuf = append(m.keyBuf, v...)
		m.keyBuf = append(m.keyBuf, 0x1f)
	}
	return m.keyBuf
}

// resourceDims fills m.values from the resource and remembers which
// dimensions it lacks; it reports whether it had them all.
func (m *meter) resourceDims(dims []string, res pcommon.Map) bool {
	all := true
	for i, key := range dims {
		v, ok := res.Get(key)
		m.onSpan[i] = !ok
		if ok {
			m.values[i] = valueString(v)
		} else {
			all = false
		}
	}
	return all
}

// spanDims fills the dimensions the resource lacks from a span's
// attributes, `unknown` where the span lacks them too.
func (m *meter) spanDims(dims []string, attrs pcommon.Map) {
	for i, key := range dims {
		if !m.onSpan[i] {
			continue
		}
		m.values[i] = unknownValue
		if v, ok := attrs.Get(key); ok {
			m.values[i] = valueString(v)
		}
	}
}
