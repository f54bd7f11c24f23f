package durable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// What chose the log's design (issue 50): the buffer's own records written
// by a request at a time, to this log and to bbolt (the store the
// collector's file_storage uses), each at its cheapest durable setting for
// a process crash (no fsync per write: the page cache), then deleted as
// the buffer would (whole segments here; the decided keys there). Pebble
// is not in the module graph; what it would add — lookups by key — replay
// does not need (it reads everything once).
//
//	go test -run '^$' -bench LogStores -benchtime 2000x ./processor/budgettailsamplingprocessor/internal/durable/
func BenchmarkLogStores(b *testing.B) {
	const perRequest = 64 // fragments a request buffers (a gateway round's share)
	for _, size := range []int{400, 2000} {
		frag := make([]byte, size)
		for i := range frag {
			frag[i] = byte(rand.IntN(256))
		}
		b.Run(fmt.Sprintf("log/fragment_%dB", size), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Sync: SyncInterval, SegmentBytes: 8 << 20})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(perRequest * size))
			var at int64
			for i := 0; b.Loop(); i++ {
				var batch Batch
				for j := range perRequest {
					at++
					batch.AddFragment(key(i, j), at, frag)
				}
				if err := l.Commit(l.Append(&batch)); err != nil {
					b.Fatal(err)
				}
				if i%64 == 63 { // the decided behind: whole segments go
					if _, err := l.Retain(func() int64 { return at - 32*perRequest }); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRequest), "ns/fragment")
		})
		b.Run(fmt.Sprintf("bbolt/fragment_%dB", size), func(b *testing.B) {
			db, err := bolt.Open(filepath.Join(b.TempDir(), "tail.db"), 0o600, &bolt.Options{NoSync: true, NoFreelistSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			bucket := []byte("fragments")
			b.SetBytes(int64(perRequest * size))
			for i := 0; b.Loop(); i++ {
				err := db.Update(func(tx *bolt.Tx) error {
					bk, err := tx.CreateBucketIfNotExists(bucket)
					if err != nil {
						return err
					}
					for j := range perRequest {
						k := key(i, j)
						if err := bk.Put(k[:], frag); err != nil {
							return err
						}
					}
					if i%64 == 63 { // the decided behind: their keys go
						for old := i - 63; old <= i-32; old++ {
							for j := range perRequest {
								k := key(old, j)
								if err := bk.Delete(k[:]); err != nil {
									return err
								}
							}
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRequest), "ns/fragment")
		})
	}
}

func key(request, fragment int) [16]byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(request))
	binary.BigEndian.PutUint64(k[8:], uint64(fragment))
	return k
}
