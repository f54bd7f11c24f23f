package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Fragment is a buffered fragment read back.
type Fragment struct {
	ID [16]byte
	// At is when it arrived, Unix ns.
	At      int64
	Encoded []byte
}

// handedKey names a handed fragment: its trace and arrival.
type handedKey struct {
	id [16]byte
	at int64
}

// ReplayStats is what Replay read.
type ReplayStats struct {
	// Fragments were handed back; Done were left out, their trace marked
	// decided after them, or (handed fragments) settled.
	Fragments, Done int64
	// Corrupt counts the segments whose tail was torn or corrupt, and
	// CorruptBytes what was skipped from them.
	Corrupt, CorruptBytes int64
}

// Replay reads the segments that were in the directory when the log was
// opened, oldest first, and hands fn every fragment that arrived after its
// trace's last decision (or whose trace has none), in the order written. fn must not keep Encoded. A
// segment's torn or corrupt tail is skipped and counted. Replay sets each
// segment's latest arrival, so that Retain can delete it once its traces
// are decided again.
func (l *Log) Replay(fn func(Fragment)) (ReplayStats, error) {
	l.mu.Lock()
	old := append([]*segment(nil), l.segs[:len(l.segs)-1]...)
	l.mu.Unlock()
	var st ReplayStats
	// First pass: when each trace was last decided, and which handed
	// fragments were settled.
	lastDone := map[[16]byte]int64{}
	settled := map[handedKey]struct{}{}
	for _, s := range old {
		s.maxAt = 0
		err := l.readSegment(s, func(kind byte, id [16]byte, at int64, _ []byte) {
			switch kind {
			case kindDone:
				if d, ok := lastDone[id]; !ok || at > d {
					lastDone[id] = at
				}
			case kindSettled:
				settled[handedKey{id, at}] = struct{}{}
			case kindFragment, kindHanded:
				s.maxAt = max(s.maxAt, at)
			}
		}, &st)
		if err != nil {
			return st, err
		}
	}
	st.Corrupt, st.CorruptBytes = 0, 0 // counted on the second pass
	defer func() {
		l.corrupted.Add(st.Corrupt)
		l.skipped.Add(st.CorruptBytes)
	}()
	for _, s := range old {
		err := l.readSegment(s, func(kind byte, id [16]byte, at int64, enc []byte) {
			if kind != kindFragment && kind != kindHanded {
				return
			}
			if d, ok := lastDone[id]; ok && at <= d {
				st.Done++
				return
			}
			if _, ok := settled[handedKey{id, at}]; ok && kind == kindHanded {
				st.Done++
				return
			}
			st.Fragments++
			fn(Fragment{ID: id, At: at, Encoded: enc})
		}, &st)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// readSegment calls fn for each whole record of s, stopping at the first
// torn or corrupt one (counted in st).
func (l *Log) readSegment(s *segment, fn func(kind byte, id [16]byte, at int64, enc []byte), st *ReplayStats) error {
	f, err := os.Open(filepath.Join(l.dir, segmentName(s.seq)))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var head [frameHeader]byte
	var body []byte
	var read int64
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			break // a torn header
		}
		n := binary.LittleEndian.Uint32(head[0:4])
		if n < 1+idLen+8 || n > maxRecord {
			break
		}
		if cap(body) < int(n) {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			break
		}
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(head[4:8]) {
			break
		}
		kind := body[0]
		mark := kind == kindDone || kind == kindSettled
		if n < 1+idLen+8 || (!mark && kind != kindFragment && kind != kindHanded) || (mark && n != 1+idLen+8) {
			return l.tornAt(s, read, st)
		}
		var id [16]byte
		copy(id[:], body[1:1+idLen])
		fn(kind, id, int64(binary.LittleEndian.Uint64(body[1+idLen:])), body[1+idLen+8:])
		read += frameHeader + int64(n)
	}
	return l.tornAt(s, read, st)
}

func (l *Log) tornAt(s *segment, whole int64, st *ReplayStats) error {
	st.Corrupt++
	st.CorruptBytes += max(s.size-whole, 0)
	return nil
}
