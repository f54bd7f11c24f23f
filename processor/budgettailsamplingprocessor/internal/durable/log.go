// Package durable is the tail buffer's write-ahead log: an append-only
// sequence of segment files holding every buffered fragment, encoded as the
// buffer holds it, and a mark for every trace once it is decided and
// forwarded. A sampler that restarts reads back the fragments of traces
// with no mark (Replay) and decides them as usual.
//
// It owns the directory, the record format, syncing, and which segments may
// be deleted; it must not know how traces are buffered or decided: the
// caller says when the oldest buffered fragment arrived (Retain), and a
// segment whose records all arrived before that is deleted, oldest first.
//
// A record is framed as [u32 body length][u32 CRC-32C of the body][body],
// little-endian; a body is [kind][16-byte trace ID][i64 Unix ns] then, for
// a fragment, its OTLP encoding. A fragment's time is its arrival, a done
// mark's its trace's decision: replay leaves out a trace's fragments that
// arrived up to its last decision. A handed fragment (one passed to the
// sampler that owns its trace, queued there) is replayed like a fragment
// until a settled mark with its trace ID and arrival says the peer took it
// or it came back into the buffer (and was written again as a fragment).
// A reader stops at the first frame that is short or fails its checksum (a
// torn write) and goes on with the next segment.
package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
	// maxRecord bounds a record read back: anything longer is a corrupt
	// length, not a fragment (the collector's gRPC limit is far below).
	maxRecord = 256 << 20
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
	// MaxBytes bounds the log on disk; Commit refuses past it.
	MaxBytes int64
	// OnSync, when set, is told how long each flush to the device took.
	OnSync func(time.Duration)
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

// Log is the write-ahead log of one processor; safe for concurrent use.
// What is appended joins the pending generation; a write takes the whole
// generation at once (group commit), and each Commit learns its own
// generation's fate: written, or failed and dropped (its callers decide
// their traces at once, so nothing depends on the lost bytes).
type Log struct {
	dir  string
	opts Options

	batches   sync.Pool
	handed    *Holds[*Handed]
	failures  atomic.Int64
	corrupted atomic.Int64
	skipped   atomic.Int64

	mu      sync.Mutex
	pending []byte
	spare   []byte
	gen     uint64     // the pending generation
	segs    []*segment // oldest first; the last is where pending goes
	size    int64      // on disk, every segment

	writeMu  sync.Mutex // one writer at a time; held across write and sync
	file     *os.File   // the last segment's, opened by the writer
	fileSeq  uint64
	wroteGen uint64 // generations up to this one have a fate
	fate     [fates]error
	dirty    bool // written since the last sync
	// retired are segments rotated out with sync interval, flushed and
	// closed by the next Sync.
	retired []*os.File
}

func segmentName(seq uint64) string { return fmt.Sprintf("wal-%016x.log", seq) }

func parseSegment(name string) (uint64, bool) {
	if !strings.HasPrefix(name, "wal-") || !strings.HasSuffix(name, ".log") {
		return 0, false
	}
	seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "wal-"), ".log"), 16, 64)
	return seq, err == nil
}

// Open opens the log in dir, creating it, and checks that it can write
// there. The segments already in dir are what Replay reads; new records go
// to a new segment after them.
func Open(dir string, opts Options) (*Log, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	probe := filepath.Join(dir, ".probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return nil, err
	}
	_ = os.Remove(probe)
	l := &Log{dir: dir, opts: opts, gen: 1, handed: NewHolds[*Handed]()}
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

// Full reports whether the log is at MaxBytes: Commit would fail.
func (l *Log) Full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.MaxBytes > 0 && l.size >= l.opts.MaxBytes
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

// Failures counts the Commits that failed; Corrupt the segments Replay
// found torn or corrupt.
func (l *Log) Failures() int64 { return l.failures.Load() }

// Corrupt counts the segments Replay found torn or corrupt.
func (l *Log) Corrupt() int64 { return l.corrupted.Load() }

// Skipped is the bytes of torn or corrupt tails Replay skipped.
func (l *Log) Skipped() int64 { return l.skipped.Load() }

// Batch is one request's records, framed outside the log's lock.
type Batch struct {
	buf   []byte
	maxAt int64
}

// Len is how many bytes the batch holds.
func (b *Batch) Len() int { return len(b.buf) }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() { b.buf, b.maxAt = b.buf[:0], 0 }

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
func (b *Batch) AddSettled(id [16]byte, at int64) {
	b.frame(func(d []byte) []byte {
		d = append(d, kindSettled)
		d = append(d, id[:]...)
		return binary.LittleEndian.AppendUint64(d, uint64(at))
	})
}

// AddDone marks trace id decided at (Unix ns) and forwarded: Replay leaves
// out its fragments that arrived up to then.
func (b *Batch) AddDone(id [16]byte, at int64) {
	b.frame(func(d []byte) []byte {
		d = append(d, kindDone)
		d = append(d, id[:]...)
		return binary.LittleEndian.AppendUint64(d, uint64(at))
	})
}

// Append adds the batch's records to the pending generation, which it
// returns for Commit. A mark lost in a crash makes its trace decided again
// on replay (sent at least once).
func (l *Log) Append(b *Batch) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 { // discarded: nothing is written any more
		return l.gen
	}
	l.pending = append(l.pending, b.buf...)
	if last := l.segs[len(l.segs)-1]; b.maxAt > last.maxAt {
		last.maxAt = b.maxAt
	}
	return l.gen
}

// Commit returns once generation gen is written (and, with sync always,
// flushed to the device), or failed: then its records are dropped, and the
// caller must not acknowledge what it appended. Past MaxBytes the write
// fails with ErrFull.
func (l *Log) Commit(gen uint64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.wroteGen < gen {
		l.writeLocked()
	}
	err := l.fate[gen%fates]
	if l.wroteGen-gen >= fates {
		err = errFateForgotten
	}
	if err == nil && l.opts.Sync == SyncAlways {
		err = l.syncLocked()
	}
	if err != nil {
		l.failures.Add(1)
	}
	return err
}

// CommitPending writes what is pending (marks, with no request to carry
// them).
func (l *Log) CommitPending() error {
	l.mu.Lock()
	gen, empty := l.gen, len(l.pending) == 0
	l.mu.Unlock()
	if empty {
		return nil
	}
	return l.Commit(gen)
}

// writeLocked writes the pending generation and records its fate; called
// with writeMu held.
func (l *Log) writeLocked() {
	l.mu.Lock()
	buf, gen := l.pending, l.gen
	l.pending = l.spare[:0]
	l.gen++
	if len(l.segs) == 0 {
		l.mu.Unlock()
		l.wroteGen, l.fate[gen%fates] = gen, errDiscarded
		return
	}
	seg := l.segs[len(l.segs)-1]
	var err error
	if l.opts.MaxBytes > 0 && l.size >= l.opts.MaxBytes {
		err = ErrFull
	}
	rotate := err == nil && l.opts.SegmentBytes > 0 && seg.size+int64(len(buf)) >= l.opts.SegmentBytes
	if rotate {
		// What is appended from now on goes to the next segment.
		l.segs = append(l.segs, &segment{seq: seg.seq + 1})
	}
	l.mu.Unlock()

	if err == nil && len(buf) > 0 {
		err = l.writeTo(seg, buf)
	}
	l.mu.Lock()
	l.spare = buf
	if err == nil {
		seg.size += int64(len(buf))
		l.size += int64(len(buf))
	} else if rotate {
		l.segs = l.segs[:len(l.segs)-1]
		rotate = false
	}
	l.mu.Unlock()
	l.wroteGen = gen
	l.fate[gen%fates] = err
	if rotate && l.file != nil {
		// The segment is complete. With sync always it is flushed before
		// the Commit returns; with interval, by the next Sync; with none,
		// never (a flush per segment cost 10% of the sustained rate).
		switch {
		case l.opts.Sync == SyncAlways:
			if serr := l.syncLocked(); serr != nil {
				l.fate[gen%fates] = serr
			}
			_ = l.file.Close()
		case l.opts.Sync == SyncInterval && l.dirty:
			l.retired = append(l.retired, l.file)
		default:
			_ = l.file.Close()
		}
		l.file, l.dirty = nil, false
	}
}

func (l *Log) writeTo(seg *segment, buf []byte) error {
	if l.file == nil || l.fileSeq != seg.seq {
		if l.file != nil {
			_ = l.file.Close()
		}
		f, err := os.OpenFile(filepath.Join(l.dir, segmentName(seg.seq)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			l.file = nil
			return err
		}
		l.file, l.fileSeq = f, seg.seq
	}
	n, err := l.file.Write(buf)
	if err != nil && n > 0 {
		// A short write leaves a torn frame: cut it off, so that the
		// retry's frames follow a whole one.
		if st, serr := l.file.Stat(); serr == nil {
			_ = l.file.Truncate(st.Size() - int64(n))
		}
	}
	if err == nil {
		l.dirty = true
	}
	return err
}

func (l *Log) syncLocked() error {
	if l.file == nil || !l.dirty {
		return nil
	}
	if err := l.timedSync(l.file); err != nil {
		return err
	}
	l.dirty = false
	return nil
}

func (l *Log) timedSync(f *os.File) error {
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
// flushed by it.
func (l *Log) Sync() error {
	l.writeMu.Lock()
	f, dirty, retired := l.file, l.dirty, l.retired
	l.dirty, l.retired = false, nil
	l.writeMu.Unlock()
	var first error
	for _, r := range retired {
		if err := l.timedSync(r); err != nil && first == nil {
			first = err
		}
		_ = r.Close()
	}
	if f != nil && dirty {
		if err := l.timedSync(f); err != nil && !errors.Is(err, os.ErrClosed) && first == nil {
			first = err
		}
	}
	return first
}

// Retain deletes the segments, oldest first, whose fragments all arrived
// before oldest (Unix ns; the oldest arrival among the traces still
// buffered, or the newest possible when none is), up to the first that
// holds a later one. The caller guarantees that every trace with a fragment
// older than oldest is decided and forwarded; what is handed to a peer and
// not yet settled holds its arrival too. It returns how many segments it
// deleted. The segment being written is never deleted.
func (l *Log) Retain(oldest int64) (int, error) {
	oldest = min(oldest, l.handed.Oldest())
	l.writeMu.Lock() // no segment is being written or rotated
	defer l.writeMu.Unlock()
	l.mu.Lock()
	var gone []*segment
	for len(l.segs) > 1 && l.segs[0].maxAt < oldest {
		gone = append(gone, l.segs[0])
		l.size -= l.segs[0].size
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	var firstErr error
	for _, s := range gone {
		if l.file != nil && l.fileSeq == s.seq {
			_ = l.file.Close()
			l.file = nil
		}
		if err := os.Remove(filepath.Join(l.dir, segmentName(s.seq))); err != nil && !os.IsNotExist(err) && firstErr == nil {
			firstErr = err
		}
	}
	return len(gone), firstErr
}

// Discard closes the log and deletes every segment, the one being written
// too: for a log none of whose fragments is needed again (every trace in
// it decided and forwarded). Retain keeps the last segment, and its done
// marks may be the ones a full disk refused: left, it would replay traces
// already sent.
func (l *Log) Discard() error {
	err := l.Close()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	segs := l.segs
	l.segs, l.size = nil, 0
	l.mu.Unlock()
	for _, s := range segs {
		if rerr := os.Remove(filepath.Join(l.dir, segmentName(s.seq))); rerr != nil && !os.IsNotExist(rerr) && err == nil {
			err = rerr
		}
	}
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

// Close writes what is pending, flushes it (unless sync is none) and
// closes the file.
func (l *Log) Close() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	gen := l.gen
	l.mu.Unlock()
	l.writeLocked()
	err := l.fate[gen%fates]
	if l.opts.Sync != SyncNone {
		for _, r := range l.retired {
			if serr := l.timedSync(r); err == nil {
				err = serr
			}
		}
		if serr := l.syncLocked(); err == nil {
			err = serr
		}
	}
	for _, r := range l.retired {
		_ = r.Close()
	}
	l.retired = nil
	if l.file != nil {
		_ = l.file.Close()
		l.file = nil
	}
	return err
}
