package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
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
	// TornTails counts the segments cut short or corrupt to their end (a
	// write a crash tore); CorruptRecords the corrupt stretches skipped to
	// a whole record after them (damage on disk); CorruptBytes is what
	// both skipped.
	TornTails, CorruptRecords, CorruptBytes int64
}

// Replay reads the segments that were in the directory when the log was
// opened, oldest first, and hands fn every fragment that arrived after its
// trace's last decision (or whose trace has none), in the order written;
// fn must not keep Encoded. A corrupt record is skipped to the next whole
// one, a torn tail to the segment's end, and both are counted. Replay sets each
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
	st.TornTails, st.CorruptRecords, st.CorruptBytes = 0, 0, 0 // counted on the second pass
	defer func() {
		l.tornTails.Add(st.TornTails)
		l.corruptRecords.Add(st.CorruptRecords)
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

// readSegment calls fn for each whole record of s. A frame that is cut
// short, fails its checksum or is not a record is skipped to the next
// whole frame (a corrupt record, counted in st), or to the end when none
// follows (a torn tail). The segment is mapped, not read into the heap:
// what replay holds is bounded by the file, whatever a corrupt length says.
func (l *Log) readSegment(s *segment, fn func(kind byte, id [16]byte, at int64, enc []byte), st *ReplayStats) error {
	data, release, err := mapSegment(filepath.Join(l.dir, segmentName(s.seq)))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer release()
	off := 0
	for off < len(data) {
		if n, ok := recordAt(data, off); ok {
			body := data[off+frameHeader : off+frameHeader+n]
			var id [16]byte
			copy(id[:], body[1:1+idLen])
			fn(body[0], id, int64(binary.LittleEndian.Uint64(body[1+idLen:])), body[1+idLen+8:])
			off += frameHeader + n
			continue
		}
		next := resync(data, off)
		st.CorruptBytes += int64(next - off)
		if next == len(data) {
			st.TornTails++
		} else {
			st.CorruptRecords++
		}
		off = next
	}
	return nil
}

// recordAt reports whether a whole, valid record starts at off, and its
// body's length.
func recordAt(data []byte, off int) (int, bool) {
	if len(data)-off < frameHeader {
		return 0, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n < 1+idLen+8 || n > len(data)-off-frameHeader {
		return 0, false
	}
	body := data[off+frameHeader : off+frameHeader+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[off+4:]) {
		return 0, false
	}
	switch body[0] {
	case kindFragment, kindHanded:
		return n, true
	case kindDone, kindSettled:
		return n, n == 1+idLen+8
	}
	return 0, false
}

// resync is where the next whole record after a bad frame at off starts
// (len(data): none). Where the bad frame's length points comes first: a
// frame whose body alone was damaged is skipped without looking inside
// it, where a span's bytes could pass for a frame.
func resync(data []byte, off int) int {
	if len(data)-off >= frameHeader {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if next := off + frameHeader + n; n >= 1+idLen+8 && next < len(data) {
			if _, ok := recordAt(data, next); ok {
				return next
			}
		}
	}
	for next := off + 1; next < len(data); next++ {
		if _, ok := recordAt(data, next); ok {
			return next
		}
	}
	return len(data)
}

// mapSegment maps the file read-only; release unmaps it.
func mapSegment(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if info.Size() == 0 {
		return nil, func() {}, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(info.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}
