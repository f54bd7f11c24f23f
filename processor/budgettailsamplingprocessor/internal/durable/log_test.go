package durable

import (
	"bytes"
	"encoding/binary"
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

func replayAll(t *testing.T, dir string, opts Options) ([]Fragment, ReplayStats, *Log) {
	t.Helper()
	l, err := Open(dir, opts)
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
	l, err := Open(dir, Options{Sync: SyncNone, SegmentBytes: 64})
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
// segments after it, are read. A torn write starts where the end frame is
// (the tears below replace it), or leaves bytes after it.
func TestDurableReplaySkipsATornTail(t *testing.T) {
	atEnd := func(tear func(b []byte) []byte) func(b []byte) []byte {
		return func(b []byte) []byte { return tear(b[:len(b)-frameHeader]) }
	}
	for _, tc := range []struct {
		name string
		tear func(b []byte) []byte
	}{
		{"cut mid-record", atEnd(func(b []byte) []byte { return b[:len(b)-3] })},
		{"cut mid-header", atEnd(func(b []byte) []byte { return append(b, 9, 0, 0) })},
		{"flipped byte", atEnd(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })},
		{"huge length", atEnd(func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0) })},
		{"zeroes", atEnd(func(b []byte) []byte { return append(b, make([]byte, 4096)...) })},
		{"bytes after the end frame", func(b []byte) []byte { return append(b, 200, 1, 0, 0, 7, 7, 7, 7, 1, 2, 3) }},
		{"cut in the end frame", func(b []byte) []byte { return b[:len(b)-3] }},
		{"torn segment header", func(b []byte) []byte { b[9] ^= 0xff; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{Sync: SyncNone})
			require.NoError(t, err)
			require.NoError(t, write(t, l, frag(1, 1, "first")))
			require.NoError(t, write(t, l, frag(2, 2, "second")))
			require.NoError(t, l.Close())
			path := filepath.Join(dir, segmentName(0))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, tc.tear(b), 0o600))
			// A later segment, written after a restart, is still read.
			l, err = Open(dir, Options{Sync: SyncNone})
			require.NoError(t, err)
			require.NoError(t, write(t, l, frag(3, 3, "third")))

			got, st, _ := replayAll(t, dir, Options{Sync: SyncNone})
			var names []string
			for _, f := range got {
				names = append(names, string(f.Encoded))
			}
			want := []string{"first", "second", "third"}
			switch tc.name {
			case "flipped byte", "cut mid-record": // the last record is the torn one
				want = []string{"first", "third"}
			case "torn segment header":
				want = []string{"third"}
			}
			assert.Equal(t, want, names)
			assert.EqualValues(t, 1, st.Corrupt)
			assert.Positive(t, st.CorruptBytes)
		})
	}
}

// Segments are deleted oldest first once every fragment in them arrived
// before the oldest buffered trace, never past one that holds a later
// arrival, never the one being written.
func TestDurableRetainDeletesSegmentsBehindTheBuffer(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncNone, SegmentBytes: 1})
	require.NoError(t, err)
	for at := int64(1); at <= 5; at++ {
		require.NoError(t, write(t, l, frag(byte(at), at*10, "x"))) // one segment each
	}
	require.Equal(t, 6, l.Segments())
	n, err := l.Retain(31) // traces from 31 on still buffered
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	files, _ := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	assert.Len(t, files, 2, "the segments of 40 and 50 stay")
	n, _ = l.Retain(1 << 62)
	assert.Equal(t, 2, n)
	assert.Equal(t, 1, l.Segments(), "the segment being written stays")
	assert.Zero(t, l.Size())
	spares, _ := filepath.Glob(filepath.Join(dir, "spare-*.wal"))
	assert.Empty(t, spares, "sync none: unlinked before the kernel writes them back")

	// Synced (interval, always): the files are kept for recycling, and
	// counted.
	dir = t.TempDir()
	l, err = Open(dir, Options{Sync: SyncInterval, SegmentBytes: 1})
	require.NoError(t, err)
	for at := int64(1); at <= 5; at++ {
		require.NoError(t, write(t, l, frag(byte(at), at*10, "x")))
	}
	require.NoError(t, l.Sync())
	n, _ = l.Retain(1 << 62)
	assert.Equal(t, 5, n)
	assert.Equal(t, diskBytes(t, dir), l.Size(), "Size is the files' bytes, spares included")
	spares, _ = filepath.Glob(filepath.Join(dir, "spare-*.wal"))
	assert.Len(t, spares, 5, "deleted segments kept for recycling")
}

func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		n += info.Size()
	}
	return n
}

// Retain keeps the segment being written, with fragments whose done marks
// a full disk may have refused; Discard, for a log nothing of which is
// needed again, leaves no file and nothing to replay.
func TestDurableDiscardLeavesNothingToReplay(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncNone, SegmentBytes: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "a1")))
	require.NoError(t, write(t, l, frag(2, 11, "b1")))
	_, err = l.Retain(math.MaxInt64)
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
	l, err := Open(dir, Options{Sync: SyncNone, SegmentBytes: 1, MaxBytes: 100})
	require.NoError(t, err)
	big := bytes.Repeat([]byte("y"), 120)
	require.NoError(t, write(t, l, frag(1, 10, string(big))))
	require.True(t, l.Full())
	require.ErrorIs(t, write(t, l, frag(2, 20, "refused")), ErrFull)
	_, err = l.Retain(15)
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
	_, err := Open(filepath.Join(file, "tail"), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not-a-dir")
}

// Concurrent appenders each see their records written when their Commit
// returns (group commit); run with -race.
func TestDurableConcurrentCommitsLoseNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncAlways, SegmentBytes: 4096})
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
	assert.Zero(t, st.Corrupt)
}

// A segment cut at any offset (a write torn by a crash, a truncated copy)
// replays every record before the cut, nothing after it, never panics, and
// counts what it skipped.
func TestDurableReplaySurvivesTruncationAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncNone})
	require.NoError(t, err)
	var ends []int64 // each record's end offset
	end := int64(segmentHeader)
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
		// Whole: nothing, the header alone, a record's end, or the file
		// with its end frame.
		torn := cut != 0 && cut != segmentHeader && cut != int64(len(whole))
		if complete > 0 && cut == ends[complete-1] {
			torn = false
		}
		assert.Equal(t, torn, st.Corrupt == 1, "cut at %d: torn tail counted", cut)
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
	h.Release(1)
	assert.Equal(t, int64(60), h.Oldest())
	h.Release(2)
	assert.Equal(t, int64(math.MaxInt64), h.Oldest())
}

// Deleted segments' files are overwritten by later ones. A write torn
// right after its records (no end frame) leaves the previous life's
// records there, frame-aligned; the segment's stamp keeps replay from
// taking them for its own: the traces they belong to were decided and
// sent, and would be sent again.
func TestDurableRecycledSegmentsReplayOnlyTheirOwnRecords(t *testing.T) {
	dir := t.TempDir()
	const perSegment = 4
	l, err := Open(dir, Options{Sync: SyncInterval, SegmentBytes: 1})
	require.NoError(t, err)
	record := func(n int) func(*Batch) {
		return func(b *Batch) {
			for i := range perSegment { // one write a segment, records of one size
				b.AddFragment(id(byte(n*perSegment+i)), int64(n), bytes.Repeat([]byte{byte(n)}, 40))
			}
		}
	}
	// First life: segments 0-5, all decided and deleted.
	for n := range 6 {
		require.NoError(t, write(t, l, record(n)))
	}
	_, err = l.Retain(math.MaxInt64)
	require.NoError(t, err)
	previous := map[string][]byte{}
	spares, _ := filepath.Glob(filepath.Join(dir, "spare-*.wal"))
	require.NotEmpty(t, spares)
	for _, sp := range spares {
		b, err := os.ReadFile(sp)
		require.NoError(t, err)
		previous[string(b[segmentHeader+frameHeader:segmentHeader+frameHeader+40])] = b
	}
	// Second life: one write into a recycled file, then killed mid-write:
	// its records written, its end frame not.
	require.NoError(t, write(t, l, func(b *Batch) { b.AddFragment(id(200), 50, bytes.Repeat([]byte{200}, 40)) }))
	last := filepath.Join(dir, segmentName(l.fileSeq))
	now, err := os.ReadFile(last)
	require.NoError(t, err)
	require.EqualValues(t, flagRecycled, binary.LittleEndian.Uint32(now[16:20]), "the segment reuses a deleted one's file")
	end := int(l.fileAt)
	var before []byte
	for _, b := range previous {
		if len(b) >= end+frameHeader && bytes.Equal(b[end+frameHeader:], now[end+frameHeader:len(b)]) {
			before = b
		}
	}
	require.NotNil(t, before, "the previous life's bytes follow the end frame")
	copy(now[end:end+frameHeader], before[end:end+frameHeader])
	require.NoError(t, os.WriteFile(last, now, 0o600))

	got, st, _ := replayAll(t, dir, Options{Sync: SyncNone})
	var ids []byte
	for _, f := range got {
		ids = append(ids, f.ID[15])
	}
	assert.Equal(t, []byte{200}, ids, "only the second life's record")
	assert.EqualValues(t, 1, st.Corrupt, "the torn write counted")
}

// Killed between renaming a spare to the next segment and writing its
// header: the file holds only its previous life, and replays nothing.
func TestDurableRecycledSegmentWithoutItsHeaderReplaysNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncInterval, SegmentBytes: 1})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "decided")))
	require.NoError(t, write(t, l, frag(2, 20, "buffered")))
	_, err = l.Retain(15)
	require.NoError(t, err)
	next := l.segs[len(l.segs)-1].seq
	require.NoError(t, os.Rename(filepath.Join(dir, spareName(0)), filepath.Join(dir, segmentName(next))))

	got, st, _ := replayAll(t, dir, Options{Sync: SyncNone})
	require.Len(t, got, 1)
	assert.Equal(t, "buffered", string(got[0].Encoded))
	assert.Zero(t, st.Corrupt)
}

// Spares never hold the log at its bound: past it, they are unlinked
// before a write is refused, and a restart removes those left behind.
func TestDurableSparesGiveWayToRecords(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncInterval, SegmentBytes: 1, MaxBytes: 800})
	require.NoError(t, err)
	rec := string(bytes.Repeat([]byte("r"), 150))
	for n := range 4 {
		require.NoError(t, write(t, l, frag(byte(n), int64(n), rec)))
	}
	_, err = l.Retain(math.MaxInt64)
	require.NoError(t, err)
	spares, _ := filepath.Glob(filepath.Join(dir, "spare-*.wal"))
	require.NotEmpty(t, spares)
	assert.False(t, l.Full(), "spares are not records")
	for n := 4; n < 8; n++ {
		require.NoError(t, write(t, l, frag(byte(n), int64(n), rec)), "write %d", n)
	}
	assert.LessOrEqual(t, diskBytes(t, dir), int64(800+200+frameHeader), "within the bound, less one write")
	assert.Equal(t, diskBytes(t, dir), l.Size())

	_, _, l = replayAll(t, dir, Options{Sync: SyncNone})
	spares, _ = filepath.Glob(filepath.Join(dir, "spare-*.wal"))
	assert.Empty(t, spares, "removed at open")
	require.NoError(t, l.Discard())
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries)
}

// Segments written before segments had a header (records unstamped, no
// end frame) are read as they were written: a log left by the previous
// release replays after an upgrade.
func TestDurableReplayReadsSegmentsWithoutAHeader(t *testing.T) {
	dir := t.TempDir()
	var b Batch // a batch's bytes are records as that release wrote them
	b.AddFragment(id(1), 10, []byte("old"))
	b.AddFragment(id(2), 11, []byte("older"))
	b.AddDone(id(2), 12)
	require.NoError(t, os.WriteFile(filepath.Join(dir, segmentName(3)), append(b.buf, 1, 2), 0o600))

	got, st, l := replayAll(t, dir, Options{Sync: SyncNone})
	require.Len(t, got, 1)
	assert.Equal(t, "old", string(got[0].Encoded))
	assert.EqualValues(t, 1, st.Corrupt, "its torn tail counted as before")
	require.NoError(t, write(t, l, frag(4, 20, "new")))
	assert.Equal(t, uint64(4), l.fileSeq, "new records go to a segment after it")
}
