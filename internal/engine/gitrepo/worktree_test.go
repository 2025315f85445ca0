package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkTreeIsWhatGitDiffHEADSees: tracked files as they are on disk, staged or not; a file
// deleted on disk is gone; an untracked one is not read; ignored ones neither.
func TestWorkTreeIsWhatGitDiffHEADSees(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": "a: 1\n", "b.yaml": "b: 1\n", "sub/c.yaml": "c: 1\n", ".gitignore": "bin/\n",
	})
	gitOut(t, dir, "init", "-q")
	gitOut(t, dir, "add", "-A")
	gitOut(t, dir, "commit", "-qm", "first")
	head := gitOut(t, dir, "rev-parse", "HEAD")

	repo, err := Open(filepath.Join(dir, "sub")) // any directory of the work tree
	require.NoError(t, err)
	wt, err := repo.WorkTree()
	require.NoError(t, err)
	assert.False(t, wt.Dirty(), "a clean work tree is HEAD's")
	assert.Equal(t, head, wt.Parent)
	assert.Equal(t, head, wt.Commit())
	assert.Empty(t, wt.Revision)

	writeFiles(t, dir, map[string]string{
		"a.yaml":       "a: 2\n",   // changed, not staged
		"new.yaml":     "n: 1\n",   // new, staged below
		"untracked.md": "u\n",      // never added
		"bin/tool":     "binary\n", // ignored
	})
	gitOut(t, dir, "add", "new.yaml")
	require.NoError(t, os.Remove(filepath.Join(dir, "b.yaml")))

	wt, err = repo.WorkTree()
	require.NoError(t, err)
	assert.True(t, wt.Dirty())
	assert.Equal(t, filepath.Clean(dir), filepath.Clean(wt.WorkTree))
	got := map[string]string{}
	for name, data := range wt.Files {
		got[name] = string(data)
	}
	want := map[string]string{"a.yaml": "a: 2\n", "new.yaml": "n: 1\n", "sub/c.yaml": "c: 1\n", ".gitignore": "bin/\n"}
	assert.Empty(t, cmp.Diff(want, got), "(-want +got)")
	assert.Equal(t, []string{"a.yaml", "b.yaml", "new.yaml"}, wt.Changed)
}

// TestWorkTreeSaysWhatItDoesNotRead: a file staged and then changed back on disk is staged
// content the work tree does not hold, and is named; a file a sparse checkout leaves off the
// disk (skip-worktree) is read from the index, not taken as deleted.
func TestWorkTreeSaysWhatItDoesNotRead(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"})
	gitOut(t, dir, "init", "-q")
	gitOut(t, dir, "add", "-A")
	gitOut(t, dir, "commit", "-qm", "first")
	writeFiles(t, dir, map[string]string{"a.yaml": "a: 80\n"})
	gitOut(t, dir, "add", "a.yaml")
	writeFiles(t, dir, map[string]string{"a.yaml": "a: 1\n"}) // git status: MM
	gitOut(t, dir, "update-index", "--skip-worktree", "b.yaml")
	require.NoError(t, os.Remove(filepath.Join(dir, "b.yaml")))

	repo, err := Open(dir)
	require.NoError(t, err)
	wt, err := repo.WorkTree()
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml"}, wt.Staged, "a commit now would take a: 80, which the disk does not hold")
	assert.True(t, wt.Dirty(), "the index is not HEAD's")
	assert.Empty(t, wt.Changed, "the disk is HEAD's")
	assert.Equal(t, "b: 1\n", string(wt.Files["b.yaml"]), "skip-worktree: read from the index")
}

// TestWorkTreeOfAClone: a repository cloned from a URL has no work tree to read.
func TestWorkTreeOfAClone(t *testing.T) {
	bare := newBare(t, t.TempDir(), "r.git", map[string]string{"a.yaml": "a: 1\n"})
	repo, err := Open("file://" + bare)
	require.NoError(t, err)
	_, err = repo.WorkTree()
	assert.True(t, errors.Is(err, ErrNoWorkTree), "%v", err)
}
