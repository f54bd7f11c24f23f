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
// A segment starts with a header: [8-byte magic][u64 sequence][u32 flags]
// [u32 CRC-32C of the 20 bytes before]. A record is framed as [u32 body
// length][u32 CRC-32C of the body, XORed with the segment's stamp][body],
// little-endian; a body is [kind][16-byte trace ID][i64 Unix ns] then, for
// a fragment, its OTLP encoding. A fragment's time is its arrival, a done
// mark's its trace's decision: replay leaves out a trace's fragments that
// arrived up to its last decision. Every write ends with an end frame
// (eight zero bytes) that the next write overwrites. A reader stops at the
// end frame, or at the first frame that is short or fails its checksum (a
// torn write), and goes on with the next segment.
//
// With sync interval or always, deleted segments are recycled: renamed
// aside and, at the next rotation, renamed to the new segment and
// overwritten from its start. Overwriting pages the page cache already
// holds costs half the CPU of writing a new file and unlinking it
// (measured: 0.21 vs 0.48 s of CPU per GiB on ext4).
// What follows a recycled segment's end frame is the previous life's
// records; the stamp (from the sequence) keeps a reader from taking one
// of them for the segment's own, even where the end frame was torn.
// Segments written before the header existed (no magic) are read as they
// were written.
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

	frameHeader = 8
	idLen       = 16
	// segmentHeader is the magic, the sequence, the flags and their CRC.
	segmentHeader = 24
	// flagRecycled: the file had a previous life, whose records may follow
	// the end frame.
	flagRecycled uint32 = 1
	// maxRecord bounds a record read back: anything longer is a corrupt
	// length, not a fragment (the collector's gRPC limit is far below).
	maxRecord = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentMagic opens every segment with a header; as a record's length it
// would be past maxRecord, so a segment without one is never taken for one.
var segmentMagic = [8]byte{'O', 'C', 'W', '2', 'l', 'o', 'g', 0}

// endFrame ends every write: a zero length, which no record has.
var endFrame [frameHeader]byte

// stamp is what a segment's records' checksums are XORed with: different
// for any two sequences less than 2^32 apart (an odd multiplier is a
// bijection), so a record of a recycled file's previous life never passes
// as the current one's.
func stamp(seq uint64) uint32 { return uint32(seq+1) * 0x9E3779B1 }

// maxSpares bounds the recycled files kept for the next rotations: enough
// for the rotations between two Retains at hundreds of MB/s.
const maxSpares = 8

// ErrFull is a Commit's error while the log is at its size bound.
var ErrFull = errors.New("durable log at max_bytes")

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
	seq uint64
	// written is the bytes of records written to it (rotation); size its
	// bytes on disk, a recycled file's previous life included.
	written int64
	size    int64
	// maxAt is the latest arrival of a fragment in it; done marks carry
	// none, and a segment of marks only is deleted as soon as it is behind.
	maxAt int64
}

// fates remembers how many generations' outcomes: a Commit asks about its
// generation right after appending, a few writes later at most.
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
	failures  atomic.Int64
	corrupted atomic.Int64
	skipped   atomic.Int64

	mu      sync.Mutex
	pending []byte
	spare   []byte
	gen     uint64     // the pending generation
	segs    []*segment // oldest first; the last is where pending goes
	size    int64      // on disk, every segment and spare
	// spares are deleted segments' files kept for recycling (oldest
	// first), their names spareName(seq); changed with writeMu held too.
	spares []spareFile

	writeMu sync.Mutex // one writer at a time; held across write and sync
	file    *os.File   // the last segment's, opened by the writer
	fileSeq uint64
	fileAt  int64 // where the next write goes in file (its end frame)
	// fileRecycled: file had a previous life, whose records may follow
	// the end frame.
	fileRecycled bool
	wroteGen     uint64 // generations up to this one have a fate
	fate         [fates]error
	dirty        bool // written since the last sync
	// retired are segments rotated out with sync interval, flushed and
	// closed by the next Sync.
	retired []*os.File
}

type spareFile struct {
	seq  uint64
	size int64
}

func segmentName(seq uint64) string { return fmt.Sprintf("wal-%016x.log", seq) }

// spareName is a recycled file's name while it waits: not a segment's, so
// that a restart does not replay what it holds.
func spareName(seq uint64) string { return fmt.Sprintf("spare-%016x.wal", seq) }

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
	l := &Log{dir: dir, opts: opts, gen: 1}
	l.batches.New = func() any { return new(Batch) }
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var next uint64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "spare-") && strings.HasSuffix(e.Name(), ".wal") {
			// A previous process's recycled files: nothing in them is needed.
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
			continue
		}
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

// Size is the log's bytes on disk, the spares' included.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Full reports whether the log is at MaxBytes without its spares: Commit
// would fail.
func (l *Log) Full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.size
	for _, sp := range l.spares {
		live -= sp.size
	}
	return l.opts.MaxBytes > 0 && live >= l.opts.MaxBytes
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
	b.frame(func(d []byte) []byte {
		d = append(d, kindFragment)
		d = append(d, id[:]...)
		d = binary.LittleEndian.AppendUint64(d, uint64(at))
		return append(d, encoded...)
	})
	b.maxAt = max(b.maxAt, at)
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
	seg := l.segs[len(l.segs)-1]
	var err error
	var dropped []spareFile
	if l.opts.MaxBytes > 0 && l.size >= l.opts.MaxBytes {
		// The spares go first: nothing in them is needed.
		dropped, l.spares = l.spares, nil
		for _, sp := range dropped {
			l.size -= sp.size
		}
		if l.size >= l.opts.MaxBytes {
			err = ErrFull
		}
	}
	rotate := err == nil && l.opts.SegmentBytes > 0 && seg.written+int64(len(buf)) >= l.opts.SegmentBytes
	if rotate {
		// What is appended from now on goes to the next segment.
		l.segs = append(l.segs, &segment{seq: seg.seq + 1})
	}
	l.mu.Unlock()
	for _, sp := range dropped {
		_ = os.Remove(filepath.Join(l.dir, spareName(sp.seq)))
	}

	if err == nil && len(buf) > 0 {
		err = l.writeTo(seg, buf)
	}
	l.mu.Lock()
	l.spare = buf
	if err == nil {
		seg.written += int64(len(buf))
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

// writeTo writes records at seg's end, followed by an end frame, opening
// seg's file first if needed; called with writeMu held.
func (l *Log) writeTo(seg *segment, records []byte) error {
	if l.file == nil || l.fileSeq != seg.seq {
		if err := l.openSegment(seg); err != nil {
			return err
		}
	}
	stampRecords(records, stamp(seg.seq))
	// The end frame goes in the same write: pending's spare capacity
	// mostly holds it, and a write that is cut short leaves no end frame
	// after a torn record.
	buf := append(records, endFrame[:]...)
	n, err := l.file.WriteAt(buf, l.fileAt)
	if err != nil {
		if n > 0 {
			// Torn: the end frame back where the next write goes, and a
			// file of this life cut there, so that nothing torn follows it.
			_, _ = l.file.WriteAt(endFrame[:], l.fileAt)
			if !l.fileRecycled {
				_ = l.file.Truncate(l.fileAt + frameHeader)
			}
		}
		return err
	}
	l.dirty = true
	l.fileAt += int64(len(records))
	l.mu.Lock()
	if end := l.fileAt + frameHeader; end > seg.size {
		l.size += end - seg.size
		seg.size = end
	}
	l.mu.Unlock()
	return nil
}

// openSegment opens seg's file for its first write: the newest spare
// renamed to it (its pages likeliest still in the page cache), or a new
// file; either way it starts with seg's header and an end frame.
func (l *Log) openSegment(seg *segment) error {
	if l.file != nil {
		_ = l.file.Close()
		l.file = nil
	}
	name := filepath.Join(l.dir, segmentName(seg.seq))
	var f *os.File
	var inherited int64
	l.mu.Lock()
	var sp spareFile
	spare := len(l.spares) > 0
	if spare {
		sp = l.spares[len(l.spares)-1]
		l.spares = l.spares[:len(l.spares)-1]
	}
	l.mu.Unlock()
	if spare {
		var err error
		if err = os.Rename(filepath.Join(l.dir, spareName(sp.seq)), name); err == nil {
			f, err = os.OpenFile(name, os.O_WRONLY, 0)
		}
		if err == nil {
			inherited = sp.size
		} else {
			l.mu.Lock()
			l.size -= sp.size
			l.mu.Unlock()
			_ = os.Remove(name)
			_ = os.Remove(filepath.Join(l.dir, spareName(sp.seq)))
		}
	}
	recycled := f != nil
	if f == nil {
		var err error
		if f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
			return err
		}
	}
	var head [segmentHeader + frameHeader]byte // the header, then an end frame
	copy(head[:], segmentMagic[:])
	binary.LittleEndian.PutUint64(head[8:16], seg.seq)
	if recycled {
		binary.LittleEndian.PutUint32(head[16:20], flagRecycled)
	}
	binary.LittleEndian.PutUint32(head[20:24], crc32.Checksum(head[:20], castagnoli))
	if _, err := f.WriteAt(head[:], 0); err != nil {
		_ = f.Close()
		_ = os.Remove(name)
		l.mu.Lock()
		l.size -= inherited // a spare's bytes, counted until now
		l.mu.Unlock()
		return err
	}
	l.file, l.fileSeq, l.fileAt, l.fileRecycled, l.dirty = f, seg.seq, segmentHeader, recycled, true
	l.mu.Lock()
	seg.size = max(inherited, int64(len(head)))
	l.size += seg.size - inherited
	l.mu.Unlock()
	return nil
}

// stampRecords XORs each record's checksum in buf (whole frames) with st.
func stampRecords(buf []byte, st uint32) {
	for len(buf) >= frameHeader {
		n := binary.LittleEndian.Uint32(buf[0:4])
		binary.LittleEndian.PutUint32(buf[4:8], binary.LittleEndian.Uint32(buf[4:8])^st)
		buf = buf[frameHeader+int(n):]
	}
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
// older than oldest is decided and forwarded. It returns how many segments
// it deleted. The segment being written is never deleted. Up to maxSpares
// deleted segments' files are kept, renamed aside, for the next rotations
// to overwrite; the rest are unlinked.
func (l *Log) Retain(oldest int64) (int, error) {
	l.writeMu.Lock() // no segment is being written or rotated
	defer l.writeMu.Unlock()
	l.mu.Lock()
	var gone []*segment
	for len(l.segs) > 1 && l.segs[0].maxAt < oldest {
		gone = append(gone, l.segs[0])
		l.segs = l.segs[1:]
	}
	// With a bound, spares take at most a quarter of it. With sync none
	// none are kept: a file that stays dirty is written back by the kernel
	// after 30 s (dirty_expire_centisecs), where one unlinked within that
	// never reaches the device (measured through the binary at 360k
	// spans/s: 1,368 MiB written back in 50 s recycling, 35 unlinking).
	// Synced files are clean, so recycling them adds no writes.
	keep := maxSpares
	if l.opts.MaxBytes > 0 && l.opts.SegmentBytes > 0 {
		keep = min(keep, int(l.opts.MaxBytes/l.opts.SegmentBytes/4))
	}
	if l.opts.Sync == SyncNone {
		keep = 0
	}
	l.mu.Unlock()
	var firstErr error
	for _, s := range gone {
		if l.file != nil && l.fileSeq == s.seq {
			_ = l.file.Close()
			l.file = nil
		}
		name := filepath.Join(l.dir, segmentName(s.seq))
		if len(l.spares) < keep { // read without mu: writeMu keeps it from changing
			if err := os.Rename(name, filepath.Join(l.dir, spareName(s.seq))); err == nil {
				l.mu.Lock()
				l.spares = append(l.spares, spareFile{seq: s.seq, size: s.size})
				l.mu.Unlock()
				continue
			}
		}
		l.mu.Lock()
		l.size -= s.size
		l.mu.Unlock()
		if err := os.Remove(name); err != nil && !os.IsNotExist(err) && firstErr == nil {
			firstErr = err
		}
	}
	return len(gone), firstErr
}

// Discard closes the log and deletes every segment, the one being written
// too, and the spares: for a log none of whose fragments is needed again
// (every trace in it decided and forwarded). Retain keeps the last segment,
// and its done marks may be the ones a full disk refused: left, it would
// replay traces already sent.
func (l *Log) Discard() error {
	err := l.Close()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	segs, spares := l.segs, l.spares
	l.segs, l.spares, l.size = nil, nil, 0
	l.mu.Unlock()
	names := make([]string, 0, len(segs)+len(spares))
	for _, s := range segs {
		names = append(names, segmentName(s.seq))
	}
	for _, sp := range spares {
		names = append(names, spareName(sp.seq))
	}
	for _, name := range names {
		if rerr := os.Remove(filepath.Join(l.dir, name)); rerr != nil && !os.IsNotExist(rerr) && err == nil {
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
