package recall

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func frag(size, spans int) Fragment {
	return Fragment{Encoded: make([]byte, size), Spans: spans, Bytes: int64(size)}
}

// Fragments of a trace come back together, oldest first, once.
func TestRecallTakesATracesFragmentsOnce(t *testing.T) {
	s := New(1000, 10)
	a, b := pcommon.TraceID{1}, pcommon.TraceID{2}
	s.Hold(a, frag(10, 1), 1)
	s.Hold(b, frag(20, 2), 2)
	s.Hold(a, frag(30, 3), 3)
	got := s.Recall(a)
	assert.Len(t, got, 2)
	assert.Equal(t, 1, got[0].Spans, "oldest first")
	assert.Equal(t, 3, got[1].Spans)
	assert.Empty(t, s.Recall(a), "once")
	assert.Equal(t, int64(20), s.Bytes(), "b's fragment is still held")
	assert.Zero(t, s.Evicted)
}

// The store never holds more than its bytes: the oldest go first, counted.
func TestHoldStaysWithinItsBytes(t *testing.T) {
	s := New(100, 1<<40)
	for i := range 20 {
		s.Hold(pcommon.TraceID{byte(i)}, frag(30, 1), int64(i))
		assert.LessOrEqual(t, s.Bytes(), int64(100))
	}
	assert.Equal(t, int64(17), s.Evicted, "three of 30 bytes fit")
	assert.Empty(t, s.Recall(pcommon.TraceID{0}), "the oldest went first")
	assert.Len(t, s.Recall(pcommon.TraceID{19}), 1)
	s.Hold(pcommon.TraceID{99}, frag(101, 5), 100)
	assert.Equal(t, int64(22), s.Evicted, "a fragment larger than the store is not held")
}

// What is older than the window goes; a recalled fragment is not counted
// as evicted when its turn comes.
func TestHoldLetsGoWhatIsOlderThanItsWindow(t *testing.T) {
	s := New(1000, 10)
	s.Hold(pcommon.TraceID{1}, frag(10, 1), 0)
	s.Hold(pcommon.TraceID{2}, frag(10, 2), 5)
	s.Recall(pcommon.TraceID{2})
	s.Expire(20)
	assert.Zero(t, s.Bytes())
	assert.Equal(t, int64(1), s.Evicted)
	assert.Empty(t, s.Recall(pcommon.TraceID{1}))
}

// Clear lets everything go, counted.
func TestClearLetsEverythingGo(t *testing.T) {
	s := New(1000, 1<<40)
	s.Hold(pcommon.TraceID{1}, frag(10, 1), 0)
	s.Hold(pcommon.TraceID{2}, frag(10, 2), 1)
	s.Clear()
	assert.Zero(t, s.Bytes())
	assert.Equal(t, int64(3), s.Evicted)
	assert.Empty(t, s.Recall(pcommon.TraceID{1}))
	s.Hold(pcommon.TraceID{3}, frag(10, 1), 2)
	assert.Len(t, s.Recall(pcommon.TraceID{3}), 1, "held again after")
}
