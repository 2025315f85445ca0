package gitrepo

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	bare := newBare(t, t.TempDir(), "platform.git", map[string]string{"overlays/dev/kustomization.yaml": "resources: []\n"})
	work := clone(t, bare)
	first := gitOut(t, work, "rev-parse", "HEAD")
	writeFiles(t, work, map[string]string{"overlays/dev/kustomization.yaml": "resources: [a.yaml]\n"})
	gitOut(t, work, "commit", "-qam", "second")
	repo, err := Open(work)
	require.NoError(t, err)

	data, err := repo.ReadFile(first, "overlays/dev/kustomization.yaml")
	require.NoError(t, err)
	assert.Equal(t, "resources: []\n", string(data), "the file at the revision asked for")
	data, err = repo.ReadFile("HEAD", "overlays/dev/kustomization.yaml")
	require.NoError(t, err)
	assert.Equal(t, "resources: [a.yaml]\n", string(data))
	_, err = repo.ReadFile(first, "overlays/dev/adopt-deployment-api.yaml")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = repo.ReadFile("no-such-branch", "overlays/dev/kustomization.yaml")
	assert.Error(t, err)
	assert.NotErrorIs(t, err, fs.ErrNotExist)
}

func TestReadDir(t *testing.T) {
	bare := newBare(t, t.TempDir(), "platform.git", map[string]string{
		"overlays/dev/kustomization.yaml": "resources: []\n", "overlays/prod/kustomization.yaml": "resources: []\n", "README.md": "x\n"})
	work := clone(t, bare)
	repo, err := Open(work)
	require.NoError(t, err)
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{dir: "overlays", want: []string{"dev", "prod"}},
		{dir: "overlays/dev/", want: []string{"kustomization.yaml"}},
		{dir: "", want: []string{"README.md", "overlays"}},
	} {
		got, err := repo.ReadDir("HEAD", tc.dir)
		require.NoError(t, err, tc.dir)
		assert.ElementsMatch(t, tc.want, got, tc.dir)
	}
	for _, dir := range []string{"apps", "README.md", "overlays/dev/kustomization.yaml"} {
		_, err = repo.ReadDir("HEAD", dir)
		assert.ErrorIs(t, err, fs.ErrNotExist, dir)
	}
}
