// Package procwatch watches local processes for the integration tests and
// the benchmark driver: a free loopback port to give one, when it answers
// over HTTP, and its CPU time and resident memory from /proc (Linux).
package procwatch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FreePort returns a loopback port nobody listens on right now. Another
// process can still take it before it is used: callers retry on a clash.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	// ErrExited: the process exited before it answered.
	ErrExited = errors.New("exited")
	// ErrNotReady: it did not answer 200 in time.
	ErrNotReady = errors.New("not ready")
)

// WaitReady polls url every 100ms until it answers 200 (nil), the process
// behind it exits (exited closes: ErrExited), or timeout passes
// (ErrNotReady).
func WaitReady(url string, exited <-chan struct{}, timeout time.Duration) error {
	client := http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			return ErrExited
		default:
		}
		if resp, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return ErrNotReady
}

// CPU is a process's user + system CPU time.
func CPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold spaces: count fields
	// after it. utime and stime are fields 14 and 15 of the line, so 12th
	// and 13th after the name.
	end := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const clockTicks = 100 // USER_HZ, fixed at 100 on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// SelfCPU is this process's user + system CPU time.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ThreadCPU is the calling thread's CPU time: meaningful from a goroutine
// locked to its thread (runtime.LockOSThread), where it is that goroutine's
// own work, GC assists included, and not the other goroutines'.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// RSSMiB is a process's resident set size in MiB.
func RSSMiB(pid int) (int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.Atoi(f[0])
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// Output collects a child process's stdout and stderr; it can be read while
// the process still writes.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
