// Package durable is the tail buffer's write-ahead log: an append-only
// sequence of segment files holding every buffered fragment, encoded as the
// buffer holds it, and a mark for every trace once it is decided and
// forwarded. A sampler that restarts reads back the fragments of traces
// with no mark (Replay) and decides them as usual.
//
// It owns the directory (locked for the log's lifetime), the record
// format, syncing, and which segments may be deleted; it must not know how
// traces are buffered or decided: the caller says when the oldest buffered
// fragment arrived (Retain), and a segment whose records all arrived before
// that is deleted, oldest first.
//
// A record is framed as [u32 body length][u32 CRC-32C of the body][body],
// little-endian; a body is [kind][16-byte trace ID][i64 Unix ns] then, for
// a fragment, its OTLP encoding. A fragment's time is its arrival, a done
// mark's its trace's decision: replay leaves out a trace's fragments that
// arrived up to its last decision. A handed fragment (one passed to the
// sampler that owns its trace, queued there) is replayed like a fragment
// until a settled mark with its trace ID and arrival says the peer took it
// or it came back into the buffer (and was written again as a fragment).
// A reader skips a frame that is short or fails its checksum to the next
// whole frame (a corrupt record), or, when none follows, to the end of the
// segment (a torn tail), and counts the two apart.
//
// The guarantees are those of etcd's WAL and Prometheus' wlog: a failed
// fsync fails every write since the last good one and abandons the
// segment (Linux reports a writeback error once: a later fsync of the same
// file may succeed with the bytes lost); the directory is fsynced when a
// segment is created or removed; marks have room reserved at MaxBytes, so
// that a full log never makes decided traces replay.
package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sync policies, in a database's terms.
const (
	// SyncNone writes each acknowledged request to the file (the OS page
	// cache) before the acknowledgement: it survives the process, not the
	// node.
	SyncNone = "none"
	// SyncInterval writes as none does and flushes the file to the device
	// every interval: a lost node loses at most the last interval.
	SyncInterval = "interval"
	// SyncAlways flushes to the device before each acknowledgement
	// (concurrent requests share a flush).
	SyncAlways = "always"
)

const (
	kindFragment byte = 1
	kindDone     byte = 2
	kindHanded   byte = 3
	kindSettled  byte = 4

	frameHeader = 8
	idLen       = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrFull is a Commit's error while the log is at its size bound.
var ErrFull = errors.New("durable log at max_bytes")

// errDiscarded is a Commit's error after Discard.
var errDiscarded = errors.New("durable log discarded")

// errFateForgotten is a Commit's error when more generations were written
// since its own than the log remembers: it cannot tell whether its records
// were written, so the caller must not take them as written.
var errFateForgotten = errors.New("durable log: the outcome of this write is no longer known")

// Options configure a Log.
type Options struct {
	Sync         string
	SyncInterval time.Duration
	// SegmentBytes is the size past which the next write starts a new
	// segment: what a deletion frees at once.
	SegmentBytes int64
	// MaxBytes bounds the log on disk. Fragments are refused (ErrFull) once
	// the log is within one segment of it; marks, which let segments go,
	// only at MaxBytes itself.
	MaxBytes int64
	// OnSync, when set, is told how long each flush to the device took.
	OnSync func(time.Duration)

	// files is the operating system's unless a test injects faults.
	files fileSystem
}

// segmentFile is what the log does with a segment it writes.
type segmentFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// fileSystem opens segments for appending and flushes the directory's
// entries; tests put faults (EIO, short writes, a failed truncate) here.
type fileSystem interface {
	OpenSegment(path string) (segmentFile, error)
	SyncDir(dir string) error
}

type osFiles struct{}

func (osFiles) OpenSegment(path string) (segmentFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

func (osFiles) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type segment struct {
	seq  uint64
	size int64
	// maxAt is the latest arrival of a fragment in it; done marks carry
	// none, and a segment of marks only is deleted as soon as it is behind.
	maxAt int64
}

// fates remembers how many generations' outcomes: a Commit asks about its
// generation right after appending, a few writes later at most; one asked
// later than this is answered errFateForgotten, never a guess.
const fates = 1024

// Ticket is what Append gives for Commit: the generation the batch joined,
// and whether it holds marks only (written even at MaxBytes).
type Ticket struct {
	gen   uint64
	marks bool
}

// Log is the write-ahead log of one processor; safe for concurrent use.
// What is appended joins the pending generation; a write takes the whole
// generation at once (group commit), and each Commit learns its own
// generation's fate: written, or failed and dropped (its callers decide
// their traces at once, so nothing depends on the lost bytes).
type Log struct {
	dir   string
	opts  Options
	files fileSystem
	lock  *os.File

	batches      sync.Pool
	handed       *Holds[*Handed]
	failures     atomic.Int64
	refused      atomic.Int64
	syncFailures atomic.Int64
	// failing is set by a failed write or flush and cleared by the next
	// good write (a request's, or Probe's).
	failing        atomic.Bool
	tornTails      atomic.Int64
	corruptRecords atomic.Int64
	skipped        atomic.Int64

	mu sync.Mutex
	// pending holds the generation's batches with fragments, pendingMarks
	// its batches of marks only: at MaxBytes the marks are written alone.
	pending, pendingMarks []byte
	spare, spareMarks     []byte
	pendingMaxAt          int64
	gen                   uint64     // the pending generation
	segs                  []*segment // oldest first; the last is where pending goes
	size                  int64      // on disk, every segment

	writeMu  sync.Mutex  // one writer at a time; held across write and sync
	file     segmentFile // the last segment's, opened by the writer
	fileSeq  uint64
	wroteGen uint64 // generations up to this one have a fate
	fate     [fates]error
	markFate [fates]error
	dirty    bool // written since the last sync
	// dirDirty: a segment was created or removed since the directory was
	// last flushed (sync interval).
	dirDirty bool
	// unsynced is the first generation written to file since its last good
	// sync (0: none): a failed sync fails it and every later one.
	unsynced uint64
	// retired are segments rotated out with sync interval, flushed and
	// closed by the next Sync.
	retired []segmentFile
}

func segmentName(seq uint64) string { return fmt.Sprintf("wal-%016x.log", seq) }

func parseSegment(name string) (uint64, bool) {
	if !strings.HasPrefix(name, "wal-") || !strings.HasSuffix(name, ".log") {
		return 0, false
	}
	seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "wal-"), ".log"), 16, 64)
	return seq, err == nil
}

// Open opens the log in dir, creating it, takes the directory's lock (a
// second Open of it, in this process or another, fails with ErrLocked
// until Close or Discard), and checks that it can write there. The
// segments already in dir are what Replay reads; new records go to a new
// segment after them.
func Open(dir string, opts Options) (*Log, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l, err := open(dir, opts)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	l.lock = lock
	return l, nil
}

func open(dir string, opts Options) (*Log, error) {
	probe := filepath.Join(dir, ".probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return nil, err
	}
	_ = os.Remove(probe)
	l := &Log{dir: dir, opts: opts, files: opts.files, gen: 1, handed: NewHolds[*Handed]()}
	if l.files == nil {
		l.files = osFiles{}
	}
	l.batches.New = func() any { return new(Batch) }
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var next uint64
	for _, e := range entries {
		seq, ok := parseSegment(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		// maxAt unknown until replayed: the newest possible, so that
		// nothing is deleted before Replay has read it.
		l.segs = append(l.segs, &segment{seq: seq, size: info.Size(), maxAt: 1<<63 - 1})
		l.size += info.Size()
		next = max(next, seq+1)
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].seq < l.segs[j].seq })
	l.segs = append(l.segs, &segment{seq: next})
	return l, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Size is the log's bytes on disk.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// fragmentLimit is the size from which fragments are refused: a segment
// below MaxBytes, the room kept for marks.
func (l *Log) fragmentLimit() int64 {
	return l.opts.MaxBytes - min(l.opts.SegmentBytes, l.opts.MaxBytes/4)
}

// Full reports whether a Commit of fragments would fail with ErrFull.
func (l *Log) Full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.MaxBytes > 0 && l.size >= l.fragmentLimit()
}

// Segments is how many segment files the log has.
func (l *Log) Segments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.segs)
}

// NewBatch is an empty batch; give it back with Free.
func (l *Log) NewBatch() *Batch { return l.batches.Get().(*Batch) }

// Free empties b and keeps it for NewBatch.
func (l *Log) Free(b *Batch) {
	b.Reset()
	l.batches.Put(b)
}

// Failing reports whether the last write or flush failed (an I/O error,
// a full disk) and no write has succeeded since: the caller refuses
// requests meanwhile rather than acknowledge what may not be written.
func (l *Log) Failing() bool { return l.failing.Load() }

// Probe writes a record that changes nothing (a settled mark of no trace)
// to learn whether the log can be written again; a success clears Failing.
func (l *Log) Probe() error {
	b := l.NewBatch()
	defer l.Free(b)
	b.AddSettled([16]byte{}, 0)
	return l.Commit(l.Append(b))
}

// ErrUnwritable is the error a request is refused with while the log
// cannot take it: not permanent, the sender tries again.
var ErrUnwritable = errors.New("the durable log cannot be written (I/O error or full disk): request refused")

// Refuse counts a request refused because the log could not take it, and
// returns the error to refuse it with (ErrUnwritable, and cause if any).
func (l *Log) Refuse(cause error) error {
	l.refused.Add(1)
	if cause == nil {
		return ErrUnwritable
	}
	return fmt.Errorf("%w: %w", ErrUnwritable, cause)
}

// Refused counts the requests refused (Refuse).
func (l *Log) Refused() int64 { return l.refused.Load() }

// Failures counts the Commits that failed.
func (l *Log) Failures() int64 { return l.failures.Load() }

// SyncFailures counts the flushes to the device that failed: each failed
// the writes since the last good flush and abandoned its segment.
func (l *Log) SyncFailures() int64 { return l.syncFailures.Load() }

// TornTails counts the segments Replay found cut short or corrupt to
// their end; CorruptRecords the corrupt stretches it skipped to a whole
// record after them.
func (l *Log) TornTails() int64 { return l.tornTails.Load() }

// CorruptRecords counts the corrupt stretches Replay skipped in the middle
// of a segment (see TornTails).
func (l *Log) CorruptRecords() int64 { return l.corruptRecords.Load() }

// Skipped is the bytes of torn tails and corrupt records Replay skipped.
func (l *Log) Skipped() int64 { return l.skipped.Load() }

// Batch is one request's records, framed outside the log's lock.
type Batch struct {
	buf       []byte
	maxAt     int64
	fragments bool
}

// Len is how many bytes the batch holds.
func (b *Batch) Len() int { return len(b.buf) }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() { b.buf, b.maxAt, b.fragments = b.buf[:0], 0, false }

func (b *Batch) frame(body func(b []byte) []byte) {
	start := len(b.buf)
	b.buf = append(b.buf, make([]byte, frameHeader)...)
	b.buf = body(b.buf)
	f := b.buf[start:]
	binary.LittleEndian.PutUint32(f[0:4], uint32(len(f)-frameHeader))
	binary.LittleEndian.PutUint32(f[4:8], crc32.Checksum(f[frameHeader:], castagnoli))
}

// AddFragment adds a buffered fragment of trace id that arrived at (Unix
// ns).
func (b *Batch) AddFragment(id [16]byte, at int64, encoded []byte) {
	b.addEncoded(kindFragment, id, at, encoded)
}

func (b *Batch) addEncoded(kind byte, id [16]byte, at int64, encoded []byte) {
	b.frame(func(d []byte) []byte {
		d = append(d, kind)
		d = append(d, id[:]...)
		d = binary.LittleEndian.AppendUint64(d, uint64(at))
		return append(d, encoded...)
	})
	b.maxAt = max(b.maxAt, at)
	b.fragments = true
}

// AddHanded adds a fragment of trace id that arrived at (Unix ns) and is
// queued for another sampler: replayed, as a fragment, unless AddSettled
// follows with the same id and at.
func (b *Batch) AddHanded(id [16]byte, at int64, encoded []byte) {
	b.addEncoded(kindHanded, id, at, encoded)
}

// AddSettled marks the handed fragments of trace id that arrived at as no
// longer needed: the peer took them, or they came back and were added
// again as fragments.
func (b *Batch) AddSettled(id [16]byte, at int64) { b.addMark(kindSettled, id, at) }

// AddDone marks trace id decided at (Unix ns) and forwarded: Replay leaves
// out its fragments that arrived up to then.
func (b *Batch) AddDone(id [16]byte, at int64) { b.addMark(kindDone, id, at) }

func (b *Batch) addMark(kind byte, id [16]byte, at int64) {
	b.frame(func(d []byte) []byte {
		d = append(d, kind)
		d = append(d, id[:]...)
		return binary.LittleEndian.AppendUint64(d, uint64(at))
	})
}

// MarkDone writes, now, the done marks of traces decided at (Unix ns) and
// taken by the next consumer. A mark lost in a crash makes its trace
// decided, and sent, again after the restart.
func MarkDone[ID ~[16]byte](l *Log, ids []ID, at int64) error {
	if len(ids) == 0 {
		return nil
	}
	b := l.NewBatch()
	defer l.Free(b)
	for _, id := range ids {
		b.AddDone(id, at)
	}
	return l.Commit(l.Append(b))
}

// Append adds the batch's records to the pending generation, and returns
// the ticket to Commit them with. A mark lost in a crash makes its trace
// decided again on replay (sent at least once).
func (l *Log) Append(b *Batch) Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := Ticket{gen: l.gen, marks: !b.fragments}
	if len(l.segs) == 0 { // discarded: nothing is written any more
		return t
	}
	if t.marks {
		l.pendingMarks = append(l.pendingMarks, b.buf...)
	} else {
		l.pending = append(l.pending, b.buf...)
		l.pendingMaxAt = max(l.pendingMaxAt, b.maxAt)
	}
	return t
}

// Commit returns once the ticket's generation is written (and, with sync
// always, flushed to the device), or failed: then its records are
// dropped, and the caller must not acknowledge what it appended. Fragments
// are refused with ErrFull within a segment of MaxBytes, marks at it.
func (l *Log) Commit(t Ticket) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.wroteGen < t.gen {
		l.writeLocked()
	}
	err := l.fateOf(t)
	if err == nil && l.opts.Sync == SyncAlways {
		// A failed flush fails this generation and every one since the
		// last good flush: fateOf says so.
		if l.syncLocked() != nil {
			err = l.fateOf(t)
		}
	}
	if err != nil {
		l.failures.Add(1)
	}
	return err
}

// fateOf is what became of the ticket's records; called with writeMu held.
func (l *Log) fateOf(t Ticket) error {
	if l.wroteGen-t.gen >= fates {
		return errFateForgotten
	}
	if t.marks {
		return l.markFate[t.gen%fates]
	}
	return l.fate[t.gen%fates]
}

// CommitPending writes what is pending (marks, with no request to carry
// them).
func (l *Log) CommitPending() error {
	l.mu.Lock()
	gen, empty := l.gen, len(l.pending) == 0 && len(l.pendingMarks) == 0
	l.mu.Unlock()
	if empty {
		return nil
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.wroteGen < gen {
		l.writeLocked()
	}
	err := l.fateOf(Ticket{gen: gen, marks: true})
	if ferr := l.fateOf(Ticket{gen: gen}); err == nil {
		err = ferr
	}
	if err == nil && l.opts.Sync == SyncAlways {
		err = l.syncLocked()
	}
	return err
}

// writeLocked writes the pending generation and records its fate; called
// with writeMu held.
func (l *Log) writeLocked() {
	l.mu.Lock()
	frags, marks, gen := l.pending, l.pendingMarks, l.gen
	l.pending, l.pendingMarks = l.spare[:0], l.spareMarks[:0]
	l.gen++
	if len(l.segs) == 0 {
		l.mu.Unlock()
		l.wroteGen = gen
		l.fate[gen%fates], l.markFate[gen%fates] = errDiscarded, errDiscarded
		return
	}
	seg := l.segs[len(l.segs)-1]
	// The generation's arrivals go to the segment it is written to, set
	// before a rotation can make it deletable.
	seg.maxAt = max(seg.maxAt, l.pendingMaxAt)
	l.pendingMaxAt = 0
	var fragErr, markErr error
	if l.opts.MaxBytes > 0 {
		if l.size >= l.fragmentLimit() {
			fragErr = ErrFull
		}
		if l.size >= l.opts.MaxBytes {
			markErr = ErrFull
		}
	}
	buf := frags[:0]
	if fragErr == nil {
		buf = frags
	}
	if markErr == nil {
		buf = append(buf, marks...)
	}
	rotate := l.opts.SegmentBytes > 0 && len(buf) > 0 && seg.size+int64(len(buf)) >= l.opts.SegmentBytes
	if rotate {
		// What is appended from now on goes to the next segment.
		l.segs = append(l.segs, &segment{seq: seg.seq + 1})
	}
	l.mu.Unlock()

	var err error
	if len(buf) > 0 {
		err = l.writeTo(seg, buf)
	}
	l.mu.Lock()
	l.spare, l.spareMarks = buf, marks
	if err == nil {
		seg.size += int64(len(buf))
		l.size += int64(len(buf))
	}
	l.mu.Unlock()
	l.wroteGen = gen
	if err != nil {
		fragErr, markErr = err, err
		l.failing.Store(true)
	} else if len(buf) > 0 {
		l.failing.Store(false)
		if l.unsynced == 0 {
			l.unsynced = gen
		}
	}
	l.fate[gen%fates], l.markFate[gen%fates] = fragErr, markErr
	if rotate && l.file != nil {
		// The segment is complete. With sync always it is flushed before
		// the Commit returns; with interval, by the next Sync; with none,
		// never (a flush per segment cost 10% of the sustained rate).
		switch {
		case l.opts.Sync == SyncAlways:
			_ = l.syncLocked() // a failure is the generations' fate
			l.closeFile()
		case l.opts.Sync == SyncInterval && l.dirty:
			l.retired = append(l.retired, l.file)
			l.file, l.dirty = nil, false
		default:
			l.closeFile()
		}
	}
}

func (l *Log) closeFile() {
	if l.file != nil {
		_ = l.file.Close()
	}
	l.file, l.dirty = nil, false
}

// writeTo appends buf to seg's file, opening (creating) it first if need
// be; called with writeMu held.
func (l *Log) writeTo(seg *segment, buf []byte) error {
	if l.file == nil || l.fileSeq != seg.seq {
		l.closeFile()
		f, err := l.files.OpenSegment(filepath.Join(l.dir, segmentName(seg.seq)))
		if err != nil {
			return err
		}
		if seg.size == 0 {
			// A new file: its directory entry is flushed too, or a
			// power loss may lose the whole segment.
			if err := l.dirChanged(); err != nil {
				_ = f.Close()
				return err
			}
		}
		l.file, l.fileSeq = f, seg.seq
	}
	n, err := l.file.Write(buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil && n > 0 {
		// A short write leaves a torn frame: cut it off, so that the
		// next frames follow a whole one; when that fails too, the
		// segment is abandoned (Replay skips the torn frame).
		if terr := l.file.Truncate(seg.size); terr != nil {
			l.abandonLocked(seg)
		}
	}
	if err == nil {
		l.dirty = true
	}
	return err
}

// abandonLocked closes seg's file and, if seg is still where writes go,
// starts the next segment: nothing more is written after what may be lost
// or torn. Called with writeMu held.
func (l *Log) abandonLocked(seg *segment) {
	if l.file != nil && l.fileSeq == seg.seq {
		l.closeFile()
	}
	l.mu.Lock()
	if n := len(l.segs); n > 0 && l.segs[n-1] == seg {
		l.segs = append(l.segs, &segment{seq: seg.seq + 1})
	}
	l.mu.Unlock()
}

// syncLocked flushes the file being written (sync always). A failure
// fails every generation written since the last good flush and abandons
// the segment: Linux reports a writeback error once, so a second fsync
// could succeed with the bytes lost. Called with writeMu held.
func (l *Log) syncLocked() error {
	if l.file == nil || !l.dirty {
		return nil
	}
	if err := l.timedSync(l.file); err != nil {
		l.syncFailures.Add(1)
		l.failing.Store(true)
		if l.unsynced != 0 {
			for g := max(l.unsynced, l.wroteGen-min(l.wroteGen, fates-1)); g <= l.wroteGen; g++ {
				l.fate[g%fates], l.markFate[g%fates] = err, err
			}
		}
		l.unsynced = 0
		l.mu.Lock()
		var seg *segment
		for _, s := range l.segs {
			if s.seq == l.fileSeq {
				seg = s
			}
		}
		l.mu.Unlock()
		if seg != nil {
			l.abandonLocked(seg)
		} else {
			l.closeFile()
		}
		return err
	}
	l.dirty, l.unsynced = false, 0
	return nil
}

func (l *Log) timedSync(f segmentFile) error {
	start := time.Now()
	err := f.Sync()
	if l.opts.OnSync != nil && err == nil {
		l.opts.OnSync(time.Since(start))
	}
	return err
}

// Sync flushes what was written to the device (sync interval), without
// holding up writes meanwhile: a flush can take tens of milliseconds, and
// requests wait for their writes. A file closed by a rotation meanwhile was
// flushed by it. A failed flush is counted (SyncFailures) and abandons the
// segment: what was acknowledged since the last good flush may be lost
// with the node, and nothing more is written after it.
func (l *Log) Sync() error {
	var first error
	l.writeMu.Lock()
	f, seq, dirty, retired, dirDirty := l.file, l.fileSeq, l.dirty, l.retired, l.dirDirty
	l.dirty, l.retired, l.unsynced, l.dirDirty = false, nil, 0, false
	l.writeMu.Unlock()
	if dirDirty {
		if err := l.files.SyncDir(l.dir); err != nil {
			l.syncFailures.Add(1)
			l.failing.Store(true)
			first = err
			l.writeMu.Lock()
			l.dirDirty = true // flushed again next time
			l.writeMu.Unlock()
		}
	}
	for _, r := range retired {
		if err := l.timedSync(r); err != nil {
			l.syncFailures.Add(1)
			l.failing.Store(true)
			if first == nil {
				first = err
			}
		}
		_ = r.Close()
	}
	if f != nil && dirty {
		if err := l.timedSync(f); err != nil && !errors.Is(err, os.ErrClosed) {
			l.syncFailures.Add(1)
			l.failing.Store(true)
			if first == nil {
				first = err
			}
			l.writeMu.Lock()
			l.mu.Lock()
			var seg *segment
			for _, s := range l.segs {
				if s.seq == seq {
					seg = s
				}
			}
			l.mu.Unlock()
			if seg != nil && l.file == f {
				l.abandonLocked(seg)
			}
			l.writeMu.Unlock()
		}
	}
	return first
}

// Retain deletes the segments, oldest first, whose fragments all arrived
// before oldest() (Unix ns; the oldest arrival among the traces still
// buffered, or the newest possible when none is), up to the first that
// holds a later one. Only segments complete before oldest is called may
// go: a request that lands after the caller looked at its part of the
// buffer writes to a segment at or after the bound. The caller guarantees
// that every trace with a fragment older than oldest() is decided and
// forwarded; what is handed to a peer and not yet settled holds its
// arrival too. It returns how many segments it deleted.
func (l *Log) Retain(oldest func() int64) (int, error) {
	l.mu.Lock()
	if len(l.segs) == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	bound := l.segs[len(l.segs)-1].seq
	l.mu.Unlock()
	upTo := min(oldest(), l.handed.Oldest())
	l.writeMu.Lock() // no segment is being written or rotated
	defer l.writeMu.Unlock()
	l.mu.Lock()
	var gone []*segment
	for len(l.segs) > 1 && l.segs[0].seq < bound && l.segs[0].maxAt < upTo {
		gone = append(gone, l.segs[0])
		l.size -= l.segs[0].size
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	return len(gone), l.remove(gone)
}

// remove deletes segments' files and flushes the directory, so that a
// power loss does not bring them back; called with writeMu held.
func (l *Log) remove(gone []*segment) error {
	var firstErr error
	for _, s := range gone {
		if l.file != nil && l.fileSeq == s.seq {
			l.closeFile()
		}
		if err := os.Remove(filepath.Join(l.dir, segmentName(s.seq))); err != nil && !os.IsNotExist(err) && firstErr == nil {
			firstErr = err
		}
	}
	if len(gone) > 0 {
		if err := l.dirChanged(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// dirChanged flushes the directory's entries after a segment was created
// or removed: at once with sync always (before the write is acknowledged),
// with the next Sync with interval (as the segments' bytes are: a flush
// under the write lock at every rotation held up every request), never
// with none. Called with writeMu held.
func (l *Log) dirChanged() error {
	switch l.opts.Sync {
	case SyncAlways:
		return l.files.SyncDir(l.dir)
	case SyncInterval:
		l.dirDirty = true
	}
	return nil
}

// Discard closes the log and deletes every segment, the one being written
// too: for a log none of whose fragments is needed again (every trace in
// it decided and forwarded). Retain keeps the last segment, and its done
// marks may be the ones a full disk refused: left, it would replay traces
// already sent.
func (l *Log) Discard() error {
	err := l.closeLog()
	l.writeMu.Lock()
	l.mu.Lock()
	segs := l.segs
	l.segs, l.size = nil, 0
	l.mu.Unlock()
	if rerr := l.remove(segs); err == nil {
		err = rerr
	}
	l.writeMu.Unlock()
	l.unlock()
	return err
}

// OldestSegmentArrival is the latest arrival in the oldest segment that is
// not being written, and whether there is one: what the caller must decide
// up to for Retain to delete it.
func (l *Log) OldestSegmentArrival() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) < 2 {
		return 0, false
	}
	return l.segs[0].maxAt, true
}

// Close writes what is pending, flushes it (unless sync is none), closes
// the file and lets go of the directory's lock.
func (l *Log) Close() error {
	err := l.closeLog()
	l.unlock()
	return err
}

func (l *Log) closeLog() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	gen := l.gen
	l.mu.Unlock()
	l.writeLocked()
	err := l.fate[gen%fates]
	if merr := l.markFate[gen%fates]; err == nil && !errors.Is(merr, errDiscarded) {
		err = merr
	}
	if errors.Is(err, errDiscarded) {
		err = nil
	}
	if l.opts.Sync != SyncNone {
		for _, r := range l.retired {
			if serr := l.timedSync(r); err == nil && serr != nil {
				l.syncFailures.Add(1)
				err = serr
			}
		}
		if serr := l.syncLocked(); err == nil {
			err = serr
		}
		if l.dirDirty {
			if serr := l.files.SyncDir(l.dir); err == nil {
				err = serr
			}
			l.dirDirty = false
		}
	}
	for _, r := range l.retired {
		_ = r.Close()
	}
	l.retired = nil
	l.closeFile()
	return err
}

// Kill leaves the log as a SIGKILL would: its files closed and its lock let
// go, nothing pending written. For tests that restart a sampler in one
// process.
func (l *Log) Kill() {
	l.writeMu.Lock()
	for _, r := range l.retired {
		_ = r.Close()
	}
	l.retired = nil
	l.closeFile()
	l.writeMu.Unlock()
	l.unlock()
}

func (l *Log) unlock() {
	l.mu.Lock()
	lock := l.lock
	l.lock = nil
	l.mu.Unlock()
	if lock != nil {
		_ = lock.Close() // closing the descriptor releases the flock
	}
}
