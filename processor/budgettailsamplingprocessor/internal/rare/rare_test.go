package rare

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRareKeyIsDueOncePerInterval(t *testing.T) {
	tr := New(time.Minute, 10)
	at := func(d time.Duration) int64 { return int64(d) }
	due, ok := tr.Due("a", at(time.Second))
	assert.True(t, due && ok, "first trace of a key")
	due, _ = tr.Due("a", at(59*time.Second))
	assert.False(t, due, "within the interval")
	due, _ = tr.Due("b", at(59*time.Second))
	assert.True(t, due, "keys are independent")
	due, _ = tr.Due("a", at(60*time.Second))
	assert.True(t, due, "the next interval (aligned to the clock)")
	due, _ = tr.Due("a", at(119*time.Second))
	assert.False(t, due)
}

func TestRareTableIsBoundedByMaxKeys(t *testing.T) {
	tr := New(time.Minute, 2)
	for _, k := range []string{"a", "b"} {
		due, ok := tr.Due(k, 0)
		assert.True(t, due && ok)
	}
	due, ok := tr.Due("c", int64(time.Second))
	assert.False(t, due || ok, "full of keys kept in this interval: c is not tracked")
	assert.Equal(t, 2, tr.Len())
	due, ok = tr.Due("c", int64(time.Minute))
	assert.True(t, due && ok, "a and b belong to the last interval: room for c")
	assert.LessOrEqual(t, tr.Len(), 2)
}

func TestRareIntervalMustCoverTheDecisionWait(t *testing.T) {
	assert.Empty(t, Config{}.Check(15*time.Second), "off")
	assert.Empty(t, Config{Interval: time.Minute}.Check(15*time.Second))
	errs := Config{Interval: 10 * time.Second}.Check(15 * time.Second)
	if assert.Len(t, errs, 1) {
		assert.Contains(t, errs[0].Error(), "rare.interval")
		assert.Contains(t, errs[0].Error(), "decision_wait")
	}
	assert.Len(t, Config{Interval: -time.Second}.Check(15*time.Second), 1)
}

func TestRareTableStaysBoundedUnderConcurrentDecisions(t *testing.T) {
	tr := New(time.Minute, 100)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				tr.Due(fmt.Sprint("key-", g, "-", i%300), int64(i/500)*int64(time.Minute))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, tr.Len(), 100)
	held := 0
	for i := range tr.stripes {
		held += len(tr.stripes[i].last)
	}
	assert.Equal(t, tr.Len(), held, "the count matches the stripes")
}

// Coverage is read for the last whole clock-aligned interval: the keys seen
// in it and the share of them with a trace kept in it.
func TestRareCoverageOfTheLastInterval(t *testing.T) {
	tr := New(time.Minute, 10)
	at := func(d time.Duration) int64 { return int64(10*time.Minute + d) }
	_, ok := tr.Coverage(at(0))
	assert.False(t, ok, "nothing seen yet")
	for _, k := range []string{"a", "b", "c", "d"} {
		tr.Due(k, at(time.Second))
	}
	tr.Kept("a", at(2*time.Second))
	tr.Kept("a", at(3*time.Second)) // once per key
	tr.Kept("b", at(59*time.Second))
	tr.Kept("zzz", at(59*time.Second)) // never seen: not counted
	_, ok = tr.Coverage(at(59 * time.Second))
	assert.False(t, ok, "the interval is not over")
	share, ok := tr.Coverage(at(61 * time.Second))
	assert.True(t, ok)
	assert.InDelta(t, 0.5, share, 1e-9, "a and b of a, b, c, d")
	tr.Due("a", at(61*time.Second))
	tr.Kept("a", at(61*time.Second))
	share, _ = tr.Coverage(at(121 * time.Second))
	assert.InDelta(t, 1, share, 1e-9)
	_, ok = tr.Coverage(at(181 * time.Second))
	assert.False(t, ok, "an interval with no keys has no coverage")
}

// A policy file changes the interval while keys are tracked: a key already
// kept stays not due within the new interval that holds its trace, and is
// due again where a shorter interval starts after it.
func TestReloadRareIntervalCarriesTheKeys(t *testing.T) {
	tr := New(time.Minute, 10)
	at := func(d time.Duration) int64 { return int64(d) }
	due, _ := tr.Due("a", at(10*time.Minute+5*time.Second))
	assert.True(t, due)
	tr.Kept("a", at(10*time.Minute+5*time.Second))
	tr.SetInterval(5 * time.Minute)
	due, _ = tr.Due("a", at(14*time.Minute))
	assert.False(t, due, "the 5-minute interval from 10:00 holds its trace")
	due, _ = tr.Due("a", at(15*time.Minute))
	assert.True(t, due, "the next one")
	tr.SetInterval(time.Minute)
	due, _ = tr.Due("a", at(15*time.Minute+30*time.Second))
	assert.False(t, due, "kept in the minute from 15:00")
	due, _ = tr.Due("a", at(16*time.Minute))
	assert.True(t, due, "a shorter interval: due each minute again")
	tr.Kept("a", at(16*time.Minute))
	share, ok := tr.Coverage(at(17 * time.Minute))
	assert.True(t, ok, "coverage counts in the new interval")
	assert.Equal(t, 1.0, share)
}
