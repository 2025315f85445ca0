package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteReplacesWholeAndLeavesNothingBehind: the new content replaces the old, the mode is
// private, and no temporary file stays in the directory.
func TestWriteReplacesWholeAndLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	require.NoError(t, Write(p, []byte("old")))
	require.NoError(t, Write(p, []byte("new")))
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "new", string(data))
	info, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	assert.Error(t, Write(filepath.Join(dir, "missing", "x"), nil), "a missing directory is an error")
}
