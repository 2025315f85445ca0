package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSnapshotsAndFirstParents: the first-parent chain skips what a merge brought in and stops
// at max; Snapshots.At reads each commit as Snapshot does (files added, changed, removed, a
// symlink left out), sharing what commits have in common.
func TestSnapshotsAndFirstParents(t *testing.T) {
	bare := newBare(t, t.TempDir(), "repo.git", map[string]string{"a/one.yaml": "1\n", "b/two.yaml": "2\n"})
	work := clone(t, bare)
	gitOut(t, work, "checkout", "-q", "-b", "side")
	writeFiles(t, work, map[string]string{"side.txt": "side\n"})
	gitOut(t, work, "add", "-A")
	gitOut(t, work, "commit", "-q", "-m", "side")
	gitOut(t, work, "checkout", "-q", "main")
	writeFiles(t, work, map[string]string{"a/one.yaml": "one\n"})
	require.NoError(t, os.Remove(filepath.Join(work, "b", "two.yaml")))
	require.NoError(t, os.Symlink("a/one.yaml", filepath.Join(work, "link")))
	gitOut(t, work, "add", "-A")
	gitOut(t, work, "commit", "-q", "-m", "main")
	gitOut(t, work, "merge", "-q", "--no-ff", "-m", "merge side", "side")

	repo, err := Open(work)
	require.NoError(t, err)
	chain, err := repo.FirstParents(context.Background(), "", 0)
	require.NoError(t, err)
	var subjects []string
	for _, c := range chain {
		subjects = append(subjects, c.Subject)
	}
	assert.Equal(t, []string{"merge side", "main", "initial"}, subjects)
	two, err := repo.FirstParents(context.Background(), "HEAD", 2)
	require.NoError(t, err)
	assert.Len(t, two, 2)

	snaps := repo.Snapshots()
	for _, c := range chain {
		want, err := repo.Snapshot(c.Hash)
		require.NoError(t, err)
		got, err := snaps.At(c.Hash)
		require.NoError(t, err)
		assert.Equal(t, c.Hash, got.Revision)
		if d := cmp.Diff(want.Files, got.Files); d != "" {
			t.Errorf("%s: files (-Snapshot +At):\n%s", c.Subject, d)
		}
		assert.Equal(t, want.Symlinks, got.Symlinks, c.Subject)
	}
	head, err := snaps.At("HEAD")
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"a/one.yaml": []byte("one\n"), "side.txt": []byte("side\n")}, head.Files)
	assert.Equal(t, map[string]bool{"link": true}, head.Symlinks, "the symlink's name, without its content")
	wt, err := repo.WorkTree()
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"link": true}, wt.Symlinks, "a work tree's too")
}
