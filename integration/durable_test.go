package integration

import (
	be "encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// crashFragment is one service's fragment of trace n: a span of its own
// (span ID n*8+part), a child of the root (part 0) unless it is the root.
func crashFragment(td ptrace.Traces, n, part int, service string) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(crashTraceID(n))
	s.SetSpanID(crashSpanID(n, part))
	if part != 0 {
		s.SetParentSpanID(crashSpanID(n, 0))
	}
	s.SetName(service + " op")
	now := time.Now()
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-10 * time.Millisecond)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
}

func crashTraceID(n int) pcommon.TraceID {
	var tid [16]byte
	be.BigEndian.PutUint64(tid[0:], uint64(n)+1)
	be.BigEndian.PutUint64(tid[8:], uint64(n)*0x9E3779B97F4A7C15+1)
	return tid
}

func crashSpanID(n, part int) pcommon.SpanID {
	var id [8]byte
	be.BigEndian.PutUint64(id[:], uint64(n)*8+uint64(part)+1)
	return id
}

// sendFragments sends, for each trace in [from, to), the fragment of the
// given part, in requests of 50 traces, and requires each to be acknowledged.
func sendFragments(t *testing.T, c *collector, from, to, part int, service string) {
	t.Helper()
	for lo := from; lo < to; lo += 50 {
		td := ptrace.NewTraces()
		for n := lo; n < min(lo+50, to); n++ {
			crashFragment(td, n, part, service)
		}
		require.NoError(t, c.sendGRPC(td), "acknowledged")
	}
}

// TestDurableCrashLosesNothingAcknowledged: a sampler is SIGKILLed with
// traces buffered (their first two fragments in), traces decided and kept
// whose spans may still sit in the backend queue, and late spans just
// forwarded. It restarts on the same volume; the traces' roots arrive at
// the new process. With durable on, every acknowledged span reaches the
// backend once: the replayed traces are whole and the decided ones are
// not sent again. A torn write at the log's tail is skipped and counted.
// With durable off (and the in-memory queue of before), the buffered
// traces' spans are lost: the test sees the loss it guards against.
func TestDurableCrashLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	for _, durable := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[durable]
		t.Run(name, func(t *testing.T) { crashAndReplay(t, durable) })
	}
}

func crashAndReplay(t *testing.T, durable bool) {
	const traces = 400 // 0..199 decided before the kill, 200..399 buffered
	sink := startSink(t)
	env := map[string]string{
		"OTLP_BACKEND_ENDPOINT":    sink.Addr,
		"BUDGET_SPANS_PER_SECOND":  "1000000", // keep every trace: every span is expected
		"DECISION_WAIT":            "8s",
		"DECISION_WAIT_AFTER_ROOT": "2s",
		"OTELCOL_COST_DATA_DIR":    t.TempDir(),
		"DURABLE_ENABLED":          map[bool]string{false: "false", true: "true"}[durable],
		"LOG_LEVEL":                "info",
	}
	configs := []string{configPath("sampler.yaml")}
	if !durable {
		overlay := filepath.Join(t.TempDir(), "memory-queue.yaml")
		require.NoError(t, os.WriteFile(overlay, []byte("exporters:\n  otlp_grpc/backend:\n    sending_queue:\n      storage: null\n"), 0o600))
		configs = append(configs, overlay)
	}
	first := startCollector(t, env, configs...)
	// Decided before the kill: child and root, then (after the decision)
	// a late span, forwarded at arrival.
	sendFragments(t, first, 0, 200, 1, "db")
	sendFragments(t, first, 0, 200, 0, "frontend")
	eventually(t, 30*time.Second, func() bool { return sink.spanCount() >= 400 }, "the first 200 traces decided and kept")
	sendFragments(t, first, 0, 200, 2, "cache")
	// Buffered at the kill: two fragments each, no root yet.
	sendFragments(t, first, 200, traces, 1, "db")
	sendFragments(t, first, 200, traces, 2, "cache")
	first.kill()

	if durable {
		// A write torn by the kill: garbage after the last whole record.
		segs, err := filepath.Glob(filepath.Join(env["OTELCOL_COST_DATA_DIR"], "tail", "budget_tail_sampling__traces", "wal-*.log"))
		require.NoError(t, err)
		require.NotEmpty(t, segs, "the log is on disk")
		f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte{200, 1, 0, 0, 7, 7, 7, 7, 1, 2, 3})
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}

	second := startCollector(t, env, configs...)
	sendFragments(t, second, 200, traces, 0, "frontend")
	waitQuiet(t, []*otlpSink{sink}, 4*time.Second)
	eventually(t, 30*time.Second, func() bool { return sink.spanCount() >= 3*traces || !durable }, "every span at the backend")
	waitQuiet(t, []*otlpSink{sink}, 3*time.Second)

	missing, duplicated, whole := 0, 0, 0
	for n := range traces {
		tid := crashTraceID(n)
		seen := map[pcommon.SpanID]int{}
		for _, s := range sink.trace(tid) {
			seen[s.SpanID()]++
		}
		for part := range 3 {
			switch c := seen[crashSpanID(n, part)]; {
			case c == 0:
				missing++
			case c > 1:
				duplicated += c - 1
			}
		}
		if len(seen) == 3 {
			whole++
		}
	}
	f := second.metrics()
	replayed, _ := metricValue(f, "otelcol_processor_budget_tail_sampling_durable_replayed_spans_total", nil)
	corrupt, _ := metricValue(f, "otelcol_processor_budget_tail_sampling_durable_corrupt_segments_total", nil)
	t.Logf("durable %v: %d of %d acknowledged spans missing, %d sent twice, %d of %d traces whole; replayed %.0f spans, %.0f corrupt segments",
		durable, missing, 3*traces, duplicated, whole, traces, replayed, corrupt)
	if !durable {
		assert.GreaterOrEqual(t, missing, 400, "without the log, the buffered traces' first fragments die with the process")
		return
	}
	assert.Zero(t, missing, "no acknowledged span lost")
	assert.Zero(t, duplicated, "no span sent twice: decided traces are not replayed")
	assert.Equal(t, traces, whole, "every trace whole")
	assert.Equal(t, 400.0, replayed, "the buffered traces' spans replayed")
	assert.Equal(t, 1.0, corrupt, "the torn tail counted")
	assert.True(t, strings.Contains(second.out.String(), "durable log replayed"), "the replay is logged")
}

// TestDurableUnwritableDirectoryFailsAtStart: a log directory that cannot
// be created, or is on a read-only file system, is an error at start
// naming the field.
func TestDurableUnwritableDirectoryFailsAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Run("not a directory", func(t *testing.T) {
		data := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, "tail"), []byte("a file where the log's directory goes"), 0o600))
		_, err := launchCollector(t, newEndpoints(t), map[string]string{
			"OTLP_BACKEND_ENDPOINT": "127.0.0.1:1", "OTELCOL_COST_DATA_DIR": data,
		}, configPath("sampler.yaml"))
		require.Error(t, err, "the collector must not start")
		assert.Contains(t, err.Error(), "durable.directory")
		assert.Contains(t, err.Error(), "not a directory")
	})
	t.Run("read-only file system", func(t *testing.T) {
		ro := mountTmpfs(t, "ro,size=1m")
		overlay := filepath.Join(t.TempDir(), "ro.yaml")
		require.NoError(t, os.WriteFile(overlay, []byte("processors:\n  budget_tail_sampling:\n    durable:\n      directory: "+ro+"\n"), 0o600))
		_, err := launchCollector(t, newEndpoints(t), map[string]string{"OTLP_BACKEND_ENDPOINT": "127.0.0.1:1"},
			configPath("sampler.yaml"), overlay)
		require.Error(t, err, "the collector must not start")
		assert.Contains(t, err.Error(), "durable.directory")
		assert.Contains(t, err.Error(), "read-only file system")
	})
}

// mountTmpfs mounts a tmpfs with options (a small or read-only disk) in a
// directory of the test's, unmounted when it ends; it skips without root.
func mountTmpfs(t *testing.T, options string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}
