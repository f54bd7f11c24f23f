package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"math"
	"sync"
)

// Holds are the arrival times that work in flight holds the log at: a
// pass that took traces out of the buffer holds the oldest of their
// arrivals, so that no segment they were read from is deleted, until its
// marks are written. Safe for concurrent use.
type Holds[K comparable] struct {
	mu     sync.Mutex
	oldest map[K]int64
}

// NewHolds returns no holds.
func NewHolds[K comparable]() *Holds[K] { return &Holds[K]{oldest: map[K]int64{}} }

// Hold makes k hold the log at arrived (Unix ns), if older than it holds.
func (h *Holds[K]) Hold(k K, arrived int64) {
	h.mu.Lock()
	if at, ok := h.oldest[k]; !ok || arrived < at {
		h.oldest[k] = arrived
	}
	h.mu.Unlock()
}

// Move makes to hold where from held, and lets go of from's hold: the
// holder changes (a pass whose traces wait for another offer), the hold
// does not.
func (h *Holds[K]) Move(from, to K) {
	h.mu.Lock()
	if at, ok := h.oldest[from]; ok {
		delete(h.oldest, from)
		if cur, held := h.oldest[to]; !held || at < cur {
			h.oldest[to] = at
		}
	}
	h.mu.Unlock()
}

// Release lets go of k's hold.
func (h *Holds[K]) Release(k K) {
	h.mu.Lock()
	delete(h.oldest, k)
	h.mu.Unlock()
}

// Oldest is the oldest arrival held (MaxInt64: none).
func (h *Holds[K]) Oldest() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	oldest := int64(math.MaxInt64)
	for _, at := range h.oldest {
		oldest = min(oldest, at)
	}
	return oldest
}
