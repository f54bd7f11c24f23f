package durable // import "github.com/otelcol-cost/otelcol-cost/processor/budgettailsamplingprocessor/internal/durable"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockName is the file in a log's directory whose flock the log holds for
// its lifetime; it says who holds it.
const lockName = "LOCK"

// ErrLocked is Open's error when another log (another process, or another
// instance in this one) holds the directory.
var ErrLocked = errors.New("durable log directory in use")

// lockDir takes dir's lock without waiting, and writes the holder into
// the lock file. Two logs appending to one directory pick the same next
// segment, and one's Retain deletes the other's undecided traces: the
// second is refused instead. The kernel lets go of a flock when its
// process dies, so a killed sampler leaves no stale lock.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 512))
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "an unknown holder"
			}
			return nil, fmt.Errorf("%w: %s is locked by %s (%s); each sampler instance needs a directory of its own", ErrLocked, dir, who, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d on host %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holder), 0)
	}
	return f, nil
}
