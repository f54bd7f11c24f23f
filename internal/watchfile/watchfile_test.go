package watchfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each content is handed over once; a rejected one is rejected until the
// file changes; a missing file is reported once, and coming back with the
// running content changes nothing.
func TestWatchFileHandsEachContentOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.yaml")
	w := New(path, "x.path")
	calls := 0
	apply := func(data []byte, _ string) (string, error) {
		calls++
		if string(data) == "bad" {
			return "", errors.New("bad content")
		}
		return string(data), nil
	}
	changed, err := w.Check(apply)
	assert.True(t, changed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "x.path")
	changed, err = w.Check(apply)
	assert.False(t, changed, "a missing file is reported once")
	assert.NoError(t, err)

	require.NoError(t, os.WriteFile(path, []byte("v1"), 0o600))
	changed, err = w.Check(apply)
	assert.True(t, changed)
	require.NoError(t, err)
	assert.Equal(t, "v1", w.Version())
	changed, _ = w.Check(apply)
	assert.False(t, changed)
	assert.Equal(t, 1, calls)

	require.NoError(t, os.WriteFile(path, []byte("bad"), 0o600))
	_, err = w.Check(apply)
	require.Error(t, err)
	assert.True(t, w.Rejected())
	assert.Equal(t, "v1", w.Version(), "the running version stays")
	_, err = w.Check(apply)
	assert.NoError(t, err, "reported once")
	assert.True(t, w.Rejected(), "and rejected while it stays")

	require.NoError(t, os.Remove(path))
	_, err = w.Check(apply)
	require.Error(t, err)
	require.NoError(t, os.WriteFile(path, []byte("bad"), 0o600))
	changed, _ = w.Check(apply)
	assert.False(t, changed, "back with the content last read")
	assert.True(t, w.Rejected(), "which is still rejected")
	applied, rejected := w.Reloads()
	assert.Equal(t, [2]int64{1, 3}, [2]int64{applied, rejected})
}
