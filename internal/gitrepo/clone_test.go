package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A clone kept on disk (RemoteConfig.Dir) is a bare repository the next Open reuses: it fetches
// only what is new, and a directory holding a clone of another URL is made anew. HEAD resolves
// to the remote's HEAD, as Argo CD's targetRevision HEAD does.
func TestRemoteCloneOnDisk(t *testing.T) {
	root := t.TempDir()
	bare := newBare(t, root, "platform.git", map[string]string{"a.txt": "one\n"})
	work := clone(t, bare)
	dir := filepath.Join(root, "state", "repo")
	open := func(url string) *Repo {
		r, err := NewRemote(RemoteConfig{URL: url, Dir: dir})
		require.NoError(t, err)
		repo, err := r.Open(context.Background())
		require.NoError(t, err)
		return repo
	}
	first := open("file://" + bare)
	head := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	got, err := first.Resolve("HEAD")
	require.NoError(t, err)
	assert.Equal(t, head, got, "HEAD is the remote's HEAD")
	out := gitOut(t, dir, "rev-parse", "refs/remotes/origin/main")
	assert.Equal(t, head, strings.TrimSpace(out), "the clone is a bare repository on disk that git reads")

	writeFiles(t, work, map[string]string{"a.txt": "two\n"})
	gitOut(t, work, "commit", "-qam", "two")
	gitOut(t, work, "push", "-q", "origin", "main")
	packs := func() []string {
		p, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
		return p
	}
	before := packs()
	second := open("file://" + bare) // a new process: the same directory
	head2 := strings.TrimSpace(gitOut(t, work, "rev-parse", "HEAD"))
	got, err = second.Resolve("main")
	require.NoError(t, err)
	assert.Equal(t, head2, got)
	assert.Subset(t, packs(), before, "the earlier pack is kept: only the new commit was fetched")
	assert.Len(t, packs(), len(before)+1)

	other := newBare(t, root, "other.git", map[string]string{"b.txt": "b\n"})
	third := open("file://" + other)
	snap, err := third.Snapshot("HEAD")
	require.NoError(t, err)
	assert.Contains(t, snap.Files, "b.txt")
	assert.NotContains(t, snap.Files, "a.txt", "the clone of the other URL was replaced")
	_, err = os.Stat(filepath.Join(dir, "config"))
	assert.NoError(t, err)
}

// A file larger than MaxFileSize (a binary committed by mistake) is left out of a snapshot and
// listed with its size, by Snapshot and by Snapshots alike; the manifests are read.
func TestSnapshotOmitsLargeFiles(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("x", MaxFileSize+1)
	bare := newBare(t, root, "platform.git", map[string]string{"overlays/prod/kustomization.yaml": "resources: []\n", "auditor": big})
	repo, err := Open("file://" + bare)
	require.NoError(t, err)
	snap, err := repo.Snapshot("")
	require.NoError(t, err)
	shared, err := repo.Snapshots().At("HEAD")
	require.NoError(t, err)
	for _, s := range []*Snapshot{snap, shared} {
		assert.Equal(t, map[string]int64{"auditor": MaxFileSize + 1}, s.Omitted)
		assert.NotContains(t, s.Files, "auditor")
		assert.Equal(t, "resources: []\n", string(s.Files["overlays/prod/kustomization.yaml"]))
	}
}
