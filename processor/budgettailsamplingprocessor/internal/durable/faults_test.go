package durable

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultFiles is the operating system's files with faults on demand: the
// next n writes, syncs or truncates fail with EIO (a write after writing
// half of what it was given, with short).
type faultFiles struct {
	mu                                   sync.Mutex
	failWrites, shortWrites, failSyncs   int
	failTruncates, failDirSyncs, dirSync int
}

type faultFile struct {
	*os.File
	fs *faultFiles
}

func (fs *faultFiles) take(n *int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (fs *faultFiles) OpenSegment(path string) (segmentFile, error) {
	f, err := osFiles{}.OpenSegment(path)
	if err != nil {
		return nil, err
	}
	return faultFile{f.(*os.File), fs}, nil
}

func (fs *faultFiles) SyncDir(dir string) error {
	fs.mu.Lock()
	fs.dirSync++
	fs.mu.Unlock()
	if fs.take(&fs.failDirSyncs) {
		return syscall.EIO
	}
	return osFiles{}.SyncDir(dir)
}

func (f faultFile) Write(b []byte) (int, error) {
	switch {
	case f.fs.take(&f.fs.failWrites):
		return 0, syscall.EIO
	case f.fs.take(&f.fs.shortWrites):
		n, _ := f.File.Write(b[:len(b)/2])
		return n, syscall.EIO
	}
	return f.File.Write(b)
}

func (f faultFile) Sync() error {
	if f.fs.take(&f.fs.failSyncs) {
		return syscall.EIO
	}
	return f.File.Sync()
}

func (f faultFile) Truncate(size int64) error {
	if f.fs.take(&f.fs.failTruncates) {
		return syscall.EIO
	}
	return f.File.Truncate(size)
}

func names(got []Fragment) []string {
	var n []string
	for _, f := range got {
		n = append(n, string(f.Encoded))
	}
	return n
}

// A second log on a directory in use fails at Open, naming the directory
// and the holder; the first keeps every record (two logs on one directory
// wrote the same segment, and one's Retain deleted the other's undecided
// traces). The lock goes with Close, and with the process.
func TestLockSecondLogOnADirectoryFailsNamingTheHolder(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir, Options{Sync: SyncNone, SegmentBytes: 1})
	require.NoError(t, err)
	require.NoError(t, write(t, a, frag(1, 10, "a's, undecided")))

	_, err = Open(dir, Options{Sync: SyncNone, SegmentBytes: 1})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), dir)
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", os.Getpid()))

	require.NoError(t, a.Close())
	got, _, b := replayAll(t, dir, Options{})
	assert.Equal(t, []string{"a's, undecided"}, names(got))
	require.NoError(t, b.Close())
}

// Requests A and B share a generation, and its fsync fails: both are
// refused, not only the one whose Commit ran the fsync (Linux reports a
// writeback error once; a second fsync succeeds with the bytes lost). The
// failure is counted, and the next write goes to a new segment.
func TestFsyncFailureFailsEveryWriteSinceTheLastGoodSync(t *testing.T) {
	fs := &faultFiles{}
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncAlways, SegmentBytes: 1 << 20, files: fs})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "before")))
	segs := l.Segments()

	var a, b Batch
	frag(2, 20, "A")(&a)
	frag(3, 21, "B")(&b)
	ta, tb := l.Append(&a), l.Append(&b)
	fs.failSyncs = 1
	require.ErrorIs(t, l.Commit(ta), syscall.EIO)
	require.ErrorIs(t, l.Commit(tb), syscall.EIO, "B shared A's failed fsync: it must not be acknowledged")
	assert.EqualValues(t, 1, l.SyncFailures())
	assert.Equal(t, segs+1, l.Segments(), "the segment is abandoned")

	require.NoError(t, write(t, l, frag(4, 30, "after")))
	got, _, _ := replayAll(t, dir, Options{})
	assert.Contains(t, names(got), "before")
	assert.Contains(t, names(got), "after")
}

// With sync interval a failed flush cannot refuse what was acknowledged,
// but it is counted and its segment abandoned.
func TestFsyncFailureWithSyncIntervalIsCountedAndAbandonsTheSegment(t *testing.T) {
	fs := &faultFiles{}
	l, err := Open(t.TempDir(), Options{Sync: SyncInterval, SegmentBytes: 1 << 20, files: fs})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "x")))
	segs := l.Segments()
	fs.failSyncs = 1
	require.ErrorIs(t, l.Sync(), syscall.EIO)
	assert.EqualValues(t, 1, l.SyncFailures())
	assert.Equal(t, segs+1, l.Segments())
	require.NoError(t, write(t, l, frag(2, 20, "y")))
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())
}

// The directory is flushed when a segment is created and when segments are
// removed (sync interval and always), so that a power loss neither loses a
// new segment's entry nor brings back deleted ones; a failed directory
// flush fails the write that created the segment.
func TestFsyncOfTheDirectoryOnRotationAndRemoval(t *testing.T) {
	for _, mode := range []string{SyncNone, SyncInterval, SyncAlways} {
		t.Run(mode, func(t *testing.T) {
			fs := &faultFiles{}
			l, err := Open(t.TempDir(), Options{Sync: mode, SegmentBytes: 1, files: fs})
			require.NoError(t, err)
			for at := int64(1); at <= 3; at++ {
				require.NoError(t, write(t, l, frag(byte(at), at, "x"))) // a segment each
			}
			created := fs.dirSync
			n, err := l.Retain(upTo(100))
			require.NoError(t, err)
			require.Equal(t, 3, n)
			removed := fs.dirSync
			switch mode {
			case SyncNone:
				assert.Zero(t, fs.dirSync)
			case SyncAlways: // before each acknowledgement
				assert.Equal(t, 3, created, "one per segment created")
				assert.Equal(t, 4, removed, "one for the removals")
				fs.failDirSyncs = 1
				assert.ErrorIs(t, write(t, l, frag(9, 200, "y")), syscall.EIO)
				assert.NoError(t, write(t, l, frag(9, 201, "y")))
			case SyncInterval: // with the segments' bytes, not under the write lock
				assert.Zero(t, removed, "none inline")
				require.NoError(t, l.Sync())
				assert.Equal(t, 1, fs.dirSync, "one flush for what changed since the last")
				require.NoError(t, l.Sync())
				assert.Equal(t, 1, fs.dirSync, "nothing changed since")
				require.NoError(t, write(t, l, frag(9, 200, "y"))) // a new segment
				fs.failDirSyncs = 1
				assert.ErrorIs(t, l.Sync(), syscall.EIO)
				assert.True(t, l.Failing(), "a failed flush of the directory is a failed flush")
				require.NoError(t, l.Sync(), "flushed again")
				assert.Equal(t, 3, fs.dirSync)
			}
		})
	}
}

// EIO on write refuses the request; a short write's torn frame is cut off,
// so that later records follow a whole one; when the cut fails too, the
// segment is abandoned, and replay skips the torn bytes to the end of it.
// Nothing acknowledged is lost either way.
func TestDurableWriteFaultsLoseNothingAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(fs *faultFiles)
		torn  int64
	}{
		{"EIO", func(fs *faultFiles) { fs.failWrites = 1 }, 0},
		{"short write", func(fs *faultFiles) { fs.shortWrites = 1 }, 0},
		{"short write, failed truncate", func(fs *faultFiles) { fs.shortWrites, fs.failTruncates = 1, 1 }, 1},
	} {
		// Segments of 1 byte: the failed write is also the one that rotates.
		for _, segment := range []int64{1 << 20, 1} {
			t.Run(fmt.Sprintf("%s, segments of %d bytes", tc.name, segment), func(t *testing.T) {
				fs := &faultFiles{}
				dir := t.TempDir()
				l, err := openLog(t, dir, Options{Sync: SyncAlways, SegmentBytes: segment, files: fs})
				require.NoError(t, err)
				require.NoError(t, write(t, l, frag(1, 10, "before")))
				tc.fault(fs)
				require.ErrorIs(t, write(t, l, frag(2, 20, "refused")), syscall.EIO)
				require.NoError(t, write(t, l, frag(3, 30, "after")))
				got, st, _ := replayAll(t, dir, Options{})
				assert.Equal(t, []string{"before", "after"}, names(got))
				assert.Equal(t, tc.torn, st.TornTails)
				assert.Zero(t, st.CorruptRecords, "nothing written after torn bytes")
			})
		}
	}
}

// A full log still writes marks (room is kept for them below MaxBytes):
// refused, their traces would be sent again after a crash, and the
// segments they free would stay.
func TestDurableMarksHaveRoomAtMaxBytes(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1 << 16, MaxBytes: 4 << 16})
	require.NoError(t, err)
	big := string(bytes.Repeat([]byte("y"), 1<<16))
	for i := 1; !l.Full(); i++ {
		require.NoError(t, write(t, l, frag(byte(i), int64(i), big)))
	}
	require.ErrorIs(t, write(t, l, frag(100, 100, "refused")), ErrFull)
	require.NoError(t, write(t, l, func(b *Batch) { b.AddDone(id(1), 50) }), "a mark at max_bytes")
	require.NoError(t, write(t, l, func(b *Batch) { b.AddSettled(id(2), 50) }))
	got, _, _ := replayAll(t, dir, Options{})
	for _, f := range got {
		assert.NotEqual(t, id(1), f.ID, "marked done")
	}
}

// Retain fixes which segments may go before it asks for the oldest
// arrival: a request that lands after its part of the buffer was looked at
// (the buffer empty: oldest "none"), and rotates the segment, is not
// deleted with it.
func TestDurableRetainBoundIsFixedBeforeTheOldestArrivalIsRead(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone, SegmentBytes: 1})
	require.NoError(t, err)
	n, err := l.Retain(func() int64 {
		oldest := int64(1<<63 - 1) // the buffer was empty when looked at
		require.NoError(t, write(t, l, frag(1, 10, "acknowledged, undecided")))
		return oldest
	})
	require.NoError(t, err)
	assert.Zero(t, n)
	got, _, _ := replayAll(t, dir, Options{})
	assert.Equal(t, []string{"acknowledged, undecided"}, names(got))
}

// A corrupt record in the middle of a segment is skipped to the next whole
// one, and counted apart from torn tails.
func TestCorruptRecordResyncsToTheNextWholeOne(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncNone})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 1, "first")))
	require.NoError(t, write(t, l, frag(2, 2, "second")))
	require.NoError(t, write(t, l, frag(3, 3, "third")))
	require.NoError(t, l.Close())
	path := filepath.Join(dir, segmentName(0))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	first := frameHeader + 1 + idLen + 8 + len("first")
	b[first+frameHeader+3] ^= 0xff // in the second record's body
	require.NoError(t, os.WriteFile(path, b, 0o600))
	got, st, _ := replayAll(t, dir, Options{})
	assert.Equal(t, []string{"first", "third"}, names(got))
	assert.Equal(t, ReplayStats{Fragments: 2, CorruptRecords: 1, CorruptBytes: int64(frameHeader + 1 + idLen + 8 + len("second"))}, st)
}

// A segment holding several traces (fragments interleaved, one trace
// marked done) with one byte flipped at every offset in turn: replay never
// panics, gives back every fragment whose record is intact (and the done
// trace's, when its mark is the damaged record), nothing else, and counts
// the damage.
func TestCorruptByteAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncNone})
	require.NoError(t, err)
	type rec struct {
		start, end int
		name       string
		mark       bool
	}
	var recs []rec
	off := 0
	add := func(b *Batch, name string, mark bool) {
		recs = append(recs, rec{start: off, end: off + b.Len(), name: name, mark: mark})
		off += b.Len()
		require.NoError(t, l.Commit(l.Append(b)))
	}
	for i := range 12 {
		trace := byte(i % 4)
		var b Batch
		b.AddFragment(id(trace), int64(i), bytes.Repeat([]byte{'a' + trace}, 5+i*3))
		add(&b, fmt.Sprintf("t%d-%d", trace, i), false)
	}
	var done Batch
	done.AddDone(id(3), 100) // trace 3 decided after all its fragments
	add(&done, "done t3", true)
	require.NoError(t, l.Close())
	whole, err := os.ReadFile(filepath.Join(dir, segmentName(0)))
	require.NoError(t, err)
	require.Equal(t, off, len(whole))

	for at := range whole {
		sub := t.TempDir()
		damaged := bytes.Clone(whole)
		damaged[at] ^= 0x5a
		require.NoError(t, os.WriteFile(filepath.Join(sub, segmentName(0)), damaged, 0o600))
		var want []string
		markLost := false
		for _, r := range recs {
			if r.mark && at >= r.start && at < r.end {
				markLost = true
			}
		}
		for i, r := range recs {
			if r.mark || (at >= r.start && at < r.end) || (i%4 == 3 && !markLost) {
				continue
			}
			want = append(want, r.name)
		}
		got, st, l := replayAll(t, sub, Options{})
		var gotNames []string
		for _, f := range got {
			gotNames = append(gotNames, fmt.Sprintf("t%d-%d", f.ID[15], (len(f.Encoded)-5)/3))
		}
		sort.Strings(want)
		sort.Strings(gotNames)
		require.Equal(t, want, gotNames, "byte %d flipped", at)
		require.Positive(t, st.CorruptRecords+st.TornTails, "byte %d flipped: counted", at)
		require.NoError(t, l.Close())
	}
}

// Each pipeline's instance has its own directory; a log an older version
// left under the component's name alone is taken over by the first
// instance that starts, and replayed there.
func TestDurableInstanceDirectoriesAndTheLegacyOne(t *testing.T) {
	root := t.TempDir()
	assert.Equal(t, filepath.Join(root, "budget_tail_sampling_b__traces_x"), InstanceDir(root, "budget_tail_sampling/b", "traces/x"))

	legacy, err := Open(InstanceDir(root, "budget_tail_sampling", ""), Options{Sync: SyncNone})
	require.NoError(t, err)
	require.NoError(t, write(t, legacy, frag(1, 10, "left by the old version")))
	early, err := OpenInstance(root, "budget_tail_sampling", "traces", Options{Sync: SyncNone})
	require.NoError(t, err, "the old process still holds it: left alone")
	require.NoError(t, early.Close())
	require.NoError(t, legacy.Close())
	require.NoError(t, os.RemoveAll(InstanceDir(root, "budget_tail_sampling", "traces")))

	a, err := OpenInstance(root, "budget_tail_sampling", "traces", Options{Sync: SyncNone})
	require.NoError(t, err)
	var got []string
	_, err = a.Replay(func(f Fragment) { got = append(got, string(f.Encoded)) })
	require.NoError(t, err)
	assert.Equal(t, []string{"left by the old version"}, got)
	b, err := OpenInstance(root, "budget_tail_sampling", "traces/2", Options{Sync: SyncNone})
	require.NoError(t, err)
	got = nil
	_, err = b.Replay(func(f Fragment) { got = append(got, string(f.Encoded)) })
	require.NoError(t, err)
	assert.Empty(t, got, "the second pipeline's log is its own")
	_, err = OpenInstance(root, "budget_tail_sampling", "traces", Options{Sync: SyncNone})
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
}

// A failed write or flush leaves the log failing (the caller refuses
// requests) until a write succeeds again; Probe is such a write, and
// replays nothing.
func TestDurableFailingUntilAWriteSucceeds(t *testing.T) {
	fs := &faultFiles{}
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncAlways, SegmentBytes: 1 << 20, files: fs})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 10, "x")))
	assert.False(t, l.Failing())
	fs.failWrites = 1
	require.Error(t, write(t, l, frag(2, 20, "refused")))
	assert.True(t, l.Failing())
	fs.failWrites = 1
	require.Error(t, l.Probe(), "still failing")
	assert.True(t, l.Failing())
	require.NoError(t, l.Probe())
	assert.False(t, l.Failing())
	fs.failSyncs = 1
	require.Error(t, write(t, l, frag(3, 30, "refused by its flush")))
	assert.True(t, l.Failing())
	require.NoError(t, l.Probe())
	got, st, _ := replayAll(t, dir, Options{})
	// The write whose flush failed reached the page cache: it may come
	// back (its caller decided its traces and marks them done).
	assert.Equal(t, []string{"x", "refused by its flush"}, names(got))
	assert.Zero(t, st.TornTails+st.CorruptRecords)
}

// A corrupt length claiming hundreds of MiB makes replay allocate nothing
// near it: what it reads is bounded by the file (it allocated the claimed
// length, up to 256 MiB, before).
func TestCorruptLengthAllocatesNoMoreThanTheFile(t *testing.T) {
	dir := t.TempDir()
	l, err := openLog(t, dir, Options{Sync: SyncNone})
	require.NoError(t, err)
	require.NoError(t, write(t, l, frag(1, 1, "first")))
	require.NoError(t, l.Close())
	path := filepath.Join(dir, segmentName(0))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0, 0, 0, 12, 1, 2, 3, 4, kindFragment, 9, 9, 9}) // a body of 192 MiB, claimed
	require.NoError(t, err)
	require.NoError(t, f.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, st, _ := replayAll(t, dir, Options{})
	runtime.ReadMemStats(&after)
	assert.Equal(t, []string{"first"}, names(got))
	assert.EqualValues(t, 1, st.TornTails)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by replay")
}
