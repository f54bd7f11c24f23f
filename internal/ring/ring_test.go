package ring

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func endpoints(n int) []string {
	var eps []string
	for i := range n {
		eps = append(eps, fmt.Sprintf("10.0.0.%d:4317", i+1))
	}
	return eps
}

func randomIDs(t *testing.T, n int) [][16]byte {
	ids := make([][16]byte, n)
	for i := range ids {
		_, err := rand.Read(ids[i][:])
		require.NoError(t, err)
	}
	return ids
}

func TestOwnerIsAMemberAndOrderDoesNotMatter(t *testing.T) {
	eps := endpoints(5)
	a := New(eps)
	b := New([]string{eps[3], eps[1], eps[4], eps[0], eps[2]})
	require.Equal(t, 5, a.Size())
	for _, id := range randomIDs(t, 2000) {
		owner := a.Owner(id)
		assert.True(t, a.Has(owner))
		assert.Equal(t, owner, b.Owner(id))
	}
	assert.True(t, a.Equal(b))
	assert.Equal(t, "", (*Ring)(nil).Owner([16]byte{1}))
	assert.Equal(t, "", New(nil).Owner([16]byte{1}))
}

// Adding a member moves about 1/n of the IDs, all of them to the new one;
// removing one moves only its own IDs.
func TestChangesMoveOnlyTheirShare(t *testing.T) {
	ids := randomIDs(t, 20000)
	three, four := New(endpoints(3)), New(endpoints(4))
	moved := 0
	for _, id := range ids {
		before, after := three.Owner(id), four.Owner(id)
		if before != after {
			moved++
			assert.Equal(t, endpoints(4)[3], after, "an ID moves only to the new member")
		}
	}
	assert.InDelta(t, 0.25, float64(moved)/float64(len(ids)), 0.08)

	gone := endpoints(4)[1]
	less := four.Without(gone)
	assert.False(t, less.Has(gone))
	for _, id := range ids {
		if four.Owner(id) != gone {
			assert.Equal(t, four.Owner(id), less.Owner(id), "IDs of the members that stay do not move")
		}
	}
}

func TestEndpointFormatsLikeTheDNSResolver(t *testing.T) {
	assert.Equal(t, "10.1.2.3:4317", Endpoint(net.ParseIP("10.1.2.3"), "4317"))
	assert.Equal(t, "[fd00::1]:4317", Endpoint(net.ParseIP("fd00::1"), "4317"))
	assert.Equal(t, "10.1.2.3", Endpoint(net.ParseIP("10.1.2.3"), ""))
	assert.Equal(t, "fd00::1", Host("[fd00::1]:4317"))
	assert.Equal(t, "10.1.2.3", Host("10.1.2.3"))
	assert.Equal(t, "fd00::1", Host("[fd00::1]"))
}

// A position held by an earlier point pushes the next one forward; the ring
// must still hold every member, and every lookup must land on a point.
func TestCrowdedRingStillRoutesEverything(t *testing.T) {
	r := New(endpoints(200))
	assert.Greater(t, len(r.points), 200*pointsPerEntry*9/10)
	for i := 1; i < len(r.points); i++ {
		require.Less(t, r.points[i-1].pos, r.points[i].pos, "positions are unique and sorted")
	}
	var last [16]byte
	for i := range last {
		last[i] = 0xff
	}
	assert.NotEmpty(t, r.Owner(last))
}

func BenchmarkOwner(b *testing.B) {
	r := New(endpoints(6))
	id := [16]byte{1, 2, 3}
	for i := 0; b.Loop(); i++ {
		id[15] = byte(i)
		_ = r.Owner(id)
	}
}

// The lookup table gives what a search among the points gives, for any
// ring size.
func TestOwnerIndexTableMatchesTheSearch(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 40} {
		var eps []string
		for i := range n {
			eps = append(eps, fmt.Sprintf("10.0.%d.%d:4317", i/250, i%250))
		}
		r := New(eps)
		search := *r
		search.owners = nil
		rnd := mrand.New(mrand.NewPCG(uint64(n), 1))
		for range 20000 {
			var id [16]byte
			binary.LittleEndian.PutUint64(id[:8], rnd.Uint64())
			binary.LittleEndian.PutUint64(id[8:], rnd.Uint64())
			if a, b := r.OwnerIndex(id), search.OwnerIndex(id); a != b {
				t.Fatalf("%d endpoints: table %d, search %d", n, a, b)
			}
		}
	}
}
