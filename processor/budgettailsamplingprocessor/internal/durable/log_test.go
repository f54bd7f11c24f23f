package durable

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func id(n byte) [16]byte { return [16]byte{15: n} }

// upTo is an oldest arrival for Retain.
func upTo(at int64) func() int64 { return func() int64 { return at } }

// write appends and commits one record.
func write(t *testing.T, l *Log, add func(b *Batch)) error {
	t.Helper()
	var b Batch
	add(&b)
	return l.Commit(l.Append(&b))
}

func frag(n byte, at int64, enc string) func(*Batch) {
	return func(b *Batch) { b.AddFragment(id(n), at, []byte(enc)) }
}

// opened are the logs a test opened, by directory: a test that kills one
// (no Close) lets go of its lock with crash before the next Open.
var opened = struct {
	sync.Mutex
	logs map[string][]*Log
}{logs: map[string][]*Log{}}

// openLog is Open, noting the log for crash.
func openLog(t testing.TB, dir string, opts Options) (*Log, error) {
	t.Helper()
	l, err := Open(dir, opts)
	if err == nil {
		opened.Lock()
		opened.logs[dir] = append(opened.logs[dir], l)
		opened.Unlock()
	}
	return l, err
}

// crash is what a SIGKILL does to the logs open in dir: their files are
// closed and their locks let go, nothing pending is written.
func crash(dir string) {
	opened.Lock()
	defer opened.Unlock()
	for _, l := range opened.logs[dir] {
		l.Kill()
	}
	delete(opened.logs, dir)
}

func replayAll(t *testing.T, dir string, opts Options) ([]Fragment, ReplayStats, *Log) {
	t.Helper()
	crash(dir)
	l, err := openLog(t, dir, opts)
	require.NoError(t, err)
	var got []Fragment
	st, err := l.Replay(func(f Fragment) {
		f.Encoded = bytes.Clone(f.Encoded)
		got = append(got, f)
	})
	require.NoError(t, err)
	return got, st, l
}

// What was committed comes back in order, with its arrival times, except
// the fragments that arrived up to their trace's decision; a fragment that
// arrived after it (a trace seen again) comes back.
func TestDurableReplayLeavesOutTracesMarkedDone(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 64})
	require.NoError(t, err)
	require.NoError(t, write(t, l, func(b *Batch) {
		b.AddFragment(id(1), 100, []byte("a1"))
		b.AddFragment(id(2), 101, []byte("b1"))
	}))
	require.NoError(t, write(t, l, frag(1, 102, "a2")))
	require.NoError(t, write(t, l, func(b *Batch) { b.AddDone(id(1), 102) }))
	require.NoError(t, write(t, l, frag(3, 103, "c1")))
	require.NoError(t, write(t, l, frag(1, 104, "a3"))) // after its decision: seen again
	require.Greater(t, l.Segments(), 2, "64-byte segments: rotated")
	// Killed: no Close.

	got, st, _ := replayAll(t, dir, Options{Sync: SyncNone})
	var names []string
	for _, f := range got {
		names = append(names, fmt.Sprintf("%s@%d", f.Encoded, f.At))
	}
	assert.Equal(t, []string{"b1@101", "c1@103", "a3@104"}, names)
	assert.Equal(t, ReplayStats{Fragments: 3, Done: 2}, st)
}

// A torn or corrupt tail is skipped and counted; what precedes it, and the
// segments after it, are read.
func TestDurableReplaySkipsATornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(b []byte) []byte
	}{
		{"cut mid-record", func(b []byte) []byte { return b[:len(b)-3] }},
		{"cut mid-header", func(b []byte) []byte { return append(b, 9, 0, 0) }},
		{"flipped byte", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }},
		{"huge length", func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0) }},
		{"zeroes", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := openLog(t, dir, Options{Sync: SyncNone})
			require.NoError(t, err)
			require.NoError(t, write(t, l, frag(1, 1, "first")))
			require.NoError(t, write(t, l, frag(2, 2, "second")))
			require.NoError(t, l.Close())
			path := filepath.Join(dir, segmentName(0))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, tc.tear(b), 0o600))
			// A later segment, written after a restart, is still read.
			l, err = openLog(t, dir, Options{Sync: SyncNone})
			require.NoError(t, err)
			require.NoError(t, write(t, l, frag(3, 3, "third")))

			got, st, _ := replayAll(t, dir, Options{Sync: SyncNone})
			var names []string
			for _, f := range got {
				names = append(names, string(f.Encoded))
			}
			want := []string{"first", "second", "third"}
			if tc.name == "flipped byte" || tc.name == "cut mid-record" { // the last record is the torn one
				want = []string{"first", "third"}
			}
			assert.Equal(t, want, names)
			assert.EqualValues(t, 1, st.TornTails)
			assert.Positive(t, st.CorruptBytes)
		})
	}
}

// Segments are deleted oldest first once every fragment in them arrived
// before the oldest buffered trace, never past one that holds a later
// arrival, never the one being written.
func TestDurableRetainDeletesSegmentsBehindTheBuffer(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1})
	require.NoError(t, err)
	for at := int64(1); at <= 5; at++ {
		require.NoError(t, write(t, l, frag(byte(at), at*10, "x"))) // one segment each
	}
	require.Equal(t, 6, l.Segments())
	n, err := l.Retain(upTo(31)) // traces from 31 on still buffered
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	files, _ := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	assert.Len(t, files, 2, "the segments of 40 and 50 stay")
	n, _ = l.Retain(upTo(1 << 62))
	assert.Equal(t, 2, n)
	assert.Equal(t, 1, l.Segments(), "the segment being written stays")
	assert.Zero(t, l.Size())
}

// Retain keeps the segment being written, with fragments whose done marks
// a full disk may have refused; Discard, for a log nothing of which is
// needed again, leaves no file and nothing to replay.
func TestDurableDiscardLeavesNothingToReplay(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "a1")))
	require.NoError(t, write(t, l, frag(2, 11, "b1")))
	_, err = l.Retain(upTo(math.MaxInt64))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	got, _, l := replayAll(t, dir, Options{Sync: SyncNone})
	require.Len(t, got, 2, "what Retain leaves replays (no marks were written)")

	require.NoError(t, l.Discard())
	files, _ := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	assert.Empty(t, files)
	got, _, l = replayAll(t, dir, Options{Sync: SyncNone})
	assert.Empty(t, got)
	require.NoError(t, l.Close())
}

// Past MaxBytes a commit writes nothing and says so (its records are
// dropped: the caller decides their traces at once); once segments are
// deleted it writes again.
func TestDurableFullLogRefusesAndRecovers(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1, MaxBytes: 100})
	require.NoError(t, err)
	big := bytes.Repeat([]byte("y"), 120)
	require.NoError(t, write(t, l, frag(1, 10, string(big))))
	require.True(t, l.Full())
	require.ErrorIs(t, write(t, l, frag(2, 20, "refused")), ErrFull)
	_, err = l.Retain(upTo(15))
	require.NoError(t, err)
	require.False(t, l.Full())
	require.NoError(t, write(t, l, frag(3, 30, "z")))
	got, _, _ := replayAll(t, dir, Options{})
	require.Len(t, got, 1)
	assert.Equal(t, "z", string(got[0].Encoded))
}

// An unwritable directory is an error at open, naming the path.
func TestDurableOpenFailsOnAnUnwritableDirectory(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "not-a-dir")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := openLog(t, filepath.Join(file, "tail"), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not-a-dir")
}

// Concurrent appenders each see their records written when their Commit
// returns (group commit); run with -race.
func TestDurableConcurrentCommitsLoseNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncAlways, SegmentBytes: 4096})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				assert.NoError(t, write(t, l, frag(byte(w), int64(i), string([]byte{byte(w), byte(i)}))))
			}
		}()
	}
	wg.Wait()
	got, st, _ := replayAll(t, dir, Options{})
	assert.Len(t, got, 1600)
	assert.Zero(t, st.TornTails)
}

// A segment cut at any offset (a write torn by a crash, a truncated copy)
// replays every record before the cut, nothing after it, never panics, and
// counts what it skipped.
func TestDurableReplaySurvivesTruncationAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone})
	require.NoError(t, err)
	var ends []int64 // each record's end offset
	var end int64
	for n := range 12 {
		var b Batch
		if n%4 == 3 {
			b.AddDone(id(byte(n-1)), int64(n))
		} else {
			b.AddFragment(id(byte(n)), int64(n), bytes.Repeat([]byte{byte(n)}, 10*n+1))
		}
		end += int64(b.Len())
		ends = append(ends, end)
		require.NoError(t, l.Commit(l.Append(&b)))
	}
	require.NoError(t, l.Close())
	path := filepath.Join(dir, segmentName(0))
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	for cut := int64(0); cut <= int64(len(whole)); cut++ {
		sub := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(sub, segmentName(0)), whole[:cut], 0o600))
		got, st, _ := replayAll(t, sub, Options{})
		complete := 0
		for _, e := range ends {
			if e <= cut {
				complete++
			}
		}
		// Fragments among the complete records, less those whose trace
		// was marked done after them (n = 2, 6, 10 when their marks are in).
		want := 0
		for n := range complete {
			if n%4 == 3 {
				continue
			}
			if n%4 == 2 && complete > n+1 {
				continue
			}
			want++
		}
		require.Len(t, got, want, "cut at %d of %d", cut, len(whole))
		torn := cut != 0 && cut != ends[max(complete-1, 0)] && !(complete == 0 && cut == 0)
		if complete > 0 && cut == ends[complete-1] {
			torn = false
		}
		assert.Equal(t, torn, st.TornTails == 1, "cut at %d: torn tail counted", cut)
		if torn {
			assert.Positive(t, st.CorruptBytes)
		}
	}
}

func TestHoldsKeepTheOldestArrivalInFlight(t *testing.T) {
	h := NewHolds[int]()
	assert.Equal(t, int64(math.MaxInt64), h.Oldest())
	h.Hold(1, 50)
	h.Hold(1, 70) // a later arrival does not move the hold
	h.Hold(2, 60)
	assert.Equal(t, int64(50), h.Oldest())
	h.Move(1, 3) // the holder changes, the hold does not
	assert.Equal(t, int64(50), h.Oldest())
	h.Release(3)
	assert.Equal(t, int64(60), h.Oldest())
	h.Release(2)
	assert.Equal(t, int64(math.MaxInt64), h.Oldest())
}

// A Commit whose generation was written so long ago that its fate has been
// overwritten (its goroutine descheduled between Append and Commit while
// others wrote more than the log remembers) must not report success: here
// its generation was refused at max_bytes, and a later one in the same slot
// succeeded. Reporting that success would acknowledge records never written.
func TestDurableCommitOfAForgottenGenerationIsNotAcknowledged(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1, MaxBytes: 100})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, string(bytes.Repeat([]byte("y"), 120)))))
	require.True(t, l.Full())

	var late Batch
	frag(2, 20, "refused")(&late)
	gen := l.Append(&late)
	// Another request's commit writes the pending generation, late's
	// included: refused, the log being full.
	require.ErrorIs(t, l.CommitPending(), ErrFull)

	_, err = l.Retain(upTo(15))
	require.NoError(t, err)
	for i := range fates + 8 {
		require.NoError(t, write(t, l, frag(3, int64(30+i), "z")))
		_, err = l.Retain(upTo(int64(30 + i)))
		require.NoError(t, err)
	}
	assert.Error(t, l.Commit(gen), "its records were dropped: the request must not be acknowledged")
}

// A handed fragment (queued for the sampler that owns its trace) comes back
// on replay until it is settled; a settled mark hides only the handed
// fragment of its trace and arrival, never a fragment buffered here.
func TestDurableReplayKeepsHandedFragmentsUntilSettled(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone})
	require.NoError(t, err)
	require.NoError(t, write(t, l, func(b *Batch) {
		b.AddHanded(id(1), 10, []byte("taken by the peer"))
		b.AddHanded(id(2), 10, []byte("still queued"))
		b.AddHanded(id(3), 10, []byte("handed at 10"))
		b.AddHanded(id(3), 11, []byte("handed at 11"))
		b.AddFragment(id(4), 10, []byte("buffered here"))
	}))
	require.NoError(t, write(t, l, func(b *Batch) {
		b.AddSettled(id(1), 10)
		b.AddSettled(id(3), 10)
		b.AddSettled(id(4), 10)
	}))
	require.NoError(t, l.Close())
	got, st, _ := replayAll(t, dir, Options{})
	var names []string
	for _, f := range got {
		names = append(names, string(f.Encoded))
	}
	assert.Equal(t, []string{"still queued", "handed at 11", "buffered here"}, names)
	assert.EqualValues(t, 2, st.Done)
	assert.Zero(t, st.TornTails)
}

// After Discard (a graceful stop that decided everything), a late mark or
// commit is refused, never a crash.
func TestDurableWritesAfterDiscardAreRefused(t *testing.T) {
	l, err := openLog(t, t.TempDir(), Options{Sync: SyncNone})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "x")))
	require.NoError(t, l.Discard())
	assert.Error(t, write(t, l, func(b *Batch) { b.AddSettled(id(1), 10) }))
	assert.NoError(t, l.CommitPending(), "nothing pending")
}

// What is handed to a peer holds its segment until it is settled (or the
// hold cancelled): a crash meanwhile replays it.
func TestDurableHandedHoldsItsSegmentUntilSettled(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1})
	require.NoError(t, err)
	h := l.Hand(id(1), 10, true)
	require.NoError(t, write(t, l, func(b *Batch) { b.AddHanded(id(1), 10, []byte("on its way")) }))
	passed := l.Hand(id(2), 12, false)
	require.NoError(t, write(t, l, frag(2, 12, "passed on")))
	require.NoError(t, write(t, l, frag(3, 20, "newer")))
	gone, err := l.Retain(upTo(math.MaxInt64))
	require.NoError(t, err)
	assert.Zero(t, gone, "held by what is on its way")
	h.Settled()
	gone, err = l.Retain(upTo(math.MaxInt64))
	require.NoError(t, err)
	assert.Equal(t, 1, gone, "the settled fragment's segment goes; the passed-on trace's stays")
	passed.Cancel()
	var nilHold *Handed
	nilHold.Cancel() // no log: nothing held
	gone, err = l.Retain(upTo(math.MaxInt64))
	require.NoError(t, err)
	assert.Equal(t, 2, gone, "nothing held: every segment but the one being written")
}
