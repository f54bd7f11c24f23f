package names

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/traceinfo"
)

func TestNamesInternOneCopyAndStayBounded(t *testing.T) {
	n := New()
	a := n.Intern([]byte("svc-1\x1fGET /"))
	b := n.Intern([]byte(string([]byte("svc-1\x1fGET /"))))
	require.Equal(t, a, b)
	assert.Equal(t, unsafe.StringData(a), unsafe.StringData(b), "one copy of a name")
	assert.Zero(t, testing.AllocsPerRun(100, func() { n.Intern([]byte("svc-1\x1fGET /")) }), "a known name costs no allocation")

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50_000 {
				name := fmt.Sprintf("svc-%d-%d", w, i)
				assert.Equal(t, name, n.Intern([]byte(name)))
			}
		})
	}
	wg.Wait()
	total := 0
	for i := range n.stripes {
		total += len(n.stripes[i].m)
		assert.LessOrEqual(t, len(n.stripes[i].m), maxNamesPerStripe)
	}
	assert.LessOrEqual(t, total, nameStripes*maxNamesPerStripe)
}

// A pair key holds the service's length: a service name and a group key
// that share a separator byte cannot be confused with another pair.
func TestNamePairsKeepServiceAndGroupApart(t *testing.T) {
	n := New()
	key := func(service, group string) []byte { return append(AppendPairKey(nil, []byte(service)), group...) }
	a := n.Pair(key("a\x1fb", "c"))
	b := n.Pair(key("a", "b\x1fc"))
	assert.Equal(t, traceinfo.Names{Key: "a\x1fb", Group: "c"}, a)
	assert.Equal(t, traceinfo.Names{Key: "a", Group: "b\x1fc"}, b)
	assert.Equal(t, a, n.Pair(key("a\x1fb", "c")))

	for i := range 200_000 {
		n.Pair(key(fmt.Sprintf("svc-%d", i%3000), fmt.Sprintf("grp-%d", i)))
	}
	for i := range n.pairs {
		assert.LessOrEqual(t, len(n.pairs[i].m), maxNamesPerStripe)
	}
}
