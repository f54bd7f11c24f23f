package procwatch

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCPUGrowsWithWork(t *testing.T) {
	before, err := CPU(os.Getpid())
	require.NoError(t, err)
	self0 := SelfCPU()
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
	}
	after, err := CPU(os.Getpid())
	require.NoError(t, err)
	// /proc counts in 10 ms ticks; 200 ms of spinning is well above that.
	assert.Greater(t, after-before, 100*time.Millisecond)
	assert.Greater(t, SelfCPU()-self0, 100*time.Millisecond)
}

// A locked thread's CPU counts its own spinning, not another goroutine's.
func TestThreadCPUIsTheCallersOnly(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // another goroutine spins meanwhile
		defer close(done)
		for !stop.Load() {
		}
	}()
	thread0, self0 := ThreadCPU(), SelfCPU()
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
	}
	thread := ThreadCPU() - thread0
	time.Sleep(100 * time.Millisecond) // only the other goroutine runs
	stop.Store(true)
	<-done
	assert.Greater(t, thread, 50*time.Millisecond)
	assert.Greater(t, SelfCPU()-self0, thread+50*time.Millisecond, "the process counts both")
}

func TestRSSSeesAllocatedMemory(t *testing.T) {
	before, err := RSSMiB(os.Getpid())
	require.NoError(t, err)
	block := make([]byte, 64<<20)
	for i := range block {
		block[i] = 1
	}
	after, err := RSSMiB(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after-before, 60)
	_ = block[len(block)-1]
}

func TestMissingProcessIsAnError(t *testing.T) {
	_, err := CPU(1 << 30)
	assert.Error(t, err)
	_, err = RSSMiB(1 << 30)
	assert.Error(t, err)
}

func TestWaitReady(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	running := make(chan struct{})
	assert.ErrorIs(t, WaitReady(srv.URL, running, 300*time.Millisecond), ErrNotReady)
	ready.Store(true)
	assert.NoError(t, WaitReady(srv.URL, running, time.Second))

	exited := make(chan struct{})
	close(exited)
	port, err := FreePort()
	require.NoError(t, err)
	assert.ErrorIs(t, WaitReady(fmt.Sprintf("http://127.0.0.1:%d/", port), exited, time.Second), ErrExited)
}
