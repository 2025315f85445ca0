package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A command that writes to a remote clones it onto disk, in a temporary directory (a git
// repository there: its pack on disk), and main's cleanup removes it.
func TestCommandsCloneOntoDiskAndCleanUp(t *testing.T) {
	gitOpts.cleanup()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	l, _ := pinnedLedgerRepo(t)
	out, err := runCmd(t, newPromoteCommand(), "--repo", "file://"+l.bare, "--from", "dev", "--to", "staging", "--dry-run")
	require.NoError(t, err, out)
	packs, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*", "objects", "pack", "pack-*.pack"))
	require.NoError(t, err)
	assert.NotEmpty(t, packs, "the clone is on disk")
	gitOpts.cleanup()
	left, err := filepath.Glob(filepath.Join(tmp, "auditor-clone-*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}
